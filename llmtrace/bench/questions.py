"""Question sets for ``llmtrace bench``: loading JSONL, CSV or plain text, and the set's hash.

Two runs are only comparable when they replayed the same questions in the same order; the
question-set hash is what ``llmtrace compare`` checks for that.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llmtrace.errors import CommandError

QUESTION_FIELD = "question"
ID_FIELD = "id"


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    metadata: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class QuestionSet:
    questions: tuple[Question, ...]
    source: str = ""

    @property
    def hash(self) -> str:
        return question_set_hash(q.text for q in self.questions)

    def __len__(self) -> int:
        return len(self.questions)

    def take(self, count: int) -> QuestionSet:
        """The first ``count`` questions (a smaller set has its own hash)."""
        return QuestionSet(self.questions[:count], self.source)


def normalise(text: str) -> str:
    # Whitespace differences from editors or CSV quoting must not make two sets "different".
    return " ".join(text.split())


def question_set_hash(texts: Iterable[str]) -> str:
    """sha256 (hex) of the normalised questions, in order, one per line."""
    digest = hashlib.sha256()
    for text in texts:
        digest.update(normalise(text).encode("utf-8"))
        digest.update(b"\n")
    return digest.hexdigest()


def load_questions(path: str | Path) -> QuestionSet:
    """Read a question file: ``.jsonl``/``.ndjson``, ``.csv``, anything else as one per line."""
    file = Path(path)
    try:
        content = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CommandError(f"question file not found: {file}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CommandError(f"cannot read question file {file}: {exc}") from None
    suffix = file.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        questions = _parse_jsonl(content, file)
    elif suffix == ".csv":
        questions = _parse_csv(content, file)
    else:
        questions = _parse_lines(content)
    if not questions:
        raise CommandError(f"no questions in {file}")
    return QuestionSet(tuple(questions), str(file))


def questions_from_texts(texts: Iterable[str], source: str = "") -> QuestionSet:
    return QuestionSet(tuple(_numbered(texts)), source)


def _numbered(texts: Iterable[str]) -> list[Question]:
    return [Question(id=str(i), text=text) for i, text in enumerate(texts, start=1)]


def _parse_lines(content: str) -> list[Question]:
    return _numbered(line.strip() for line in content.splitlines() if line.strip())


def _parse_jsonl(content: str, file: Path) -> list[Question]:
    questions: list[Question] = []
    for line_number, line in enumerate(content.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise CommandError(f"{file}:{line_number}: not valid JSON ({exc.msg})") from None
        if not isinstance(record, dict) or not isinstance(record.get(QUESTION_FIELD), str):
            raise CommandError(
                f"{file}:{line_number}: each line needs a string field {QUESTION_FIELD!r}"
            )
        questions.append(_question_from_record(record, default_id=str(len(questions) + 1)))
    return questions


def _parse_csv(content: str, file: Path) -> list[Question]:
    reader = csv.DictReader(io.StringIO(content))
    columns = [c.strip().lower() for c in reader.fieldnames or []]
    if QUESTION_FIELD not in columns:
        raise CommandError(
            f"{file}: the CSV header needs a {QUESTION_FIELD!r} column (found: {', '.join(columns) or 'none'})"
        )
    questions: list[Question] = []
    for row in reader:
        record = {(k or "").strip().lower(): v for k, v in row.items()}
        if not (record.get(QUESTION_FIELD) or "").strip():
            continue
        questions.append(_question_from_record(record, default_id=str(len(questions) + 1)))
    return questions


def _question_from_record(record: Mapping[str, Any], default_id: str) -> Question:
    raw_id = record.get(ID_FIELD)
    question_id = str(raw_id) if raw_id not in (None, "") else default_id
    metadata = {k: v for k, v in record.items() if k not in (QUESTION_FIELD, ID_FIELD)}
    return Question(id=question_id, text=str(record[QUESTION_FIELD]).strip(), metadata=metadata)
