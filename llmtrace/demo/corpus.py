"""The bundled document set (a fictional product handbook) and question set."""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from llmtrace.bench.questions import QuestionSet, load_questions

DATA_PACKAGE = "llmtrace.demo"
HANDBOOK = "handbook.md"
QUESTIONS = "questions.jsonl"


@dataclass(frozen=True)
class Passage:
    id: int
    section: str
    text: str


def data_path(name: str) -> Path:
    return Path(str(resources.files(DATA_PACKAGE).joinpath("data", name)))


def parse_passages(markdown: str) -> list[Passage]:
    """One passage per paragraph, labelled with its ``##`` section."""
    passages: list[Passage] = []
    section = ""
    for block in markdown.split("\n\n"):
        text = " ".join(block.split())
        if not text or text.startswith("# "):
            continue
        if text.startswith("## "):
            section = text[3:].strip()
            continue
        passages.append(Passage(id=len(passages), section=section, text=text))
    return passages


def load_passages() -> list[Passage]:
    return parse_passages(data_path(HANDBOOK).read_text(encoding="utf-8"))


def load_demo_questions() -> QuestionSet:
    return load_questions(data_path(QUESTIONS))
