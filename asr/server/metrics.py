"""What `GET /metrics` exports, in the Prometheus text format (the `prometheus-client` library).

The metrics live at module level, one set per process. With several workers (`asr.serve --workers N`)
the supervisor points PROMETHEUS_MULTIPROC_DIR at a fresh folder before it starts them, every worker
writes its values there, and whichever worker answers a scrape reports the sum over all of them
(`prometheus_client.multiprocess`); with one process the default registry is reported as it is.
"""
from __future__ import annotations

import os
from pathlib import Path

from prometheus_client import (CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Gauge, Histogram,
                               disable_created_metrics, generate_latest, multiprocess)

disable_created_metrics()  # no *_created samples beside every counter and histogram

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

STREAMS_OPEN = Gauge("asr_streams_open", "WebSocket streams open now", multiprocess_mode="livesum")
STREAMS = Counter("asr_streams", "WebSocket streams accepted")
AUDIO_SECONDS = Counter("asr_audio_seconds", "Seconds of audio stepped through the acoustic model")
CHUNK_COMPUTE = Histogram(
    "asr_chunk_compute_seconds", "One stream's step: the batched model pass it went through plus its own decoding",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0))
LATENCY = Histogram(
    "asr_event_latency_seconds", "From receiving the audio message a step needed to sending the step's events",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0))
BATCH_ROWS = Histogram(
    "asr_batch_rows", "Chunks in one batched pass of the acoustic model (one per stream)",
    buckets=(1, 2, 4, 8, 16, 32, 64))
ERRORS = Counter("asr_errors", "Streams ended by an error, by kind", ["kind"])
UPLOADS = Counter("asr_uploads", "POST /v1/audio/transcriptions requests answered, by HTTP status", ["status"])
RSS = Gauge("asr_worker_resident_memory_bytes", "Resident memory of each serving process",
            multiprocess_mode="liveall")

ERROR_KINDS = {1003: "unsupported", 1007: "invalid", 1008: "idle", 1009: "too_big", 1011: "internal",
               1013: "busy"}
OTHER_KINDS = ("unauthorized", "disconnected")  # a refused handshake; a client gone without a close frame
for _kind in (*ERROR_KINDS.values(), *OTHER_KINDS):
    ERRORS.labels(_kind)  # every kind is exported from the start, at 0


def error(code_or_kind: int | str) -> None:
    """Count one error: a close code (see `asr.server.protocol`) or a kind's name."""
    kind = ERROR_KINDS.get(code_or_kind, str(code_or_kind)) if isinstance(code_or_kind, int) else code_or_kind
    ERRORS.labels(kind).inc()


def resident_bytes() -> int:
    """This process's resident set size (Linux /proc; 0 elsewhere)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def exposition() -> tuple[bytes, str]:
    """The body and content type of a scrape: every worker's metrics when several share a folder."""
    RSS.set(resident_bytes())
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST
