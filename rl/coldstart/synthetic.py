"""Cold-start pipeline (b): conversations for domains we have no database for, with the tools
simulated by an LLM from a small synthetic store held in its prompt.

A `DomainSpec` (JSON) gives the domain's policy, its tools (OpenAI schemas, each with a `kind`:
read, write or terminal), a small store as JSON and scenarios (what the customer wants and how they
open). Three roles talk through OpenAI-compatible endpoints (`backend.agent.llm`): the agent (with
the tools), the customer (an LLM playing the scenario, ending with `###STOP###`) and the tool
simulator (given the store, the calls so far with their results, and the new call; it answers what
the tool returns, `Error: ...` for an invalid call, and keeps writes consistent with earlier results).
The agent runs through the production agent step (`backend.agent.loop.agent_turn`).
Records have the same JSONL format as pipeline (a): `{"messages", "tools", "meta"}`; there is no
real reward, so `meta.reward` comes from the LLM judge (1 when it says the goal was met within the
policy). `judge_records` can also add the judge's verdict to pipeline (a) records.
"""

from __future__ import annotations

import asyncio
import json
from contextlib import aclosing
from typing import Any

from pydantic import BaseModel, Field

from backend.agent.llm import ToolCallRequest
from backend.agent.loop import AgentConfig, Reply, ToolStep, agent_turn
from backend.tools.registry import ToolResult
from rl.simulator.base import STOP_TOKENS

TOOL_SIM_PROMPT = (
    "You simulate the tools of a customer-service system for the '{domain}' domain. The store's data:\n"
    "{store}\n\nAnswer ONLY with what the tool returns (JSON for records, `Error: <reason>` for an invalid "
    "call or a record that does not exist). Writes change the data for later calls; stay consistent with "
    "earlier results."
)
CUSTOMER_PROMPT = (
    "You are a customer talking to a customer-service agent. Your goal: {instruction}\nSay only what a "
    "customer would say, one short message at a time, reveal details only when asked, and when your goal "
    "is done or cannot be done write ###STOP###."
)
JUDGE_PROMPT = (
    "You judge customer-service conversations. Policy of the agent:\n{policy}\n\nThe customer wanted: "
    "{instruction}\n\nAnswer YES if the agent achieved the customer's goal (or correctly refused it) while "
    "following the policy, including asking for confirmation before any change; otherwise NO. Then give "
    "a one-line reason."
)


class Scenario(BaseModel):
    instruction: str
    opening: str


class DomainSpec(BaseModel):
    domain: str
    policy: str
    tools: list[dict[str, Any]]  # OpenAI schemas, each with an extra "kind": read | write | terminal
    store: dict[str, Any]
    scenarios: list[Scenario] = Field(min_length=1)

    def schemas(self) -> list[dict[str, Any]]:
        return [{k: v for k, v in t.items() if k != "kind"} for t in self.tools]

    def tool_names(self, kind: str | None = None) -> set[str]:
        return {t["function"]["name"] for t in self.tools if kind is None or t.get("kind", "read") == kind}


def _transcript(messages: list[dict[str, Any]]) -> str:
    lines = []
    names = {c.get("id"): c["function"]["name"] for m in messages for c in m.get("tool_calls") or []}
    for m in messages[1:]:
        if m["role"] == "tool":
            lines.append(f"TOOL {m.get('name') or names.get(m.get('tool_call_id'))}: {m.get('content')}")
        elif m["role"] == "assistant":
            calls = "; ".join(f"{c['function']['name']}({c['function']['arguments']})"
                              for c in m.get("tool_calls") or [])
            lines.append(f"AGENT: {m.get('content') or ''}" + (f" [calls: {calls}]" if calls else ""))
        else:
            lines.append(f"CUSTOMER: {m.get('content')}")
    return "\n".join(lines)


