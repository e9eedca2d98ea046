from __future__ import annotations

import sys
from pathlib import Path

import pytest

from llmtrace.bench.questions import Question
from llmtrace.bench.targets import HTTPStatusError, HTTPTarget, load_callable, parse_headers
from llmtrace.errors import CommandError

from .conftest import AnswerService


@pytest.fixture
def target_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = f"bench_target_{abs(hash(tmp_path)) % 10**8}"
    (tmp_path / f"{name}.py").write_text(
        "import asyncio\n"
        "def shout(q):\n    return q.upper()\n"
        "async def whisper(q):\n    await asyncio.sleep(0)\n    return q.lower()\n"
        "class Bot:\n    @staticmethod\n    def reply(q):\n        return 'bot:' + q\n"
        "NOT_CALLABLE = 3\n",
        encoding="utf-8",
    )
    monkeypatch.chdir(tmp_path)
    yield name
    sys.modules.pop(name, None)


async def test_sync_and_async_callables_are_called_with_the_question(target_module: str) -> None:
    question = Question("1", "Hello There")
    assert await load_callable(f"{target_module}:shout")(question) == "HELLO THERE"
    assert await load_callable(f"{target_module}:whisper")(question) == "hello there"
    assert await load_callable(f"{target_module}:Bot.reply")(question) == "bot:Hello There"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "package.module:function"),
        ("surely_missing_module_xyz:run", "cannot import"),
        ("{module}:absent", "no attribute"),
        ("{module}:NOT_CALLABLE", "not callable"),
    ],
)
def test_bad_callable_specs_are_clear_errors(target_module: str, spec: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        load_callable(spec.format(module=target_module))


def test_body_template_escapes_the_question_as_json() -> None:
    target = HTTPTarget(
        "http://127.0.0.1:1/x", '{"input": {"text": "Q: {question}"}, "ref": "{id}", "n": 3}'
    )
    body = target.body_for(Question("7", 'say "hi"\nnow'))
    assert body == {"input": {"text": 'Q: say "hi"\nnow'}, "ref": "7", "n": 3}


@pytest.mark.parametrize(
    ("url", "body", "message"),
    [
        ("127.0.0.1:8000", '{"q": "{question}"}', "http://"),
        ("http://x", "{not json", "not valid JSON"),
        ("http://x", '{"q": "fixed"}', "must contain"),
    ],
)
def test_bad_http_targets_are_clear_errors(url: str, body: str, message: str) -> None:
    with pytest.raises(CommandError, match=message):
        HTTPTarget(url, body)


def test_headers_parse_and_reject_garbage() -> None:
    assert parse_headers(["Authorization: Bearer x", "X-A:1"]) == {
        "Authorization": "Bearer x",
        "X-A": "1",
    }
    with pytest.raises(CommandError):
        parse_headers(["no-colon"])


async def test_http_target_posts_to_a_real_service(answer_service: AnswerService) -> None:
    answer_service.fail_on = {"bad"}
    target = HTTPTarget(f"{answer_service.base_url}/answer", headers={"X-Team": "search"})
    try:
        assert "echo: good" in str(await target(Question("1", "good")))
        with pytest.raises(HTTPStatusError, match="500"):
            await target(Question("2", "bad"))
    finally:
        await target.aclose()
    assert answer_service.bodies == [{"question": "good"}, {"question": "bad"}]
