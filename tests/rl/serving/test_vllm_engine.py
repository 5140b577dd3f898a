"""The production path against a real vLLM (the CPU build in .venv-vllm, made by `make vllm-venv`,
which `make test` runs first): a tiny Qwen3 checkpoint trained here is registered, vLLM is launched with
the command `muarl serving vllm-command` builds for it, a LoRA adapter version (PEFT files written by
rl/serving/lora.py) is promoted through the ops API, which loads it into vLLM under its versioned name
before the alias moves, the customer's next reply comes from the adapter's name, and a rollback
brings the base back. vLLM starts once (60-120 s on two cores)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import httpx
import pytest
import torch

from backend.db.engine import make_engine
from backend.serving.registry import ModelRegistry
from backend.serving.vllm_command import vllm_command
from rl.chat.format import render_conversation
from rl.models.tiny import load_model_folder
from rl.models.tokenizer import encode
from rl.serving.lora import apply_adapter
from tests.backend.api.serving import ApiServer, make_settings, start_chat
from tests.rl.serving.conftest import ROOT, free_port, running
from tests.rl.serving.tiny_checkpoint import ASK, CALL_ARGS, SYSTEM, TOOLS

VLLM_PYTHON = ROOT / ".venv-vllm" / "bin" / "python"
OPS = {"Authorization": "Bearer ops-test-token", "X-Ops-Actor": "vllm-test"}

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not VLLM_PYTHON.exists(), reason="no vLLM venv (make vllm-venv builds it)")]


def first_token_logprobs(url: str, model: str) -> dict[int, float]:
    """Token id -> log-prob of the first reply token's top 3, as vLLM serves `model`."""
    r = httpx.post(f"{url}/v1/chat/completions", timeout=60, json={
        "model": model, "messages": [SYSTEM, ASK], "temperature": 0, "max_tokens": 1, "logprobs": True,
        "top_logprobs": 3, "return_tokens_as_token_ids": True})
    assert r.status_code == 200, r.text
    top = r.json()["choices"][0]["logprobs"]["content"][0]["top_logprobs"]
    return {int(t["token"].removeprefix("token_id:")): t["logprob"] for t in top}


def merged_logprobs(base: Path, adapter: Path | None) -> dict[int, float]:
    """The same first-token log-probs computed here, with the adapter merged in-process."""
    model, tok, _ = load_model_folder(base)
    if adapter is not None:
        model = copy.deepcopy(model)
        apply_adapter(model, adapter)
    ids = torch.tensor([encode(tok, render_conversation([SYSTEM, ASK], add_generation_prompt=True))])
    with torch.no_grad():
        logp = model(ids).logits[0, -1].log_softmax(-1)
    top = logp.topk(3)
    return {int(i): float(v) for v, i in zip(top.values, top.indices, strict=True)}


async def test_promote_an_adapter_on_real_vllm_and_roll_back(tiny_checkpoints: tuple[Path, Path], tau_db: str,
                                                             tmp_path: Path) -> None:
    base_dir, adapter_dir = tiny_checkpoints
    engine = make_engine(tau_db, null_pool=True)
    registry = ModelRegistry(engine)
    try:
        base = await registry.register_folder(base_dir, actor="test", engine="vllm")
        port = free_port()
        command = vllm_command(base, profile="cpu", python=str(VLLM_PYTHON), host="127.0.0.1", port=port,
                               max_loras=2)
        assert {"--enable-auto-tool-choice", "--enable-lora"} <= set(command.argv)
        assert command.argv[command.argv.index("--tool-call-parser") + 1] == "hermes"
        assert "--chat-template" not in command.argv  # the checkpoint carries its own template
        vllm = f"http://127.0.0.1:{port}"
        with running(command.argv, f"{vllm}/health", timeout_s=420, env=command.env, log=tmp_path / "vllm.log"):
            # vLLM renders the checkpoint's template and parses its hermes call into OpenAI tool_calls
            r = httpx.post(f"{vllm}/v1/chat/completions", timeout=60, json={
                "model": base.served_name, "messages": [SYSTEM, ASK], "tools": TOOLS, "temperature": 0})
            assert r.status_code == 200, r.text
            (call,) = r.json()["choices"][0]["message"]["tool_calls"]
            assert call["function"]["name"] == "get_order_details"
            assert json.loads(call["function"]["arguments"]) == CALL_ARGS
            assert httpx.get(f"{vllm}/v1/models").json()["data"][0]["id"] == base.served_name

            adapter = await registry.register_folder(adapter_dir, actor="test", engine="vllm", base=base.id,
                                                     parent=base.id)
            api = await ApiServer(make_settings(tau_db, None, MUARL_VLLM_BASE_URL=f"{vllm}/v1")).start()
            try:
                async with httpx.AsyncClient(base_url=api.url, timeout=120) as client:
                    r = await client.post(f"/v1/ops/models/{base.id}/promote",
                                          json={"reason": "first model", "skip_gates": True}, headers=OPS)
                    assert r.status_code == 200, r.text
                    chat = await start_chat(client)
                    first = await chat.send("Where is order #W1003?")
                    assert first["model"] == base.served_name and first["model_version"] == base.id

                    served = {m["id"] for m in httpx.get(f"{vllm}/v1/models").json()["data"]}
                    assert adapter.served_name not in served
                    await registry.record_gate_report(adapter.id, base.id, {"passed": True, "checks": []},
                                                      actor="gate")
                    r = await client.post(f"/v1/ops/models/{adapter.id}/promote", json={"reason": "better"},
                                          headers=OPS)
                    assert r.status_code == 200, r.text
                    cards = {m["id"]: m for m in httpx.get(f"{vllm}/v1/models").json()["data"]}
                    assert cards[adapter.served_name]["root"] == adapter.artifact_uri  # loaded by our promotion
                    second = await chat.send("And where is it now?")
                    assert second["model"] == adapter.served_name and second["model_version"] == adapter.id

                    r = await client.post("/v1/ops/rollback", json={"reason": "back to base"}, headers=OPS)
                    assert r.status_code == 200 and r.json()["champion"] == base.id
                    third = await chat.send("Thanks!")
                    assert third["model"] == base.served_name and third["model_version"] == base.id
                    transcript = await chat.transcript()
                    versions = {m["model_version"] for m in transcript["messages"] if m["role"] == "assistant"}
                    assert versions == {base.id, adapter.id}
            finally:
                await api.stop()

            # vLLM applies our PEFT adapter exactly as our in-process merge does, and it changes the model
            served_base = first_token_logprobs(vllm, base.served_name)
            served_adapter = first_token_logprobs(vllm, adapter.served_name)
            local_base, local_adapter = merged_logprobs(base_dir, None), merged_logprobs(base_dir, adapter_dir)
            assert served_adapter != served_base
            for served_lp, local in ((served_base, local_base), (served_adapter, local_adapter)):
                best = max(local, key=local.get)
                assert best in served_lp and abs(served_lp[best] - local[best]) < 1e-3
    finally:
        await engine.dispose()
