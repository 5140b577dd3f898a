"""The OpenAI-compatible model against a fake endpoint: tool calls and text come back as
`Completion`s, failures that may pass are retried a bounded number of times with backoff,
and the ones that will not pass (a rejected request) are not retried."""

from __future__ import annotations

import socket
import time

import pytest

from backend.agent.llm import LLMUnavailable, OpenAICompatibleModel, parse_hermes
from tests.fakes.openai_server import FakeOpenAIServer, Script, Step, delay, error, text, tool_call

MESSAGES = [{"role": "system", "content": "be nice"}, {"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "think", "description": "think",
                                           "parameters": {"type": "object", "properties": {}, "required": []}}}]


def model_for(server: FakeOpenAIServer, **kw) -> OpenAICompatibleModel:
    return OpenAICompatibleModel(base_url=server.url, model="fake-model", timeout_s=kw.pop("timeout_s", 2.0),
                                 max_retries=kw.pop("max_retries", 2), backoff_s=kw.pop("backoff_s", 0.01), **kw)


async def test_text_and_tool_calls_are_parsed() -> None:
    script = Script([text("<think>\nhmm\n</think>\n\nHello!"), tool_call("think", '{"thought": "x"', call_id="c1")])
    with FakeOpenAIServer(script) as server:
        model = model_for(server, temperature=0.0)
        first = await model.complete(MESSAGES, TOOLS)
        assert first.content == "Hello!" and first.tool_calls == [] and first.model == "fake-model"
        second = await model.complete(MESSAGES, TOOLS)
        assert [(c.id, c.name, c.arguments) for c in second.tool_calls] == [("c1", "think", '{"thought": "x"')]
        request = server.requests[0]
        assert request["messages"] == MESSAGES and request["tools"] == TOOLS
        assert request["tool_choice"] == "auto" and request["temperature"] == 0.0
        await model.close()


async def test_server_errors_are_retried_with_backoff_then_given_up() -> None:
    with FakeOpenAIServer(Script([error(500), error(502), text("ok")])) as server:
        model = model_for(server, max_retries=2, backoff_s=0.05)
        start = time.monotonic()
        completion = await model.complete(MESSAGES, TOOLS)
        assert completion.content == "ok" and completion.attempts == 3
        assert time.monotonic() - start >= 0.05 * 0.75 * 3  # 0.05 + 0.10, with jitter
    with FakeOpenAIServer(Script([error(500)] * 5)) as server:
        with pytest.raises(LLMUnavailable) as failure:
            await model_for(server, max_retries=2).complete(MESSAGES, TOOLS)
        assert failure.value.kind == "server_error" and len(server.requests) == 3


async def test_a_rejected_request_is_not_retried() -> None:
    with FakeOpenAIServer(Script([error(400), text("never")])) as server:
        with pytest.raises(LLMUnavailable) as failure:
            await model_for(server).complete(MESSAGES, TOOLS)
        assert failure.value.kind == "rejected" and len(server.requests) == 1


async def test_timeouts_and_unreachable_endpoints() -> None:
    with FakeOpenAIServer(Script([delay(2), delay(2)])) as server:
        start = time.monotonic()
        with pytest.raises(LLMUnavailable) as failure:
            await model_for(server, timeout_s=0.2, max_retries=1).complete(MESSAGES, TOOLS)
        assert failure.value.kind == "timeout" and time.monotonic() - start < 1.5
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here
    model = OpenAICompatibleModel(base_url=f"http://127.0.0.1:{port}/v1", model="m", max_retries=1, backoff_s=0.01)
    with pytest.raises(LLMUnavailable) as failure:
        await model.complete(MESSAGES, TOOLS)
    assert failure.value.kind == "connection"


async def test_an_answer_without_choices_is_a_bad_response() -> None:
    with FakeOpenAIServer(Script([Step(raw_body='{"id": "x", "choices": []}')])) as server:
        with pytest.raises(LLMUnavailable) as failure:
            await model_for(server, max_retries=0).complete(MESSAGES, TOOLS)
        assert failure.value.kind == "bad_response"


def test_from_settings_needs_a_url_and_a_model() -> None:
    from backend.config import Settings

    assert OpenAICompatibleModel.from_settings(Settings(MUARL_LLM_BASE_URL=None, MUARL_LLM_MODEL=None)) is None
    assert OpenAICompatibleModel.from_settings(Settings(MUARL_LLM_BASE_URL="http://x/v1", MUARL_LLM_MODEL=None)) is None
    model = OpenAICompatibleModel.from_settings(Settings(MUARL_LLM_BASE_URL="http://x/v1", MUARL_LLM_MODEL="qwen"))
    assert model is not None and model.name == "qwen"


def test_hermes_tool_calls_in_text_are_parsed_and_malformed_ones_stay_text():
    rest, calls = parse_hermes('<tool_call>\n{"name": "think", "arguments": {"thought": "a"}}\n</tool_call>')
    assert rest == "" and calls[0].name == "think" and calls[0].arguments == '{"thought": "a"}'
    rest, calls = parse_hermes("<tool_call>{not json}</tool_call>")
    assert calls == [] and rest == "<tool_call>{not json}</tool_call>"


async def test_a_server_without_a_tool_call_parser_still_gives_tool_calls() -> None:
    block = '<tool_call>\n{"name": "think", "arguments": {"thought": "a"}}\n</tool_call>'
    with FakeOpenAIServer(Script([text(block)])) as server:
        completion = await model_for(server).complete(MESSAGES, TOOLS)
    assert completion.content == "" and [(c.name, c.arguments) for c in completion.tool_calls] == [
        ("think", '{"thought": "a"}')]
