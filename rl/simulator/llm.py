"""The LLM-played customer, through any OpenAI-compatible endpoint (GPT-4o, a vLLM-served model).

The system prompt holds behaviour rules (one message at a time, never invent facts, reveal details
only when asked, confirm only what matches the current goal, the stop tokens), the persona and the
task's instruction, and - rebuilt every turn - a checklist of the task's sub-goals with the ones the
conversation has already completed ticked (a successful write of that goal seen in the tool
results), so the model does not drift or forget a goal. The conversation is shown with roles
swapped (the agent is the "user"); tool traffic is hidden. A reply that stops right after the
customer said yes, before any change was made, is asked for again once with a correction. Timeouts,
endpoint failures and empty replies are retried a bounded number of times, then raise
`SimulatorError`. Every session records the model and `PROMPT_VERSION`.
"""

from __future__ import annotations

import json
import re
from typing import Any

from backend.agent.llm import LLMUnavailable, OpenAICompatibleModel
from rl.simulator.base import STOP, STOP_TOKENS, TRANSFER, Message, SimulatorError
from rl.tasks.criteria import same_action
from rl.tasks.schema import Task

PROMPT_VERSION = "llm-user-1"
RULES = f"""You are playing a customer contacting an online store's customer-service agent.
Rules:
- Write one short, natural message at a time, as the customer. Never play the agent.
- Use only the facts given in your instructions. If asked for something you were not given, say you do \
not know or do not remember it. Never invent names, numbers, ids, addresses or reasons.
- Reveal details only when the agent asks for them, unless your instructions say you state them up front.
- Say yes to a proposed action only if it matches exactly what you currently want; otherwise explain \
what you want instead.
- Follow your instructions about changing your mind and insisting, in the order given.
- When every goal in the checklist is done, or the agent has clearly said it cannot be done, end with \
{STOP}. Never end right after saying yes: wait until the agent reports the change as done.
- If you are transferred to a human agent, reply with {TRANSFER}.
"""
AFFIRM = re.compile(r"^\W*(yes|yeah|yep|sure|i confirm|confirmed|go ahead|correct)\b", re.I)


class LLMCustomer:
    """`--user llm:MODEL`: the customer is played by a chat model."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout_s: float | None = None, max_retries: int | None = None, temperature: float = 0.0) -> None:
        endpoint = OpenAICompatibleModel.from_settings(model=model, base_url=base_url, api_key=api_key,
                                                       timeout_s=timeout_s, max_retries=max_retries)
        if endpoint is None:
            raise ValueError(f"no endpoint for model {model!r}: pass a base URL or set MUARL_LLM_BASE_URL")
        self.endpoint = endpoint
        self.name = f"llm:{model}"
        self.model = model
        self.prompt_version = PROMPT_VERSION
        self.temperature = temperature

    def session(self, task: Task, seed: int) -> LLMSession:
        return LLMSession(self, task, seed)


def checklist(task: Task, conversation: list[Message]) -> list[tuple[str, bool]]:
    """The task's sub-goals and whether the conversation has completed each one."""
    done_calls = _successful_calls(conversation)
    items = []
    for g in task.script.goals:
        if g.outcome == "abandon":
            continue
        done = g.action is not None and g.outcome == "act" and any(
            same_action(g.action, n, a) or (n == g.action.name and a.get("order_id") == g.order_id)
            for n, a in done_calls)
        items.append((g.say, done))
    return items


def _successful_calls(conversation: list[Message]) -> list[tuple[str, dict[str, Any]]]:
    results = {m.get("tool_call_id"): str(m.get("content", "")) for m in conversation if m.get("role") == "tool"}
    out = []
    for m in conversation:
        for c in m.get("tool_calls") or []:
            res = results.get(c.get("id"))
            if res is None or res.startswith(("Error", "Unknown action")):
                continue
            try:
                args = json.loads(c["function"].get("arguments") or "{}")
            except (ValueError, TypeError):
                continue
            out.append((c["function"]["name"], args if isinstance(args, dict) else {}))
    return out


class LLMSession:
    def __init__(self, sim: LLMCustomer, task: Task, seed: int) -> None:
        self.sim = sim
        self.task = task
        self.seed = seed

    def system_prompt(self, conversation: list[Message]) -> str:
        progress = "\n".join(f"[{'x' if done else ' '}] {say}" for say, done in checklist(self.task, conversation))
        return (f"{RULES}\nYour instructions:\n{self.task.instruction}\n\n"
                f"Checklist of your goals (x = the agent has done it):\n{progress or '(none)'}")

    def view(self, conversation: list[Message]) -> list[Message]:
        """The conversation as the customer model sees it: roles swapped, tool traffic hidden."""
        msgs: list[Message] = [{"role": "system", "content": self.system_prompt(conversation)}]
        for m in conversation:
            if m.get("role") == "assistant" and m.get("content"):
                msgs.append({"role": "user", "content": str(m["content"])})
            elif m.get("role") == "user":
                msgs.append({"role": "assistant", "content": str(m["content"])})
        if len(msgs) == 1:
            msgs.append({"role": "user", "content": "Hi! How can I help you today?"})
        return msgs

    async def _ask(self, msgs: list[Message]) -> str:
        try:
            completion = await self.sim.endpoint.complete(msgs, temperature=self.sim.temperature, seed=self.seed)
        except LLMUnavailable as e:
            raise SimulatorError(str(e), "simulator_timeout" if e.kind == "timeout" else "simulator_error") from None
        return completion.content.strip()

    async def respond(self, conversation: list[Message]) -> tuple[str, bool]:
        msgs = self.view(conversation)
        reply = ""
        for _ in range(self.sim.endpoint.max_retries + 1):
            reply = await self._ask(msgs)
            if reply:
                break
        if not reply:
            raise SimulatorError("the customer model gave an empty reply", "simulator_empty")
        if STOP in reply and self._stops_too_early(conversation):
            msgs.append({"role": "assistant", "content": reply})
            msgs.append({"role": "user", "content": "(Note to the customer: nothing has been changed yet. Do not "
                                                    "end the conversation; reply to the agent again.)"})
            retry = await self._ask(msgs)
            reply = retry or reply
        return reply, any(t in reply for t in STOP_TOKENS)

    def _stops_too_early(self, conversation: list[Message]) -> bool:
        """The customer just said yes and no change has happened since."""
        last_user = max((i for i, m in enumerate(conversation) if m.get("role") == "user"), default=None)
        if last_user is None or not AFFIRM.search(str(conversation[last_user].get("content", ""))):
            return False
        return not _successful_calls(conversation[last_user:]) or all(
            n.startswith(("get_", "find_", "list_", "calculate", "think")) for n, _ in
            _successful_calls(conversation[last_user:]))
