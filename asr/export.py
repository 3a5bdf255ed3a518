"""Export a model for deployment without torch.

    python -m asr.export --onnx DIR [--int8] [--model PATH]

writes DIR/encoder.onnx (the streaming step), model.json (config, CMVN, state contract, info),
tokenizer.bin and README.md (the tensor contract); --int8 adds DIR/encoder.int8.onnx, a dynamically
quantised copy. Run it with `python -m asr.transcribe --backend onnx --onnx-dir DIR ...`.
"""
from __future__ import annotations

import sys

from asr import cli
from asr.audio import interrupt
from asr.model.errors import ModelError, needs_train_extra


@interrupt.handled("export")
def main(argv: list[str] | None = None) -> int:
    parser = cli.new_parser("asr.export", __doc__.split("\n\n")[0])
    parser.add_argument("--onnx", required=True, metavar="DIR", help="folder to write the ONNX export to")
    parser.add_argument("--int8", action="store_true", help="also write a dynamically quantised int8 graph")
    parser.add_argument("--model", help="model file (.safetensors); default: the bundled model")
    args = parser.parse_args(argv)

    try:
        from asr.model.export import export_onnx  # torch and onnx: the [train] extra
        from asr.model.loader import load_model
        encoder, tokenizer, info = load_model(args.model)
        written = export_onnx(encoder, tokenizer, info, args.onnx, int8=args.int8)
    except ModuleNotFoundError as err:
        cli.error("export", needs_train_extra("asr.export", err))
        return 1
    except (ModelError, ValueError, OSError) as err:
        cli.error("export", err)
        return 1
    for path in written:
        print(f"{path}\t{path.stat().st_size} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
