"""The stage vocabulary is a contract: the stage tables of the user documentation
(docs/instrument.md) and of docs/architecture.md name exactly the values ``semconv`` defines, in
its order, and the decorators take exactly those (the native reader's copy is compared in tests/analysis/test_native.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import llmtrace
from llmtrace import semconv

ROOT = Path(__file__).resolve().parents[2]


def stage_table(path: Path, header: str) -> list[str]:
    """The first column of the table under ``header`` (a table's header row) in ``path``."""
    lines = path.read_text().splitlines()
    start = lines.index(header) + 2  # past the header and its separator
    names = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        match = re.match(r"\| `([a-z]+)` \|", line)
        assert match, f"{path.name}: a stage table row without a stage: {line}"
        names.append(match.group(1))
    return names


@pytest.mark.parametrize(
    ("document", "header"),
    [
        ("docs/instrument.md", "| stage | what it covers |"),
        ("docs/architecture.md", "| stage | the time it stands for |"),
    ],
)
def test_the_stage_tables_name_every_stage_and_the_model_call_tag(
    document: str, header: str
) -> None:
    assert stage_table(ROOT / document, header) == list(semconv.SPAN_STAGES)


def test_the_model_call_tag_is_no_stage_of_the_breakdown_and_ttft_still_reads_as_one() -> None:
    assert semconv.LLM_STAGE == "model"
    assert semconv.LLM_STAGE not in semconv.STAGES
    assert (*semconv.STAGES, semconv.LLM_STAGE) == semconv.SPAN_STAGES
    assert {"model", "ttft"} == semconv.MODEL_CALL_STAGES
    assert llmtrace.STAGES == semconv.STAGES


@pytest.mark.parametrize("stage", semconv.SPAN_STAGES)
def test_every_value_of_the_tag_is_accepted_by_the_decorators(stage: str) -> None:
    llmtrace.stage(stage)
    llmtrace.span("block", stage=stage)


def test_a_name_outside_the_vocabulary_is_refused_with_the_accepted_ones() -> None:
    with pytest.raises(llmtrace.ConfigError, match=r"accepted: queue, .*, other, model$"):
        llmtrace.span("block", stage="generate")