class SimulatedToolConversations:
    """Plays scenarios with three chat models (`backend.agent.llm.ChatModel`)."""

    def __init__(self, agent: Any, customer: Any, tools: Any, judge: Any | None = None, *,
                 max_turns: int = 20) -> None:
        self.agent, self.customer, self.tools, self.judge = agent, customer, tools, judge
        self.max_turns = max_turns

    async def play(self, spec: DomainSpec, scenario: Scenario) -> dict[str, Any]:
        """One conversation; the agent runs through the production agent step (calls kept per step,
        malformed calls), with the simulated tools behind it. Raises `LLMUnavailable` when a model fails."""
        messages: list[dict[str, Any]] = [{"role": "system", "content": spec.policy},
                                          {"role": "user", "content": scenario.opening}]
        calls_log: list[str] = []
        turns, ended_by = 1, "max_turns"
        terminal = spec.tool_names("terminal")
        tools = spec.schemas()

        async def run_tool(call: ToolCallRequest) -> ToolResult:
            out = await self._tool(spec, call.name, call.arguments, calls_log)
            calls_log.append(f"{call.name}({call.arguments}) -> {out}")
            return ToolResult(call.name, out, ok=not out.startswith("Error"), terminal=call.name in terminal)

        config = AgentConfig(max_steps=self.max_turns)
        while turns < self.max_turns:
            async with aclosing(agent_turn(messages, self.agent, tools, run_tool, config=config)) as events:
                async for event in events:
                    if isinstance(event, ToolStep):
                        turns += 1
                        if turns >= self.max_turns:
                            break
                    elif isinstance(event, Reply):
                        if event.error is not None:
                            raise event.error
                        if event.reason == "transfer":
                            ended_by = "transfer"
            if ended_by == "transfer" or turns >= self.max_turns:
                break
            said = await self._customer(scenario, messages)
            messages.append({"role": "user", "content": said})
            turns += 1
            if any(t in said for t in STOP_TOKENS):
                ended_by = "user_stop"
                break
        record = {"messages": messages, "tools": spec.schemas(),
                  "meta": {"source": "simulated_tools", "domain": spec.domain, "instruction": scenario.instruction,
                           "turns": turns, "ended_by": ended_by, "reward": None, "excluded": None}}
        if self.judge is not None:
            await judge_record(self.judge, record, spec.policy)
            record["meta"]["reward"] = 1.0 if record["meta"]["judge"]["ok"] else 0.0
        return record

    async def _tool(self, spec: DomainSpec, name: str, arguments: str, calls_log: list[str]) -> str:
        if name not in spec.tool_names():
            return f"Error: unknown tool {name}"
        try:
            json.loads(arguments or "{}")
        except ValueError:
            return f"Error: the arguments of {name} are not valid JSON"
        system = TOOL_SIM_PROMPT.format(domain=spec.domain, store=json.dumps(spec.store, ensure_ascii=False))
        history = "\n".join(calls_log) or "(none)"
        ask = f"Calls so far:\n{history}\n\nNew call: {name}({arguments})\nWhat does it return?"
        reply = await self.tools.complete([{"role": "system", "content": system}, {"role": "user", "content": ask}], [])
        return reply.content.strip() or "Error: the tool returned nothing"

    async def _customer(self, scenario: Scenario, messages: list[dict[str, Any]]) -> str:
        # the customer sees the conversation with the roles swapped and without tool traffic
        flipped = [{"role": "system", "content": CUSTOMER_PROMPT.format(instruction=scenario.instruction)}]
        for m in messages[1:]:
            if m["role"] == "user":
                flipped.append({"role": "assistant", "content": m["content"]})
            elif m["role"] == "assistant" and m.get("content"):
                flipped.append({"role": "user", "content": m["content"]})
        reply = await self.customer.complete(flipped, [])
        return reply.content.strip() or STOP_TOKENS[0]


async def judge_record(judge: Any, record: dict[str, Any], policy: str) -> dict[str, Any]:
    """Ask the judge about one record; its verdict goes to `meta.judge` = {ok, reason}."""
    meta = record.setdefault("meta", {})
    instruction = meta.get("instruction") or "(see the conversation)"
    prompt = [{"role": "system", "content": JUDGE_PROMPT.format(policy=policy, instruction=instruction)},
              {"role": "user", "content": _transcript(record["messages"])}]
    reply = await judge.complete(prompt, [])
    text = reply.content.strip()
    meta["judge"] = {"ok": text.upper().startswith("YES"), "reason": text[:300]}
    return record


async def judge_records(judge: Any, records: list[dict[str, Any]], policy: str, concurrency: int = 8) -> None:
    sem = asyncio.Semaphore(concurrency)

    async def one(r: dict[str, Any]) -> None:
        async with sem:
            await judge_record(judge, r, policy)

    await asyncio.gather(*(one(r) for r in records))


async def synthesize(spec: DomainSpec, conversations: SimulatedToolConversations, *, trials: int = 1,
                     concurrency: int = 8) -> list[dict[str, Any]]:
    """Pipeline (b): every scenario `trials` times; one record per conversation."""
    sem = asyncio.Semaphore(concurrency)

    async def one(s: Scenario) -> dict[str, Any]:
        from backend.agent.llm import LLMUnavailable

        async with sem:
            try:
                return await conversations.play(spec, s)
            except LLMUnavailable as e:  # an endpoint failure: recorded, excluded by the filter
                return {"messages": [], "tools": spec.schemas(),
                        "meta": {"source": "simulated_tools", "domain": spec.domain, "instruction": s.instruction,
                                 "reward": None, "excluded": f"llm_{e.kind}", "error": str(e)}}

    return list(await asyncio.gather(*(one(s) for s in spec.scenarios for _ in range(trials))))
