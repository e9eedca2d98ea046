from __future__ import annotations

from llmtrace.demo.corpus import load_demo_questions, load_passages, parse_passages


def test_the_bundled_handbook_has_sections_and_paragraphs() -> None:
    passages = load_passages()
    assert 30 <= len(passages) <= 60
    assert all(p.section and len(p.text) > 40 for p in passages)
    assert [p.id for p in passages] == list(range(len(passages)))


def test_the_bundled_questions_have_ids() -> None:
    questions = load_demo_questions()
    assert len(questions) == 12
    assert len({q.id for q in questions.questions}) == 12


def test_paragraphs_are_split_on_blank_lines_and_labelled_by_section() -> None:
    passages = parse_passages("# Title\n\n## A\n\none\ntwo\n\nthree\n\n## B\n\nfour\n")
    assert [(p.section, p.text) for p in passages] == [
        ("A", "one two"),
        ("A", "three"),
        ("B", "four"),
    ]
