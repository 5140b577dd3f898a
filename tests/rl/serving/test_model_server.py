"""`muarl model-server` over real HTTP: a tiny checkpoint trained here answers chat requests with
OpenAI `tool_calls`, continues conversations, batches concurrent requests (counted by the server),
loads and unloads adapters and full models like vLLM, and answers bad requests with vLLM-style errors."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.rl.serving.conftest import free_port, running
from tests.rl.serving.tiny_checkpoint import ANSWER, ASK, CALL_ARGS, SYSTEM, TOOLS, conversation

BASE = "tiny-base-v1"


@pytest.fixture(scope="module")
def server(tiny_checkpoints: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    base, _ = tiny_checkpoints
    port = free_port()
    cmd = [sys.executable, "-m", "backend.cli", "model-server", "--port", str(port), "--model", f"{BASE}={base}"]
    with running(cmd, f"http://127.0.0.1:{port}/health", timeout_s=120,
                 log=tmp_path_factory.mktemp("model-server") / "server.log"):
        yield f"http://127.0.0.1:{port}"


def chat(url: str, messages: list[dict], model: str = BASE, **extra) -> httpx.Response:
    return httpx.post(f"{url}/v1/chat/completions", json={"model": model, "messages": messages, "tools": TOOLS,
                                                          **extra}, timeout=60)


def stats(url: str, model: str = BASE) -> dict:
    return httpx.get(f"{url}/stats").json()["models"][model]


def test_models_lists_the_served_checkpoint(server: str, tiny_checkpoints: tuple[Path, Path]) -> None:
    cards = httpx.get(f"{server}/v1/models").json()
    assert cards["object"] == "list"
    card = next(c for c in cards["data"] if c["id"] == BASE)
    assert card["root"] == str(tiny_checkpoints[0]) and card["parent"] is None and card["kind"] == "model"


def test_tool_call_then_answer_in_one_continued_conversation(server: str) -> None:
    before = stats(server)
    r = chat(server, [SYSTEM, ASK])
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["model"] == BASE and body["object"] == "chat.completion"
    choice = body["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    msg = choice["message"]
    assert msg["role"] == "assistant" and msg["content"] is None
    (call,) = msg["tool_calls"]
    assert call["type"] == "function" and call["id"].startswith("call_")
    assert call["function"]["name"] == "get_order_details"
    assert json.loads(call["function"]["arguments"]) == CALL_ARGS
    assert body["usage"]["completion_tokens"] > 0 and body["usage"]["prompt_tokens"] > 0
    # the client sends the conversation back with the tool result, as OpenAI clients do
    history = [SYSTEM, ASK, msg, {"role": "tool", "tool_call_id": call["id"], "content": '{"status": "delivered"}'}]
    r = chat(server, history)
    assert r.status_code == 200, r.text
    choice = r.json()["choices"][0]
    assert choice["message"] == {"role": "assistant", "content": ANSWER}
    assert choice["finish_reason"] == "stop"
    after = stats(server)
    assert after["conversations_continued"] == before["conversations_continued"] + 1  # not re-read from scratch


def test_history_written_elsewhere_is_read_as_the_model_would_have_written_it(server: str) -> None:
    r = chat(server, conversation(call_id="call_from_another_engine")[:4])
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == ANSWER


def test_concurrent_requests_are_batched(server: str) -> None:
    before = stats(server)

    async def many(n: int) -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=120) as client:
            return await asyncio.gather(*(client.post(
                f"{server}/v1/chat/completions",
                json={"model": BASE, "messages": [SYSTEM, ASK], "tools": TOOLS}) for _ in range(n)))

    replies = asyncio.run(many(12))
    assert all(r.status_code == 200 for r in replies)
    for r in replies:
        call = r.json()["choices"][0]["message"]["tool_calls"][0]["function"]
        assert call["name"] == "get_order_details" and json.loads(call["arguments"]) == CALL_ARGS
    after = stats(server)
    assert after["requests"] - before["requests"] == 12
    assert after["batches"] - before["batches"] < 12  # some generations served several requests at once
    assert after["largest_batch"] >= 2


def test_load_chat_and_unload_an_adapter(server: str, tiny_checkpoints: tuple[Path, Path]) -> None:
    _, adapter = tiny_checkpoints
    r = httpx.post(f"{server}/v1/load_lora_adapter", json={"lora_name": "tiny-lora-v2", "lora_path": str(adapter)})
    assert r.status_code == 200 and r.text == "Success: LoRA adapter 'tiny-lora-v2' added successfully."
    card = next(c for c in httpx.get(f"{server}/v1/models").json()["data"] if c["id"] == "tiny-lora-v2")
    assert card["parent"] == BASE and card["kind"] == "lora" and card["root"] == str(adapter)
    base_reply = chat(server, [SYSTEM, ASK]).json()["choices"][0]["message"]
    r = chat(server, [SYSTEM, ASK], model="tiny-lora-v2")
    assert r.status_code == 200 and r.json()["model"] == "tiny-lora-v2"
    lora_reply = r.json()["choices"][0]["message"]
    assert lora_reply.get("tool_calls") != base_reply["tool_calls"]  # the adapter's weights are in use
    again = httpx.post(f"{server}/v1/load_lora_adapter", json={"lora_name": "tiny-lora-v2", "lora_path": str(adapter)})
    assert again.status_code == 400 and "already been loaded" in again.json()["error"]["message"]
    r = httpx.post(f"{server}/v1/unload_lora_adapter", json={"lora_name": "tiny-lora-v2"})
    assert r.status_code == 200 and r.text == "Success: LoRA adapter 'tiny-lora-v2' removed successfully."
    assert chat(server, [SYSTEM, ASK], model="tiny-lora-v2").status_code == 404
    r = httpx.post(f"{server}/v1/unload_lora_adapter", json={"lora_name": "tiny-lora-v2"})
    assert r.status_code == 404 and r.json()["error"]["type"] == "NotFoundError"


def test_a_full_model_folder_loads_under_a_served_name(server: str, tiny_checkpoints: tuple[Path, Path]) -> None:
    base, _ = tiny_checkpoints
    r = httpx.post(f"{server}/v1/load_lora_adapter", json={"lora_name": "tiny-full-v3", "lora_path": str(base)})
    assert r.status_code == 200 and r.text == "Success: model 'tiny-full-v3' added successfully."
    r = chat(server, [SYSTEM, ASK], model="tiny-full-v3")
    assert r.status_code == 200 and r.json()["model"] == "tiny-full-v3"
    assert r.json()["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "get_order_details"
    assert httpx.post(f"{server}/v1/unload_lora_adapter", json={"lora_name": "tiny-full-v3"}).status_code == 200


def _error(r: httpx.Response, status: int) -> dict:
    assert r.status_code == status, r.text
    err = r.json()["error"]
    assert err["code"] == status and err["message"] and err["type"]
    return err


def test_errors_are_openai_shaped_and_never_500(server: str, tiny_checkpoints: tuple[Path, Path],
                                                tmp_path: Path) -> None:
    err = _error(chat(server, [ASK], model="no-such-model"), 404)
    assert err["type"] == "NotFoundError" and err["param"] == "model" and "no-such-model" in err["message"]
    post = f"{server}/v1/chat/completions"
    _error(httpx.post(post, content=b"{not json", headers={"content-type": "application/json"}), 400)
    assert "messages" in _error(httpx.post(post, json={"model": BASE}), 400)["message"]
    _error(httpx.post(post, json={"model": BASE, "messages": []}), 400)
    _error(httpx.post(post, json={"model": BASE, "messages": [{"role": "wizard", "content": "x"}]}), 400)
    assert _error(chat(server, [ASK], stream=True), 400)["param"] == "stream"
    assert _error(chat(server, [ASK], n=2), 400)["param"] == "n"
    assert _error(chat(server, [ASK], tool_choice="required"), 400)["param"] == "tool_choice"
    assert _error(chat(server, [ASK], temperature=-1), 400)["param"] == "temperature"
    load = f"{server}/v1/load_lora_adapter"
    _error(httpx.post(load, json={"lora_name": "x"}), 400)
    _error(httpx.post(load, json={"lora_name": "x", "lora_path": str(tmp_path / "missing")}), 404)
    _error(httpx.post(load, json={"lora_name": "x", "lora_path": str(tmp_path)}), 400)  # not a model folder
    bad = tmp_path / "bad-adapter"
    bad.mkdir()
    config = json.loads((tiny_checkpoints[1] / "adapter_config.json").read_text())
    (bad / "adapter_config.json").write_text(json.dumps({**config, "r": 4}))  # tensors are rank 8
    (bad / "adapter_model.safetensors").write_bytes((tiny_checkpoints[1] / "adapter_model.safetensors").read_bytes())
    assert "do not fit" in _error(httpx.post(load, json={"lora_name": "x", "lora_path": str(bad)}), 400)["message"]
    assert "x" not in {c["id"] for c in httpx.get(f"{server}/v1/models").json()["data"]}
    _error(httpx.post(f"{server}/v1/unload_lora_adapter", json={}), 400)
    _error(httpx.get(f"{server}/v1/nothing-here"), 404)
