"""What llmtrace's framework instrumentation adds per invocation, side by side with its peers.

Prints, for a LangChain chain (prompt | ChatOpenAI | output parser, the real ``langchain-openai``
and ``openai`` clients over loopback HTTP against the simulated model server), what each
configuration adds per ``chain.invoke`` over the same chain without instrumentation: CPU
instructions under callgrind (the figure of record: the mean over the hash seeds of ``--seeds``,
their lowest and highest beside it), the median wall clock beside them, and the
spans each configuration produced per invocation; the same for a LlamaIndex query (a vector index
of four documents, LlamaIndex's own mock model and embeddings). Configurations: llmtrace
(``llmtrace.init()``), OpenLLMetry (``Traceloop.init()``, its LangChain and OpenAI
instrumentations) and OpenInference (its LangChain, LlamaIndex and OpenAI instrumentors). Target: llmtrace
below the best of them.

Each configuration runs in its own process of the peers' virtualenv (``scripts/peers.sh``, created
on first use); ``benchmarks/_peers.py`` says how the pipeline is kept the same for all.

    python benchmarks/overhead_frameworks.py [--calls 8] [--seeds 0,1,2] [--no-instructions]
        [--at COMMIT]
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _peers import added, arguments, chosen, measure, per_call_table

CONFIGS = ["none", "llmtrace", "openllmetry", "openinference"]
# OpenLLMetry's LlamaIndex instrumentation imports llama_index.llms, which only an LLM integration
# package provides (LlamaIndex's OpenAI one caps openai below 3), and Traceloop.init turns it on
# only when the meta-package llama-index is installed: with llama-index-core alone it is absent.
SCENARIOS = {
    "none": ["langchain", "llama-index"],
    "llmtrace": ["langchain", "llama-index"],
    "openllmetry": ["langchain"],
    "openinference": ["langchain", "llama-index"],
}


def main(argv: list[str] | None = None) -> int:
    args = arguments(__doc__.splitlines()[0], argv)
    started = time.monotonic()
    kind = "seconds" if args.no_instructions else "instructions"
    configs = chosen(args, CONFIGS)
    measured = measure(
        configs,
        SCENARIOS,
        {"langchain": args.calls, "llama-index": args.calls},
        instructions=not args.no_instructions,
        at=args.at,
        seeds=args.seeds,
    )
    for scenario, title in (
        ("langchain", "LangChain chain invoke"),
        ("llama-index", "LlamaIndex query (LlamaIndex's mock model and embeddings)"),
    ):
        per_call_table(title, measured, scenario, configs)
        peers = [
            added(measured, peer, scenario, kind) or 0
            for peer in configs
            if peer not in ("none", "llmtrace") and scenario in SCENARIOS[peer]
        ]
        ours = added(measured, "llmtrace", scenario, kind) if "llmtrace" in configs else None
        best = min(peers, default=0)
        if ours is not None and best > 0:
            verdict = "met" if ours < best else "NOT met"
            print(f"\nllmtrace / best peer: {ours / best:.2f}x (target: below the best; {verdict})")
    print(f"\n({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
