"""The episode runner: one agent, one simulated customer and the real tools on a private sandbox.

`run_episode` plays a task to its end through the production agent step
(`backend.agent.loop.agent_turn`: the same model call, calls kept per step and malformed-call
handling as the chat service) - the customer stops (`###STOP###` / `###TRANSFER###`), a
terminal tool runs (transfer to a human), or the turn limit is hit (30 turns, counting customer
turns and tool calls as MUA-RL does) - with a timeout on every agent step, customer reply and tool
call. Tools run as a *customer* principal, exactly as in production (the conversation must
authenticate before touching records). The `Trajectory` keeps the OpenAI-format messages as the model
was shown them, each tool call with its result and timing, the models used, the reward with its breakdown,
the criteria and TCR. Failures outside the agent (simulator, policy endpoint, sandbox, reward) set
`excluded` to a cause; such episodes carry no reward and are left out of scores and GRPO group statistics.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any

import structlog
from pydantic import BaseModel, Field
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from backend.agent.llm import ChatModel, Completion, LLMUnavailable, ToolCallRequest
from backend.agent.loop import AgentConfig, AssistantStep, Reply, ToolStep, TurnStats, agent_turn
from backend.agent.policy import system_prompt
from backend.config import get_settings
from backend.tools.context import Principal
from backend.tools.registry import RETAIL, ToolKind, ToolResult
from rl.env.consent import ConsentLedger
from rl.env.gold import GoldSpec, GoldStateCache, ensure_tools_registered
from rl.env.reward import score
from rl.env.sandbox import Sandbox
from rl.policies.base import AgentPolicy
from rl.simulator.base import OUT_OF_SCOPE, TRANSFER, SimulatorError, UserSimulator, ended_by
from rl.tasks.criteria import evaluate_criteria
from rl.tasks.schema import Task

log = structlog.get_logger(__name__)


@dataclass(frozen=True)
class EpisodeLimits:
    max_turns: int = 30
    agent_timeout_s: float = 120.0
    user_timeout_s: float = 120.0
    tool_timeout_s: float = 30.0
    reward_timeout_s: float = 60.0


class ToolCallRecord(BaseModel):
    name: str
    arguments: Any
    output: str
    ok: bool
    denied: bool = False
    elapsed_ms: float = 0.0


class Trajectory(BaseModel):
    task_id: str
    trial: int = 0
    seed: int = 0
    tags: list[str] = Field(default_factory=list)
    policy: str
    policy_model: str
    user: str
    user_model: str
    user_prompt_version: str
    messages: list[dict[str, Any]] = Field(default_factory=list)
    tool_calls: list[ToolCallRecord] = Field(default_factory=list)
    turns: int = 0
    user_turns: int = 0
    ended_by: str = "running"  # user_stop | user_transfer | transfer | max_turns | error
    reward: float | None = None
    breakdown: dict[str, Any] | None = None
    criteria: dict[str, bool] = Field(default_factory=dict)
    tcr: float | None = None
    excluded: str | None = None  # cause, when the episode failed outside the agent (simulator_*: the customer)
    error: str | None = None
    timings_ms: dict[str, float] = Field(default_factory=dict)
    traces: list[Any] = Field(default_factory=list, exclude=True)  # policy training data, in memory only

    @property
    def success(self) -> bool:
        return self.excluded is None and self.reward == 1.0


def gold_spec(task: Task) -> GoldSpec:
    return GoldSpec(key=f"{task.snapshot}:{task.id}",
                    actions=[{"name": a.name, "arguments": a.arguments} for a in task.gold_actions],
                    outputs=list(task.outputs))


class _Timed:
    """A policy's model whose every call must answer within `timeout_s` (else `policy_timeout`)."""

    def __init__(self, model: ChatModel, timeout_s: float) -> None:
        self.model, self.timeout_s, self.name = model, timeout_s, getattr(model, "name", "")

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        try:
            return await asyncio.wait_for(self.model.complete(messages, tools), self.timeout_s)
        except TimeoutError:
            raise LLMUnavailable("timeout", f"no answer within {self.timeout_s:g} s") from None


class _Excluded(Exception):
    def __init__(self, cause: str, detail: str) -> None:
        super().__init__(detail)
        self.cause = cause


async def _timed(aw: Any, timeout: float, cause: str) -> Any:
    try:
        return await asyncio.wait_for(aw, timeout)
    except TimeoutError:
        raise _Excluded(cause, f"no answer within {timeout:g} s") from None


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw) if raw.strip() else {}
        except ValueError:
            return raw  # the registry answers malformed JSON with an error text
    return raw


async def run_episode(task: Task, policy: AgentPolicy, user: UserSimulator, sandbox: Sandbox, *,
                      cache: GoldStateCache, trial: int = 0, seed: int = 0,
                      limits: EpisodeLimits = EpisodeLimits(), upstream_compat: bool = False,
                      keep_changes: bool = False, agent: AgentConfig | None = None) -> Trajectory:
    """Play `task` once on `sandbox` and score it. Never raises for episode failures.

    The episode runs in one transaction that is rolled back after scoring (tools use savepoints
    inside it), so the sandbox is fresh again and its pool reuses it instead of copying a new
    database. `keep_changes=True` (or a transaction the caller already holds) leaves the writes."""
    if keep_changes or sandbox.conn.in_transaction():
        return await _play(task, policy, user, sandbox, cache=cache, trial=trial, seed=seed, limits=limits,
                           upstream_compat=upstream_compat, agent=agent)
    async with sandbox.rolled_back():
        return await _play(task, policy, user, sandbox, cache=cache, trial=trial, seed=seed, limits=limits,
                           upstream_compat=upstream_compat, agent=agent)


