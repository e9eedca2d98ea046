from __future__ import annotations

from pathlib import Path

import pytest

from llmtrace.bench.questions import load_questions, question_set_hash
from llmtrace.errors import CommandError


def test_jsonl_keeps_ids_and_metadata(question_file: Path) -> None:
    questions = load_questions(question_file)
    assert [q.id for q in questions.questions] == ["q1", "q2", "q3", "q4"]
    assert questions.questions[0].text == "What is feature 1?"
    assert questions.questions[0].metadata == {"topic": "t1"}


def test_jsonl_without_ids_numbers_the_questions(tmp_path: Path) -> None:
    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "a?"}\n\n{"question": "b?"}\n', encoding="utf-8")
    assert [q.id for q in load_questions(path).questions] == ["1", "2"]


def test_csv_reads_the_question_column(tmp_path: Path) -> None:
    path = tmp_path / "q.csv"
    path.write_text('id,Question,level\nx1,"Why, exactly?",easy\nx2,How?,hard\n', encoding="utf-8")
    questions = load_questions(path)
    assert [(q.id, q.text) for q in questions.questions] == [
        ("x1", "Why, exactly?"),
        ("x2", "How?"),
    ]
    assert questions.questions[1].metadata == {"level": "hard"}


def test_plain_text_is_one_question_per_line(tmp_path: Path) -> None:
    path = tmp_path / "q.txt"
    path.write_text("first?\n\n  second?  \n", encoding="utf-8")
    assert [q.text for q in load_questions(path).questions] == ["first?", "second?"]


def test_hash_ignores_whitespace_but_not_order_or_wording() -> None:
    base = question_set_hash(["What is X?", "Why Y?"])
    assert question_set_hash(["What  is X? ", "Why\tY?"]) == base
    assert question_set_hash(["Why Y?", "What is X?"]) != base
    assert question_set_hash(["What is X?", "Why Z?"]) != base
    assert len(base) == 64


def test_same_questions_in_different_formats_have_the_same_hash(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one?\ntwo?\n", encoding="utf-8")
    (tmp_path / "b.jsonl").write_text(
        '{"question": "one?"}\n{"question": "two?"}\n', encoding="utf-8"
    )
    assert load_questions(tmp_path / "a.txt").hash == load_questions(tmp_path / "b.jsonl").hash


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.jsonl", '{"question": "ok"}\n{"text": "no"}\n', "bad.jsonl:2"),
        ("bad2.jsonl", "not json\n", "not valid JSON"),
        ("bad.csv", "id,text\n1,hello\n", "'question' column"),
        ("empty.txt", "\n\n", "no questions"),
    ],
)
def test_bad_question_files_are_clear_errors(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(CommandError, match=message):
        load_questions(path)


def test_missing_question_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CommandError, match="not found"):
        load_questions(tmp_path / "nope.jsonl")
