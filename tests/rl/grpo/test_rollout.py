"""GRPO rollouts through the real episode runner: sandboxes on Postgres, the scripted customer, a
tiny random model as the agent. Checks the wiring (traces, rewards, exclusion, turn counts) and that
the trace's mask-1 tokens are exactly the agent's turns as the runner recorded them."""

import asyncio
import json
import random

import pytest

from backend.agent.policy import STORE_POLICY
from rl.chat.format import compact_tools, parse_reply
from rl.chat.views import ChatView
from rl.env import SandboxPool, create_snapshot, drop_snapshot
from rl.env.episode import EpisodeLimits
from rl.env.gold import GoldStateCache
from rl.grpo.rollout import BackgroundLoop, EpisodeRollout
from rl.models.tokenizer import decode
from rl.simulator.scripted import ScriptedCustomer
from rl.tasks.generator import generate_tasks

SHORT_PROMPT = ChatView(system_prompt=STORE_POLICY[:200])  # the model reads a short system message


@pytest.fixture
def env_loop():
    loop = BackgroundLoop()
    yield loop
    loop.close()


async def test_episode_rollouts_give_token_exact_traces(test_dbs, tau_retail, tiny_tok, tiny_model, env_loop):
    tasks = generate_tasks(json.loads(json.dumps(tau_retail)) if not isinstance(tau_retail, dict) else tau_retail,
                           3, 0, snapshot="tau-retail")[:2]
    snap = env_loop.run(create_snapshot(test_dbs.server_url, tau_retail, name=f"{test_dbs.prefix}_grpo_snap"))
    pool = env_loop.run(_start(SandboxPool(snap, size=2)))
    try:
        rollout = EpisodeRollout(tiny_tok, env_loop, pool, GoldStateCache(), ScriptedCustomer(),
                                 view=SHORT_PROMPT, max_new_tokens=8, max_context=4096,
                                 tools_transform=compact_tools, limits=EpisodeLimits(max_turns=4))
        trajectories, traces = rollout.play(tiny_model, tasks, 2, seed=0)
    finally:
        env_loop.run(pool.close())
        env_loop.run(drop_snapshot(snap))
    assert len(traces) == 4 and {t.group for t in traces} == {t.id for t in tasks}
    for traj, trace in zip(trajectories, traces, strict=True):
        assert traj.excluded is None, traj.error
        assert trace.reward == 0.0 and not trace.excluded  # a random model completes nothing
        assert 1 <= trace.info["turns"] <= 4
        task = next(t for t in tasks if t.id == trace.task_id)
        assert f"category:{trace.info['category']}" in task.tags
        agent_turns = [m for m in traj.messages if m["role"] == "assistant"]
        runs = _mask_runs(trace)  # one contiguous mask-1 run per agent turn
        assert len(runs) == len(agent_turns)
        for ids, m in zip(runs, agent_turns, strict=True):
            assert parse_reply(decode(tiny_tok, ids)).content == (m.get("content") or "")
        assert decode(tiny_tok, trace.input_ids).count(traj.messages[1]["content"]) == 1
        # every episode is given the store policy; this model's view shows it its short prompt
        assert traj.messages[0]["content"] == STORE_POLICY and STORE_POLICY not in decode(tiny_tok, trace.input_ids)
    assert rollout.last_generation["new_tokens"] > 0


def _mask_runs(trace):
    runs, cur = [], []
    for t, m in zip(trace.input_ids, trace.loss_mask, strict=True):
        if m:
            cur.append(t)
        elif cur:
            runs.append(cur)
            cur = []
    return runs + ([cur] if cur else [])


async def _start(pool):
    return await pool.start()


async def test_more_episodes_than_sandboxes_are_all_scored(test_dbs, tau_retail, tiny_tok, tiny_model, env_loop):
    """A pool capped below the number of running episodes (as in parallel experiment workers):
    the step's gold states are replayed before any episode holds a sandbox, so no episode waits
    for a second sandbox to score and none ends with the reward timeout."""
    tasks = [t for t in generate_tasks(tau_retail, 12, 1, snapshot="tau-retail") if t.gold_writes][:3]
    snap = env_loop.run(create_snapshot(test_dbs.server_url, tau_retail, name=f"{test_dbs.prefix}_grpo_cap"))
    pool = env_loop.run(_start(SandboxPool(snap, size=2, max_sandboxes=2)))
    cache = GoldStateCache()
    try:
        rollout = EpisodeRollout(tiny_tok, env_loop, pool, cache, ScriptedCustomer(), view=SHORT_PROMPT,
                                 max_new_tokens=4, max_context=4096, tools_transform=compact_tools,
                                 limits=EpisodeLimits(max_turns=2, reward_timeout_s=5.0), concurrency=6)
        trajectories, traces = rollout.play(tiny_model, tasks, 2, seed=0)
    finally:
        env_loop.run(pool.close())
        env_loop.run(drop_snapshot(snap))
    assert len(traces) == 6 and cache.replays == 0  # every gold state came from the rolled-back replays
    assert [traj.excluded for traj in trajectories] == [None] * 6, [traj.error for traj in trajectories]


