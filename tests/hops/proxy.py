"""A TCP proxy that puts a fixed latency on the wire: every byte is forwarded ``delay`` seconds
after it arrived, in both directions (latency, not bandwidth: bytes in flight overlap).

A request through it waits ``delay`` longer for its first byte to reach the server and ``delay``
longer for the answer to come back, so a hop through it gains ``2 * delay`` of network time.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time

_CHUNK = 65536


class DelayingProxy:
    """Listens on a free loopback port and forwards every connection to ``upstream``."""

    def __init__(self, upstream_port: int, delay: float) -> None:
        self.upstream_port = upstream_port
        self.delay = delay
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = threading.Event()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> DelayingProxy:
        threading.Thread(target=self._accept, daemon=True, name="delaying-proxy").start()
        return self

    def stop(self) -> None:
        self._closed.set()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            for sock in (client, upstream):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._pipe(client, upstream)
            self._pipe(upstream, client)

    def _pipe(self, source: socket.socket, target: socket.socket) -> None:
        """Read from ``source`` and write each chunk to ``target`` ``delay`` after it arrived."""
        pending: queue.Queue[tuple[float, bytes]] = queue.Queue()

        def read() -> None:
            with contextlib.suppress(OSError):
                while data := source.recv(_CHUNK):
                    pending.put((time.monotonic() + self.delay, data))
            pending.put((time.monotonic() + self.delay, b""))

        def write() -> None:
            while True:
                due, data = pending.get()
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                try:
                    if not data:
                        target.shutdown(socket.SHUT_WR)
                        return
                    target.sendall(data)
                except OSError:
                    return

        threading.Thread(target=read, daemon=True).start()
        threading.Thread(target=write, daemon=True).start()
