"""Microphone input through sounddevice (PortAudio), imported only when a device is used.

The stream is opened at 16 kHz, mono, int16: PortAudio/ALSA convert from the device's own
rate and format. The audio callback only copies each block into an unbounded queue (it never
drops audio); the recognizer reads the queue in its own loop. Overflows reported by PortAudio
(audio the device lost because nobody read it in time) are counted in `overflows`.

Tests and CI without a sound card select an ALSA configuration that replays a raw file
(see tests/alsa/) by setting ALSA_CONFIG_PATH before this module opens a device.
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Iterator

import numpy as np

from asr.audio import SAMPLE_RATE


class MicrophoneError(Exception):
    """The input device failed while opening or recording."""


class NoDeviceError(MicrophoneError):
    """No usable input device (none present, or --device names none)."""


def _sounddevice() -> Any:
    try:
        import sounddevice
    except OSError as err:  # the PortAudio library itself is missing
        raise NoDeviceError(f"audio input unavailable ({err})") from None
    return sounddevice


def list_devices() -> str:
    """A table of the audio devices PortAudio sees (the default input marked with '>')."""
    devices = _sounddevice().query_devices()
    if len(devices) == 0:
        raise NoDeviceError("no audio devices found")
    return str(devices)


def _resolve(sd: Any, device: str | None) -> tuple[int | str | None, str]:
    """--device value -> (what sounddevice accepts, device name); raises NoDeviceError."""
    spec: int | str | None = int(device) if device is not None and device.isdigit() else device
    try:
        info = sd.query_devices(spec, kind="input") if spec is not None else sd.query_devices(kind="input")
    except (ValueError, sd.PortAudioError) as err:
        what = f"no input device matches {device!r}" if device is not None else "no default audio input device"
        raise NoDeviceError(f"{what} ({err}); see --list-devices") from None
    if info["max_input_channels"] < 1:
        raise NoDeviceError(f"device {info['name']!r} has no input channels; see --list-devices")
    return spec, str(info["name"])


class Microphone:
    """Context manager over one input stream; iterate `chunks()` for 16 kHz float32 arrays."""

    def __init__(self, device: str | None = None, block_ms: float = 100.0, max_seconds: float | None = None):
        self.device, self.block = device, max(1, round(block_ms * SAMPLE_RATE / 1000))
        self.max_samples = None if max_seconds is None else round(max_seconds * SAMPLE_RATE)
        self.queue: queue.Queue[np.ndarray | None] = queue.Queue()
        self.overflows = 0  # blocks PortAudio reported as lost
        self.captured = 0  # samples queued so far
        self.name = ""
        self._stream: Any = None
        self._stopped = threading.Event()

    def __enter__(self) -> "Microphone":
        sd = _sounddevice()
        spec, self.name = _resolve(sd, self.device)
        try:
            self._stream = sd.InputStream(samplerate=SAMPLE_RATE, channels=1, dtype="int16", device=spec,
                                          blocksize=self.block, callback=self._callback,
                                          finished_callback=lambda: self.queue.put(None))
            self._stream.start()
        except (sd.PortAudioError, ValueError) as err:
            raise MicrophoneError(f"{self.name}: cannot open at 16 kHz mono int16 ({err})") from None
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stream is not None:
            self._stream.close()  # also ends the stream if it still runs

    def _callback(self, indata: np.ndarray, frames: int, time: Any, status: Any) -> None:
        """PortAudio's thread: copy the block into the queue; stop after max_samples."""
        if status.input_overflow:
            self.overflows += 1
        block = indata[:, 0].copy()
        if self.max_samples is not None:
            block = block[: self.max_samples - self.captured]
        self.captured += block.size
        if block.size:
            self.queue.put(block)
        if self._stopped.is_set() or (self.max_samples is not None and self.captured >= self.max_samples):
            raise _callback_stop()

    def stop(self) -> None:
        """Ask the stream to end after the current block (safe from a signal handler)."""
        self._stopped.set()

    def chunks(self) -> Iterator[np.ndarray]:
        """Captured audio as float32 arrays in [-1, 1), until the stream ends or `stop()`."""
        while True:
            try:
                block = self.queue.get(timeout=0.2)
            except queue.Empty:
                if self._stopped.is_set() and not self._stream.active:
                    return
                continue
            if block is None:
                return
            yield block.astype(np.float32) / 32768.0


def _callback_stop() -> Exception:
    import sounddevice
    return sounddevice.CallbackStop()
