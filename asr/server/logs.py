"""asr.serve's log lines on stderr: plain text by default, one JSON object per line with --log-json.

Fields given as `extra=` travel with a record: text lines show them as `key=value` after the message,
JSON lines as keys of their own beside `time`, `level`, `logger`, `message` (and `error`, the
traceback, when there is one).
"""
from __future__ import annotations

import datetime
import json
import logging
import sys

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def _fields(record: logging.LogRecord) -> dict:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


class TextFormatter(logging.Formatter):
    """`asr.serve: message key=value ...` (and the traceback, if any)."""

    def format(self, record: logging.LogRecord) -> str:
        fields = " ".join(f"{k}={v}" for k, v in _fields(record).items())
        line = f"asr.serve: {record.getMessage()}" + (f" ({fields})" if fields else "")
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc)
        entry = {"time": stamp.isoformat(timespec="milliseconds"), "level": record.levelname.lower(),
                 "logger": record.name, "message": record.getMessage(), **_fields(record)}
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str)


def setup(json_lines: bool, level: int = logging.INFO) -> None:
    """Send the `asr.serve` logger's records to stderr in the chosen format (and only there)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if json_lines else TextFormatter())
    logger = logging.getLogger("asr.serve")
    logger.handlers[:] = [handler]
    logger.setLevel(level)
    logger.propagate = False
