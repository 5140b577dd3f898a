"""The episode runner on real sandboxes and tools: a whole oracle episode, the customer principal,
the turn limit, transfers, and failures outside the agent classified and excluded."""

from __future__ import annotations

import asyncio

from backend.agent.llm import Completion, LLMUnavailable
from rl.env import GoldStateCache
from rl.env.episode import EpisodeLimits, run_episode
from rl.policies.base import text_message, tool_call_message
from rl.policies.oracle import OraclePolicy
from rl.simulator.base import SimulatorError
from rl.simulator.scripted import ScriptedCustomer
from rl.tasks.generator import generate_tasks


def one_task(tau_retail, category: str):
    return generate_tasks(tau_retail, 1, seed=2, snapshot="tau-retail", categories=[category])[0]


class Scripted:
    """A policy that plays fixed messages (then repeats the last one)."""

    def __init__(self, *messages, error: Exception | None = None, sleep_s: float = 0.0) -> None:
        self.messages, self.error, self.sleep_s = list(messages), error, sleep_s
        self.name = self.model = "scripted-policy"

    def session(self, task, seed):
        return self

    async def complete(self, messages, tools):
        if self.sleep_s:
            await asyncio.sleep(self.sleep_s)
        if self.error:
            raise self.error
        msg = self.messages.pop(0) if len(self.messages) > 1 else self.messages[0]
        return Completion.from_message(msg, self.model)


class BrokenCustomer(ScriptedCustomer):
    def __init__(self, exc: Exception | None = None, sleep_s: float = 0.0) -> None:
        super().__init__()
        self.exc, self.sleep_s = exc, sleep_s

    def session(self, task, seed):
        inner = super().session(task, seed)
        outer = self

        class S:
            async def respond(self, conversation):
                if len(conversation) > 1:
                    if outer.sleep_s:
                        await asyncio.sleep(outer.sleep_s)
                    if outer.exc:
                        raise outer.exc
                return inner.reply(conversation)
        return S()


async def test_oracle_episode_records_everything(tau_retail, tau_pool):
    task = one_task(tau_retail, "cancel")
    async with tau_pool.sandbox() as sb:
        traj = await run_episode(task, OraclePolicy(), ScriptedCustomer(), sb, cache=GoldStateCache(), seed=1)
    assert traj.excluded is None and traj.reward == 1.0 and traj.tcr == 1.0
    assert traj.ended_by == "user_stop" and traj.messages[-1]["content"].endswith("###STOP###")
    assert [c.name for c in traj.tool_calls][-1] == "cancel_pending_order"
    assert traj.turns == traj.user_turns + len(traj.tool_calls)
    assert traj.breakdown["state_match"] is True
    assert {"agent", "user", "tools", "reward", "total"} <= set(traj.timings_ms)
    assert (traj.policy, traj.user, traj.user_prompt_version) == ("oracle", "scripted", "scripted-6")


async def test_tools_run_as_the_customer_principal(tau_retail, tau_pool):
    task = one_task(tau_retail, "cancel")
    order = task.script.goals[0].order_id
    policy = Scripted(tool_call_message("c1", "get_order_details", {"order_id": order}),
                      text_message("Done."))
    async with tau_pool.sandbox() as sb:
        traj = await run_episode(task, policy, ScriptedCustomer(), sb, cache=GoldStateCache(),
                                 limits=EpisodeLimits(max_turns=4))
    first = traj.tool_calls[0]
    assert not first.ok and first.denied and "authenticated" in first.output


async def test_turn_limit_counts_user_turns_and_tool_calls(tau_retail, tau_pool):
    task = one_task(tau_retail, "return")
    policy = Scripted(tool_call_message("c", "list_all_product_types", {}))
    async with tau_pool.sandbox() as sb:
        traj = await run_episode(task, policy, ScriptedCustomer(), sb, cache=GoldStateCache(),
                                 limits=EpisodeLimits(max_turns=7))
    assert traj.ended_by == "max_turns" and traj.turns == 7 and traj.user_turns == 1
    assert traj.excluded is None and traj.reward == 0.0  # the return never happened: an agent failure


async def test_transfer_ends_the_episode(tau_retail, tau_pool):
    task = one_task(tau_retail, "info_status")
    policy = Scripted(tool_call_message("c", "transfer_to_human_agents", {"summary": "help"}))
    async with tau_pool.sandbox() as sb:
        traj = await run_episode(task, policy, ScriptedCustomer(), sb, cache=GoldStateCache())
    assert traj.ended_by == "transfer" and traj.turns == 2 and traj.reward == 0.0  # the answer was never said


async def test_failures_outside_the_agent_are_classified_and_excluded(tau_retail, tau_pool):
    task = one_task(tau_retail, "cancel")
    cases = [
        (Scripted(text_message("hi"), error=LLMUnavailable("server_error", "endpoint down")), ScriptedCustomer(),
         EpisodeLimits(), "policy_server_error"),
        (Scripted(text_message("hi"), sleep_s=0.5), ScriptedCustomer(), EpisodeLimits(agent_timeout_s=0.05),
         "policy_timeout"),
        (Scripted(text_message("hi")), BrokenCustomer(SimulatorError("bad", "simulator_error")), EpisodeLimits(),
         "simulator_error"),
        (Scripted(text_message("hi")), BrokenCustomer(sleep_s=0.5), EpisodeLimits(user_timeout_s=0.05),
         "simulator_timeout"),
        (Scripted(text_message("hi")), BrokenCustomer(RuntimeError("bug")), EpisodeLimits(), "internal_error"),
    ]
    for policy, user, limits, cause in cases:
        async with tau_pool.sandbox() as sb:
            traj = await run_episode(task, policy, user, sb, cache=GoldStateCache(), limits=limits)
        assert (traj.excluded, traj.reward, traj.ended_by) == (cause, None, "error"), cause
