"""What llmtrace's framework instrumentation adds per invocation, side by side with its peers.

Prints, for a LangChain chain (prompt | ChatOpenAI | output parser, the real ``langchain-openai``
and ``openai`` clients over loopback HTTP against the simulated model server), what each
configuration adds per ``chain.invoke`` over the same chain without instrumentation: CPU
instructions under callgrind (the figure of record), the median wall clock beside them, and the
spans each configuration produced per invocation. Configurations: llmtrace
(``llmtrace.init()``), OpenLLMetry (``Traceloop.init()``, its LangChain and OpenAI
instrumentations) and OpenInference (its LangChain and OpenAI instrumentors). Target: llmtrace
below the best of them.

Each configuration runs in its own process of the peers' virtualenv (``scripts/peers.sh``, created
on first use); ``benchmarks/_peers.py`` says how the pipeline is kept the same for all.

    python benchmarks/overhead_frameworks.py [--calls 8] [--no-instructions] [--at COMMIT]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peers import added, arguments, chosen, measure, per_call_table

CONFIGS = ["none", "llmtrace", "openllmetry", "openinference"]


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__.splitlines()[0], argv)
    started = time.monotonic()
    kind = "seconds" if args.no_instructions else "instructions"
    configs = chosen(args, CONFIGS)
    measured = measure(
        configs,
        {config: ["langchain"] for config in configs},
        {"langchain": args.calls},
        instructions=not args.no_instructions,
        at=args.at,
    )
    per_call_table("LangChain chain invoke", measured, "langchain", configs)
    peers = [
        added(measured, peer, "langchain", kind) or 0
        for peer in configs
        if peer not in ("none", "llmtrace")
    ]
    ours = added(measured, "llmtrace", "langchain", kind) if "llmtrace" in configs else None
    best = min(peers, default=0)
    if ours is not None and best > 0:
        verdict = "met" if ours < best else "NOT met"
        print(
            f"\nllmtrace / best peer: {ours / best:.2f}x (target: below the best of them; {verdict})"
        )
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
