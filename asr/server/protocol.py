"""The /asr WebSocket protocol: what a client may send, and the close codes the server uses.

Client -> server:
    {"sample_rate": N, "hotwords": [...], "spoken_form": false}   optional first text message: the rate (default
                           16000; others are resampled), this stream's hotword list (lines as in a --hotwords
                           file), and whether its finals keep numbers as the words said
    binary                 little-endian int16 mono PCM, any length (an even number of bytes)
    {"type": "end"}        no more audio: the server flushes, sends the last final(s), closes 1000
Server -> client: one JSON text message per emission (the keys of `asr.stream --json`), or
    {"error": "...", "code": N} just before it closes with close code N.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np

NORMAL = 1000  # the stream ended as asked
GOING_AWAY = 1001  # the server is stopping: the stream got its final(s) for the audio heard so far
UNSUPPORTED = 1003  # text that is not the protocol
INVALID = 1007  # malformed audio (odd byte count) or a malformed first message
POLICY = 1008  # idle too long
TOO_BIG = 1009  # a message over the size limit
INTERNAL = 1011  # the server failed on this stream (the others go on)
TRY_LATER = 1013  # every stream slot is taken

MIN_RATE, MAX_RATE = 4000, 192000


START_KEYS = ("sample_rate", "hotwords", "spoken_form")  # what a stream's optional first message may set


class ProtocolError(Exception):
    """A client message that breaks the protocol; `code` is the close code to answer with."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code

    def event(self) -> str:
        """The error event sent before closing."""
        return json.dumps({"error": str(self), "code": self.code})


@dataclass(frozen=True)
class Start:
    sample_rate: int = 16000
    hotwords: tuple[str, ...] = ()  # lines of a hotword list (asr.decoding.hotwords), for this stream only
    spoken_form: bool = False  # this stream's finals with numbers as the words said (not "$25")


@dataclass(frozen=True)
class End:
    pass


def parse_text(text: str, first: bool) -> Start | End:
    """A text message -> Start (only as the first message) or End; ProtocolError otherwise."""
    try:
        message = json.loads(text)
    except ValueError:
        raise ProtocolError("text message is not JSON", UNSUPPORTED) from None
    if not isinstance(message, dict):
        raise ProtocolError("text message must be a JSON object", UNSUPPORTED)
    if message.get("type") == "end" and len(message) == 1:
        return End()
    if set(message) & set(START_KEYS) and set(message) <= {*START_KEYS, "type"} and message.get("type", "start") == "start":
        if not first:
            raise ProtocolError("sample_rate, hotwords and spoken_form may only be sent before any audio", UNSUPPORTED)
        rate = message.get("sample_rate", 16000)
        if not isinstance(rate, int) or isinstance(rate, bool) or not MIN_RATE <= rate <= MAX_RATE:
            raise ProtocolError(f"sample_rate must be an integer in {MIN_RATE}..{MAX_RATE} (got {rate!r})", INVALID)
        spoken = message.get("spoken_form", False)
        if not isinstance(spoken, bool):
            raise ProtocolError(f"spoken_form must be true or false (got {spoken!r})", INVALID)
        return Start(rate, _hotword_lines(message.get("hotwords", [])), spoken)
    raise ProtocolError('unknown message: expected {"sample_rate": N, "hotwords": [...], "spoken_form": false} '
                        'or {"type": "end"}', UNSUPPORTED)


def _hotword_lines(value: object) -> tuple[str, ...]:
    """The start message's hotwords: a list of lines, or one string of lines."""
    if isinstance(value, str):
        return tuple(value.splitlines())
    if not isinstance(value, list) or not all(isinstance(line, str) for line in value):
        raise ProtocolError("hotwords must be a list of strings (one word or phrase each, an optional boost after it)",
                            INVALID)
    return tuple(value)


def pcm16(data: bytes, limit: int) -> np.ndarray:
    """A binary message -> float32 samples in [-1, 1); ProtocolError for odd or oversized data."""
    if len(data) > limit:
        raise ProtocolError(f"audio message of {len(data)} bytes is over the limit of {limit}", TOO_BIG)
    if len(data) % 2:
        raise ProtocolError(f"audio message of {len(data)} bytes: int16 PCM needs an even byte count", INVALID)
    return np.frombuffer(data, dtype="<i2").astype(np.float32) / 32768.0
