"""init()'s default instruments a library when the application imports it, not before."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

from tests.subprocesses import clean_environment, run

REPO = Path(__file__).resolve().parents[2]


def test_unimported_libraries_are_not_imported_but_instrumented_on_import(tmp_path):
    code = textwrap.dedent(
        """
        import sys
        import llmtrace
        from llmtrace.instrumentation import registry

        llmtrace.init(service_name="s", exporter="none")
        assert "chromadb" not in sys.modules and "qdrant_client" not in sys.modules
        assert "qdrant" not in registry.instrumented()

        import qdrant_client  # the application imports it later
        assert "qdrant" in registry.instrumented()
        from qdrant_client import QdrantClient
        assert hasattr(QdrantClient.query_points, "__wrapped__")

        llmtrace.shutdown()
        assert not hasattr(QdrantClient.query_points, "__wrapped__")
        print("ok")
        """
    )
    result = run([sys.executable, "-c", code], tmp_path, clean_environment())
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"
