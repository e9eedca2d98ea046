"""The embedded default: spans appended as OTLP JSON lines to a local file, with rotation.

Safe with several threads and several processes appending to the same file: every export takes
an exclusive ``flock`` on a sibling lock file, then writes its whole batch with one ``write`` on a
descriptor opened with ``O_APPEND``, so lines never interleave. Rotation happens under the same
lock (``traces.jsonl`` → ``traces.jsonl.1`` → ...), and the file is opened per export, so a process
never keeps writing to a file another process rotated away.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

from llmtrace.sdk._safety import log_once
from llmtrace.sdk.exporters.otlp_json import encode_request

logger = logging.getLogger(__name__)


class OTLPJsonFileExporter(SpanExporter):
    """Appends one ``ExportTraceServiceRequest`` JSON object per line to ``path``."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        max_bytes: int | None = None,
        backups: int | None = None,
    ) -> None:
        # Without arguments (as OTEL_TRACES_EXPORTER=llmtrace_file creates it through the
        # opentelemetry_traces_exporter entry point) the LLMTRACE_FILE_* settings apply.
        if path is None or max_bytes is None or backups is None:
            from llmtrace.options import settings

            current = settings()
            path = current.file_path if path is None else path
            max_bytes = current.file_max_bytes if max_bytes is None else max_bytes
            backups = current.file_backups if backups is None else backups
        self.path = Path(path)
        self.max_bytes = max_bytes
        self.backups = backups
        self._lock_path = self.path.with_name(self.path.name + ".lock")
        self._thread_lock = threading.Lock()
        self._shutdown = False
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        if self._shutdown:
            return SpanExportResult.FAILURE
        if not spans:
            return SpanExportResult.SUCCESS
        try:
            line = (
                json.dumps(encode_request(spans), separators=(",", ":"), ensure_ascii=False) + "\n"
            ).encode("utf-8")
            self._append(line)
        except Exception:
            log_once(logger, f"could not write spans to {self.path}")
            return SpanExportResult.FAILURE
        return SpanExportResult.SUCCESS

    def _append(self, data: bytes) -> None:
        with self._thread_lock:
            lock_fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(lock_fd, fcntl.LOCK_EX)
                self._rotate_if_full(len(data))
                fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
                try:
                    view = memoryview(data)
                    while view:
                        written = os.write(fd, view)
                        view = view[written:]
                finally:
                    os.close(fd)
            finally:
                os.close(lock_fd)  # closing releases the flock

    def _rotate_if_full(self, incoming: int) -> None:
        if self.max_bytes <= 0:
            return
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return
        if size == 0 or size + incoming <= self.max_bytes:
            return
        if self.backups <= 0:
            self.path.unlink()
            return
        for index in range(self.backups - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{index}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{index + 1}"))
        self.path.replace(self.path.with_name(f"{self.path.name}.1"))

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True

    def shutdown(self) -> None:
        self._shutdown = True
