"""Our agent loop inside verl's real classes: built by Hydra from agent_loops.yaml exactly as verl's
AgentLoopWorker builds it, run with verl's config, its output converted by verl's own
`AgentLoopOutput.as_dict`. The only test double is verl's generation server: it returns token ids
from a scripted stream (the oracle's replies of a reference episode, tokenized). Real sandboxes of
the tau store, the scripted customer, our tools and reward."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import hydra
import pytest
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopOutput, DictConfigWrap, ToolListWrap
from verl.utils.dataset.rl_dataset import RLHFDataset
from verl.workers.rollout.replica import TokenOutput

from backend.agent.policy import system_prompt
from backend.tools.registry import RETAIL
from rl.chat.format import IM_END, assistant_body
from rl.env import GoldStateCache
from rl.env.episode import run_episode
from rl.env.gold import ensure_tools_registered
from rl.grpo.trace import trace_from_messages
from rl.models.tokenizer import encode, train_bpe
from rl.policies.oracle import OraclePolicy
from rl.simulator.scripted import ScriptedCustomer
from rl.verl.agent_loop import MuarlAgentLoop
from rl.verl.agent_loop_name import AGENT_NAME, LOOP_TARGET
from rl.verl.environment import VerlEnvironment, install, uninstall
from rl.verl.recipes import get_recipe, grpo_overrides

LOGPROB = -0.25
SAMPLING = {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "repetition_penalty": 1.0, "logprobs": True}


class ScriptedServer:
    """verl's generation server (LLMServerClient.generate) answering from a list of token streams."""

    def __init__(self, streams: list[list[int]] | None = None, *, fail_at: int | None = None,
                 hang: bool = False, repeat: list[int] | None = None) -> None:
        self.streams, self.fail_at, self.hang, self.repeat = list(streams or []), fail_at, hang, repeat
        self.prompts: list[list[int]] = []
        self.started = asyncio.Event()

    async def generate(self, request_id: str, *, prompt_ids: list[int], sampling_params: dict[str, Any],
                       **kw: Any) -> TokenOutput:
        self.prompts.append(list(prompt_ids))
        self.params = dict(sampling_params)
        self.started.set()
        if self.hang:
            await asyncio.Event().wait()
        if self.fail_at is not None and len(self.prompts) >= self.fail_at:
            raise ConnectionError("replica went away")
        ids = self.repeat if self.repeat is not None else self.streams.pop(0)
        return TokenOutput(token_ids=ids, log_probs=[LOGPROB] * len(ids), stop_reason="completed")


