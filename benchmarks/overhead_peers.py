"""What llmtrace adds to a model call, side by side with its peers, in one run.

Prints, for the real ``openai`` and ``anthropic`` clients over loopback HTTP against the simulated
model server, what each configuration adds over no instrumentation: CPU instructions under
callgrind (the figure of record: repeatable whatever else the machine is doing; the mean over
the hash seeds of ``--seeds``, with the lowest and highest seed's figure beside it, since one
layout of the interpreter's dicts is not another) and the median wall clock beside them (noisy
here; for scale), with the spans each configuration produced per call (a configuration that
records nothing is not cheap, it is absent):

- OpenAI non-streaming: added per call;
- OpenAI streaming and Anthropic streaming: added per whole stream, a short and a long one (the
  figures of record), and the straight line through those two: a fixed part and a part per chunk;
- decorators on a function that does nothing: ``@llmtrace.workflow``, OpenLLMetry's
  ``@workflow``, Langfuse's ``@observe`` and a hand-written span, per call.

The configurations: no instrumentation; a hand-written span with one attribute around the call;
OpenTelemetry's openai-v2 instrumentation; llmtrace; llmtrace without the ``traceparent`` header
it sends by default (``OTEL_PROPAGATORS=none``: the request the peers send); OpenLIT;
OpenInference; Langfuse; OpenLLMetry. Each runs in its own process of the peers' virtualenv (``scripts/peers.sh``, created
on first use); ``benchmarks/_peers.py`` says how the pipeline is kept the same for all.

    python benchmarks/overhead_peers.py [--calls 8] [--seeds 0,1,2] [--no-instructions] [--at COMMIT]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peers import LABELS, arguments, chosen, measure, per_call_table, stream_table

CLIENTS = ["openai", "openai-stream", "openai-stream-long", "anthropic", "anthropic-long"]
# Who instruments what: OpenTelemetry's openai-v2 does not know Anthropic, and Langfuse has no
# Anthropic client wrapper of its own; the decorator row is for the projects that have one.
SCENARIOS = {
    "none": [*CLIENTS, "decorator"],
    "anthropic-own": ["anthropic", "anthropic-long"],
    "hand": [*CLIENTS, "decorator"],
    "otel": ["openai", "openai-stream", "openai-stream-long"],
    "llmtrace": [*CLIENTS, "decorator"],
    "llmtrace-unpropagated": CLIENTS,
    "openlit": CLIENTS,
    "openinference": CLIENTS,
    "langfuse": ["openai", "openai-stream", "openai-stream-long", "decorator"],
    "openllmetry": [*CLIENTS, "decorator"],
}


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__.splitlines()[0], argv)
    calls = {
        "openai": args.calls,
        "openai-stream": args.calls,
        "openai-stream-long": max(2, args.calls // 3),
        "anthropic": args.calls,
        "anthropic-long": max(2, args.calls // 3),
        "decorator": args.calls * 25,
    }
    started = time.monotonic()
    configs = chosen(args, LABELS)
    measured = measure(
        configs,
        SCENARIOS,
        calls,
        instructions=not args.no_instructions,
        at=args.at,
        seeds=args.seeds,
    )
    per_call_table("OpenAI chat, non-streaming", measured, "openai", configs)
    stream_table("OpenAI chat, streaming", measured, "openai-stream", "openai-stream-long", configs)
    stream_table("Anthropic messages, streaming", measured, "anthropic", "anthropic-long", configs)
    per_call_table("Decorator on a function that does nothing", measured, "decorator", configs)
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
