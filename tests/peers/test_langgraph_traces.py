"""``llmtrace report`` on LangGraph traces that other instrumentations recorded, for real.

The recordings are made by the test: ``apps/react_agent_app.py`` runs LangGraph's
``create_react_agent`` (real LangGraph and LangChain, ``ChatOpenAI`` through the real ``openai``
client) under OpenInference's or OpenLLMetry's instrumentation, in the peers virtualenv, against the
simulated model server with a 300 ms first token, which asks for a tool once per request. No
LangGraph trace recorded elsewhere ships with the suite (``../shared/fixtures/recorded`` holds HTTP
exchanges only).

Both peers follow LangChain's parent run ids, so both record the agent's ``call_model`` as a
stage-less leaf *beside* the chain holding the model call, ending just after it: the shape the
breakdown's rule for structure recorded beside the work it wraps is for
(``breakdown.wrapped_by_sibling``). Without the rule every trace is ``other``, as a user of
llmtrace's own LangChain instrumentation saw before it nested the model under ``call_model``.
Neither peer writes a first-token time on LangChain's model span, so each model call counts whole
as time to first token.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from llmtrace.analysis import breakdown as breakdown_rules
from llmtrace.analysis.breakdown import breakdown, claims_no_stage
from llmtrace.analysis.model import NANOS, Span, Trace
from llmtrace.analysis.sources import _load_files
from tests.peers.test_peer_reports import PEERS_PYTHON, REPO
from tests.servers.model_server import ModelServer
from tests.subprocesses import clean_environment, run

APP = Path(__file__).resolve().parent / "apps" / "react_agent_app.py"
REQUESTS = 3
FIRST_TOKEN = 0.300
TOKEN_DELAY = 0.010
# Each request: the tool call (first fragment, then its arguments), then the answer.
MODEL_CALLS = 2
# What LangChain and the peer add to each model call as they record it (building the request
# before it is sent, reading the stream after): 18-27 ms measured, loosely bounded.
CLIENT_SHARE = 0.060
PEERS = ["openinference", "openllmetry"]


@dataclass(frozen=True)
class Recording:
    """A peer's run of the agent: its trace file, and the server's own time per request (from
    each model request's arrival to its last token's sending, summed over the request's calls)."""

    path: Path
    server_time: float


@pytest.fixture(scope="module")
def recordings() -> dict[tuple[str, str], Recording]:
    """The recordings made so far in this module, by peer and call."""
    return {}


@pytest.fixture
def record(
    recordings: dict[tuple[str, str], Recording],
    model_server: ModelServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Callable[[str, str], Recording]:
    """Records a peer's run of the agent, once per module for each peer and call."""

    def recorded(peer: str, call: str) -> Recording:
        if (peer, call) not in recordings:
            where = tmp_path_factory.mktemp(f"{peer}-{call}")
            path = _record(peer, call, model_server, where)
            calls = [r for r in model_server.requests if r.path.endswith("/chat/completions")]
            assert len(calls) == 1 + MODEL_CALLS * REQUESTS  # (a warm-up, untraced)
            server = sum(r.last_token_sent_at - r.arrived_at for r in calls[1:]) / REQUESTS
            recordings[peer, call] = Recording(path, server)
        return recordings[peer, call]

    return recorded


def _record(peer: str, call: str, model_server: ModelServer, where: Path) -> Path:
    if not PEERS_PYTHON.exists():
        pytest.fail(f"no peers virtualenv at {PEERS_PYTHON}: run scripts/peers.sh")
    model_server.configure(
        first_token_delay=FIRST_TOKEN,
        token_delay=TOKEN_DELAY,
        tool_call=("look_up_stock", '{"item": "hub"}'),
    )
    path = where / f"{peer}-{call}.jsonl"
    argv = [str(PEERS_PYTHON), str(APP), peer, model_server.base_url, str(path), str(REQUESTS)]
    result = run([*argv, call], where, clean_environment())
    assert result.returncode == 0, result.stderr
    return path


def _report(path: Path, native: bool) -> dict[str, Any]:
    env = clean_environment(PYTHONPATH=str(REPO), LLMTRACE_NATIVE="1" if native else "0")
    result = subprocess.run(
        [sys.executable, "-m", "llmtrace", "report", str(path), "--format", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    data: dict[str, Any] = json.loads(result.stdout)
    data.pop("generated_at")
    return data


def _model_calls(trace: Trace) -> list[Span]:
    return [span for span in trace.root.walk() if span.attributes.get("llmtrace.stage") == "ttft"]


def _assert_wrapper_beside_each_chain(trace: Trace) -> None:
    """Every model call's chain has a stage-less leaf sibling that ends after it and that it
    covers almost wholly: the function that started it, recorded beside it."""
    parents = {id(child): span for span in trace.root.walk() for child in span.children}
    for call in _model_calls(trace):
        chain = parents[id(call)]
        siblings = parents[id(chain)].children
        (wrapper,) = [
            s
            for s in siblings
            if s is not chain and not s.children and claims_no_stage(s) and "call_model" in s.name
        ]
        assert wrapper.start <= chain.start and chain.end < wrapper.end
        covered = (chain.end - chain.start) / (wrapper.end - wrapper.start)
        assert covered >= 0.9


@pytest.mark.parametrize("call", ["invoke", "astream"])
@pytest.mark.parametrize("peer", PEERS)
def test_a_peers_langgraph_traces_give_the_model_calls_their_time(
    peer: str, call: str, record: Callable[[str, str], Recording]
) -> None:
    recording = record(peer, call)
    path = recording.path
    traces, _ = _load_files(path)
    assert len(traces) == REQUESTS  # one trace per request
    for trace in traces:
        assert len(_model_calls(trace)) == MODEL_CALLS
        _assert_wrapper_beside_each_chain(trace)

    report = _report(path, native=True)
    assert _report(path, native=False) == report  # both readers apply the rule alike
    assert report["traces"] == REQUESTS
    assert report["bottleneck"]["stage"] == "ttft"
    assert report["evidence"]["first_token_unrecorded"] == MODEL_CALLS * REQUESTS
    # Every model call on the critical path, whole: the report's ttft is their durations.
    durations = [sum(c.end - c.start for c in _model_calls(t)) / NANOS for t in traces]
    ttft = report["stages"]["ttft"]["mean"]
    assert ttft == pytest.approx(sum(durations) / REQUESTS, abs=1e-6)
    # And that is what the server did, plus what the client adds to each call.
    assert recording.server_time >= MODEL_CALLS * FIRST_TOKEN
    assert 0 < ttft - recording.server_time < MODEL_CALLS * CLIENT_SHARE
    assert "tool" in report["stages"]


def test_without_the_rule_the_wrapper_hides_the_model_calls(
    record: Callable[[str, str], Recording], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A recording read with the rule switched off: what the report said before the rule."""
    (trace, *_) = _load_files(record("openinference", "invoke").path)[0]
    assert "ttft" in breakdown(trace).stages
    monkeypatch.setattr(breakdown_rules, "wrapped_by_sibling", lambda *args: False)
    stages = breakdown(trace).stages
    assert "ttft" not in stages
    assert max(stages, key=stages.__getitem__) == "other"