def _plain(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages without call ids (each side names its calls its own way)."""
    out = []
    for m in messages:
        m = {k: v for k, v in m.items() if k not in ("tool_call_id",)}
        m["content"] = m.get("content") or ""
        if m.get("tool_calls"):
            m["tool_calls"] = [{"name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                               for c in m["tool_calls"]]
        out.append(m)
    return out


@pytest.fixture(scope="module")
def tokenizer():
    ensure_tools_registered()
    import json
    texts = [system_prompt(), *[json.dumps(t) for t in RETAIL.openai_schemas()]] * 3
    return train_bpe(texts, vocab_size=800)


@pytest.fixture(scope="module")
def verl_config(tmp_path_factory):
    import verl.trainer.config as pkg
    from hydra import compose, initialize_config_dir
    d = tmp_path_factory.mktemp("verl_cfg")
    with initialize_config_dir(config_dir=str(Path(pkg.__file__).parent), version_base=None):
        return compose(config_name="ppo_trainer", overrides=[*grpo_overrides(get_recipe("qwen3-8b"), d),
                                                                 "data.max_prompt_length=16384"])


@pytest.fixture
async def env(retail_pool, generated_tasks):
    e = VerlEnvironment(pool=retail_pool, tasks={t.id: t for t in generated_tasks}, user=ScriptedCustomer(),
                        cache=GoldStateCache())
    install("muarl-test", e)
    yield e
    uninstall("muarl-test")


def make_loop(verl_config, tokenizer, server) -> MuarlAgentLoop:
    """As verl's AgentLoopWorker._run_agent_loop does, from an agent_loops.yaml entry."""
    entry = OmegaConf.create([{"name": AGENT_NAME, "_target_": LOOP_TARGET, "env": {"name": "muarl-test"}}])[0]
    return hydra.utils.instantiate(config=entry, trainer_config=DictConfigWrap(config=verl_config),
                                   server_manager=server, tokenizer=tokenizer, processor=None, hf_model_type=None,
                                   dataset_cls=RLHFDataset, data_config=DictConfigWrap(verl_config.data),
                                   tools=ToolListWrap([]))


def row(task) -> dict[str, Any]:
    return {"raw_prompt": [{"role": "system", "content": system_prompt()}], "index": 0, "tools_kwargs": {},
            "extra_info": {"task_id": task.id, "snapshot": task.snapshot, "index": 0}}


async def reference(env: VerlEnvironment, generated_tasks) -> tuple[Any, Any]:
    """A task the oracle solves, and its episode through our own runner."""
    for task in generated_tasks:
        async with env.pool.sandbox() as sb:
            traj = await run_episode(task, OraclePolicy(), ScriptedCustomer(), sb, cache=env.cache, seed=0)
        if traj.reward == 1.0 and any(m.get("tool_calls") for m in traj.messages):
            return task, traj
    raise AssertionError("the oracle solved no task")


async def test_loop_plays_our_episode_token_exact(env, generated_tasks, tokenizer, verl_config) -> None:
    task, ref = await reference(env, generated_tasks)
    streams = [encode(tokenizer, assistant_body(m.get("content"), m.get("tool_calls")) + IM_END)
               for m in ref.messages if m["role"] == "assistant"]
    server = ScriptedServer(streams)
    in_use = env.pool.in_use
    out: AgentLoopOutput = await make_loop(verl_config, tokenizer, server).run(dict(SAMPLING), **row(task))
    assert env.pool.in_use == in_use  # the sandbox went back

    # the same conversation as our own episode runner, the same reward
    extra = out.extra_fields
    assert _plain(extra["muarl_messages"]) == _plain(ref.messages)
    assert out.reward_score == ref.reward == 1.0 and extra["muarl_reward"] == 1.0
    assert extra["muarl_breakdown"] == ref.breakdown and extra["muarl_excluded_flag"] == 0
    assert out.num_turns == ref.turns and extra["muarl_ended_by"] == ref.ended_by

    # tokens and mask: exactly our own trace of that conversation (up to the agent's last turn: the
    # customer's closing message is never shown to the model)
    msgs = extra["muarl_messages"]
    last = max(i for i, m in enumerate(msgs) if m["role"] == "assistant")
    own = trace_from_messages(tokenizer, msgs[:last + 1], RETAIL.openai_schemas())
    assert out.prompt_ids + out.response_ids == own.input_ids
    assert out.response_mask == own.loss_mask[len(out.prompt_ids):]
    assert sum(out.response_mask) == sum(len(s) for s in [encode(tokenizer, assistant_body(
        m.get("content"), m.get("tool_calls")) + IM_END) for m in ref.messages if m["role"] == "assistant"])
    assert all(lp == (LOGPROB if m else 0.0) for lp, m in zip(out.response_logprobs, out.response_mask, strict=True))
    # every prompt the server saw is a prefix of the final sequence (append-only)
    for p in server.prompts:
        assert own.input_ids[:len(p)] == p

    # verl's own conversion: the reward sits on the last response token
    d = out.as_dict()
    assert d["rm_scores"][-1].item() == 1.0 and d["rm_scores"].sum().item() == 1.0
    assert d["response_mask"].tolist() == out.response_mask


async def test_server_failure_gives_no_gradient_and_releases(env, generated_tasks, tokenizer, verl_config) -> None:
    task, ref = await reference(env, generated_tasks)
    streams = [encode(tokenizer, assistant_body(m.get("content"), m.get("tool_calls")) + IM_END)
               for m in ref.messages if m["role"] == "assistant"]
    in_use = env.pool.in_use
    out = await make_loop(verl_config, tokenizer, ScriptedServer(streams, fail_at=3)).run(dict(SAMPLING), **row(task))
    assert env.pool.in_use == in_use
    assert out.extra_fields["muarl_excluded"] == "policy_server_error"
    assert out.extra_fields["muarl_excluded_flag"] == 1
    assert out.reward_score == 0.0 and sum(out.response_mask) == 0 and len(out.response_ids) > 0


async def test_cancelled_rollout_releases_its_sandbox(env, generated_tasks, tokenizer, verl_config) -> None:
    task = generated_tasks[0]
    server = ScriptedServer(hang=True)
    in_use = env.pool.in_use
    run = asyncio.create_task(make_loop(verl_config, tokenizer, server).run(dict(SAMPLING), **row(task)))
    await asyncio.wait_for(server.started.wait(), 30)
    assert env.pool.in_use == in_use + 1
    run.cancel()
    with pytest.raises(asyncio.CancelledError):
        await run
    assert env.pool.in_use == in_use


async def test_turn_limit_holds(env, generated_tasks, tokenizer, verl_config) -> None:
    task = generated_tasks[0]
    call = encode(tokenizer, assistant_body("", [{"function": {"name": "get_user_details",
                                                               "arguments": {"user_id": "nobody_1"}}}]) + IM_END)
    server = ScriptedServer(repeat=call)
    out = await make_loop(verl_config, tokenizer, server).run(dict(SAMPLING), **row(task))
    assert out.extra_fields["muarl_ended_by"] == "max_turns"
    assert out.num_turns == 30  # the customer's first message + 29 tool calls
    assert server.params["max_tokens"] == 1024 and server.params["temperature"] == 1.0
    assert len(server.prompts) == 29
    assert out.extra_fields["muarl_excluded_flag"] == 0 and out.reward_score == 0.0