async def test_rollouts_sample_the_same_tokens_however_episodes_are_scheduled(test_dbs, tau_retail, tiny_tok,
                                                                             tiny_model, env_loop):
    """Batches form by arrival time, and sandboxes and the database make arrival differ from run to
    run; each episode samples from its own stream (rl/policies/local.py), so one episode at a time
    and six at once give the same traces, and another run seed gives other ones."""
    tasks = generate_tasks(tau_retail, 3, 2, snapshot="tau-retail")[:3]
    snap = env_loop.run(create_snapshot(test_dbs.server_url, tau_retail, name=f"{test_dbs.prefix}_grpo_rep"))
    pool = env_loop.run(_start(SandboxPool(snap, size=2)))

    def play(concurrency: int, seed: int = 0) -> dict[tuple[str, int], list[int]]:
        rollout = EpisodeRollout(tiny_tok, env_loop, pool, GoldStateCache(), ScriptedCustomer(), view=SHORT_PROMPT,
                                 max_new_tokens=12, max_context=4096, tools_transform=compact_tools,
                                 limits=EpisodeLimits(max_turns=3), concurrency=concurrency, seed=seed)
        _, traces = rollout.play(tiny_model, tasks, 2, seed=1000)
        return {(t.task_id, t.info["trial"]): t.input_ids for t in traces}

    try:
        one_at_a_time, together, other_seed = play(1), play(6), play(6, seed=1)
    finally:
        env_loop.run(pool.close())
        env_loop.run(drop_snapshot(snap))
    assert len(together) == 6 and one_at_a_time == together
    assert other_seed.keys() == together.keys() and other_seed != together


class _Jittered:
    """The scripted customer, each of whose replies takes a random while (as a real customer's or a
    loaded database's would): the timing of a run, drawn from `seed`."""

    def __init__(self, seed: int) -> None:
        self.inner, self.rng = ScriptedCustomer(), random.Random(seed)
        self.name, self.model, self.prompt_version = self.inner.name, self.inner.model, self.inner.prompt_version

    def session(self, task, seed):
        session, rng = self.inner.session(task, seed), self.rng

        class Session:
            def __getattr__(self, name):
                return getattr(session, name)

            async def respond(self, messages):
                await asyncio.sleep(rng.choice([0.0, 0.0, 0.03, 0.1]))
                return await session.respond(messages)

        return Session()


async def test_lockstep_rollouts_batch_the_same_turns_whatever_the_timing(test_dbs, tau_retail, tiny_tok,
                                                                          tiny_model, env_loop):
    """Six episodes, two at a time, on customers whose replies take random whiles: episodes are
    admitted in task order and every batch waits for each running episode's turn, so two runs with
    other timings batch the same turns together and sample the same tokens."""
    tasks = generate_tasks(tau_retail, 3, 2, snapshot="tau-retail")[:3]
    snap = env_loop.run(create_snapshot(test_dbs.server_url, tau_retail, name=f"{test_dbs.prefix}_grpo_lock"))
    pool = env_loop.run(_start(SandboxPool(snap, size=2)))

    def play(timing: int) -> tuple[list[tuple[str, ...]], dict[tuple[str, int], list[int]]]:
        rollout = EpisodeRollout(tiny_tok, env_loop, pool, GoldStateCache(), _Jittered(timing), view=SHORT_PROMPT,
                                 max_new_tokens=12, max_context=4096, tools_transform=compact_tools,
                                 limits=EpisodeLimits(max_turns=3), concurrency=2)
        _, traces = rollout.play(tiny_model, tasks, 2, seed=1000)
        return rollout.last_rounds, {(t.task_id, t.info["trial"]): t.input_ids for t in traces}

    try:
        (rounds_1, traces_1), (rounds_2, traces_2) = play(1), play(2)
    finally:
        env_loop.run(pool.close())
        env_loop.run(drop_snapshot(snap))
    assert len(traces_1) == 6 and traces_1 == traces_2
    assert rounds_1 == rounds_2 and max(len(r) for r in rounds_1) == 2
    # the first two episodes in task order play first, and every episode has at least one turn
    first_two = {f"{tasks[0].id}#1000", f"{tasks[0].id}#1001"}
    assert set(rounds_1[0]) == first_two
    assert {k for r in rounds_1 for k in r} == {f"{t.id}#{1000 + k}" for t in tasks for k in range(2)}