async def _play(task: Task, policy: AgentPolicy, user: UserSimulator, sandbox: Sandbox, *,
                cache: GoldStateCache, trial: int, seed: int, limits: EpisodeLimits, upstream_compat: bool,
                agent: AgentConfig | None) -> Trajectory:
    ensure_tools_registered()
    traj = Trajectory(task_id=task.id, trial=trial, seed=seed, tags=task.tags, policy=policy.name,
                      policy_model=policy.model, user=user.name, user_model=user.model,
                      user_prompt_version=user.prompt_version)
    timings = {"agent": 0.0, "user": 0.0, "tools": 0.0, "reward": 0.0}
    start = time.perf_counter()
    ctx = sandbox.tool_context(Principal.customer(), upstream_compat=upstream_compat)
    # the store policy every agent is given; a model that reads another one says so in its view
    messages: list[dict[str, Any]] = [{"role": "system", "content": system_prompt()}]
    traj.messages = messages
    # the production agent's rules; its per-message step limit is never reached first, since every
    # step that does not answer makes a tool call, and each call counts against the episode's turns
    agent = agent or AgentConfig.from_settings(get_settings())
    agent = dataclasses.replace(agent, max_steps=max(agent.max_steps, limits.max_turns))
    tools = RETAIL.openai_schemas()
    consent = ConsentLedger({t.name for t in RETAIL if t.kind is ToolKind.WRITE})
    try:
        model = _Timed(policy.session(task, seed), limits.agent_timeout_s)
        customer = user.session(task, seed)

        async def user_turn() -> bool:
            t0 = time.perf_counter()
            reply, done = await _timed(customer.respond(messages), limits.user_timeout_s, "simulator_timeout")
            timings["user"] += (time.perf_counter() - t0) * 1000
            messages.append({"role": "user", "content": reply})
            consent.customer_replied(customer)
            traj.turns += 1
            traj.user_turns += 1
            if done:
                token = ended_by(reply)
                if token == OUT_OF_SCOPE:
                    raise _Excluded("simulator_out_of_scope", "the simulated customer left the scenario")
                traj.ended_by = "user_transfer" if token == TRANSFER else "user_stop"
            return done

        async def run_tool(call: ToolCallRequest) -> ToolResult:
            t0 = time.perf_counter()
            result = await _timed(RETAIL.call(ctx, call.name, call.arguments), limits.tool_timeout_s, "tool_timeout")
            timings["tools"] += (time.perf_counter() - t0) * 1000
            return result

        if await user_turn():
            raise _Excluded("simulator_error", "the simulated customer ended before the agent spoke")
        while traj.turns < limits.max_turns:
            stats = TurnStats()
            async with aclosing(agent_turn(messages, model, tools, run_tool, config=agent, stats=stats)) as events:
                async for event in events:
                    if isinstance(event, AssistantStep | Reply) and event.trace is not None:
                        traj.traces.append(event.trace)
                    if isinstance(event, ToolStep):
                        traj.turns += 1
                        traj.tool_calls.append(ToolCallRecord(
                            name=event.name, arguments=_arguments(event.arguments), output=event.result.output,
                            ok=event.result.ok, denied=event.result.denied, elapsed_ms=event.result.elapsed_ms))
                        consent.tool_ran(event.name, event.arguments, event.result.ok and not event.result.denied)
                        if traj.turns >= limits.max_turns:
                            break
                    elif isinstance(event, Reply):
                        if event.reason == "llm_unavailable":
                            kind = event.error.kind if event.error is not None else "unavailable"
                            raise _Excluded(f"policy_{kind}", str(event.error))
                        if event.reason == "transfer":
                            traj.ended_by = "transfer"
            timings["agent"] += stats.model_seconds * 1000
            if traj.ended_by == "transfer" or traj.turns >= limits.max_turns:
                break
            if await user_turn():
                break
        if traj.ended_by == "running":
            traj.ended_by = "max_turns"
        texts = [str(m.get("content")) for m in messages if m.get("role") == "assistant" and m.get("content")]
        t0 = time.perf_counter()
        breakdown = await _timed(score(sandbox, gold_spec(task), texts, cache=cache, upstream_compat=upstream_compat,
                                       unconfirmed_writes=None if upstream_compat else consent.violations),
                                 limits.reward_timeout_s, "reward_timeout")
        timings["reward"] = (time.perf_counter() - t0) * 1000
        traj.reward = breakdown.reward
        traj.breakdown = breakdown.model_dump()
        calls_done = [(c.name, c.arguments if isinstance(c.arguments, dict) else {}, c.ok) for c in traj.tool_calls]
        traj.criteria, traj.tcr = evaluate_criteria(task, calls_done, texts)
    except _Excluded as e:
        traj.excluded, traj.error = e.cause, str(e)
    except SimulatorError as e:
        traj.excluded, traj.error = e.cause, str(e)
    except (DBAPIError, SQLAlchemyError, OSError) as e:
        traj.excluded, traj.error = "sandbox_error", f"{type(e).__name__}: {e}"
    except Exception as e:  # a bug in the runner or a policy: reported, never scored
        log.exception("episode.crashed", task=task.id)
        traj.excluded, traj.error = "internal_error", f"{type(e).__name__}: {e}"
    if traj.excluded:
        traj.ended_by = "error"
    timings["total"] = (time.perf_counter() - start) * 1000
    traj.timings_ms = {k: round(v, 3) for k, v in timings.items()}
    return traj
