"""A fixed, store-free agent that probes a customer session through every path of its script.

It asks for identity, authenticates, then per turn picks one move from a fixed cycle (questions
about each fact, a completeness check, a refusal, a right or a wrong proposal, a fake successful
write of the current goal, the answer of an information goal, an open question), so one run walks
through reveals, confirmations, shifts, haggling, late details and the stop rules. It reads only the
task, never the customer's state, so two customers playing the same script can be compared.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from rl.simulator.base import SimulatorError
from rl.tasks.phrasing import KIND_VERB, order_ref
from rl.tasks.schema import Goal, Task

QUESTIONS = [
    "Which order is it, and what is the reason?",
    "Which items would you like to change, and which payment method should I use?",
    "What is the new address?",
    "Is that all the items you want? Please tell me if there are any others.",
    "I'm sorry, but I cannot do that: it is not allowed.",
    "What is your phone number?",
    "Is there anything else I can help you with?",
    "Okay, one moment please.",
]


def _proposal(g: Goal) -> str:
    terms = " ".join(t if not t.startswith("#") else f"order {t}" for t in g.confirm_terms)
    reason = f" with the reason '{g.action.arguments['reason']}'" if g.action and "reason" in g.action.arguments \
        else ""
    return f"To confirm, I will {KIND_VERB.get(g.kind, g.kind)} {terms}{reason}. Do you confirm (yes/no)?"


def probe(session: Any, task: Task, turns: int = 24, observe: Callable[[Any], None] | None = None) -> list[str]:
    """The customer's replies to the probe (a raised `SimulatorError` is recorded by its cause);
    `observe(session)` is called after each reply."""
    msgs: list[dict[str, Any]] = [{"role": "system", "content": "policy"}]
    out: list[str] = []
    n = 0

    def say(text: str) -> bool:
        msgs.append({"role": "assistant", "content": text})
        try:
            reply, done = session.reply(msgs)
        except SimulatorError as e:
            out.append(f"<{e.cause}>")
            return True
        msgs.append({"role": "user", "content": reply})
        out.append(reply)
        if observe:
            observe(session)
        return done

    def tool(name: str, args: dict[str, Any], result: str) -> None:
        nonlocal n
        n += 1
        msgs.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{n}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        msgs.append({"role": "tool", "tool_call_id": f"c{n}", "name": name, "content": result})

    reply, _ = session.reply(msgs)
    msgs.append({"role": "user", "content": reply})
    out.append(reply)
    if say("Could you give me your email, or your first name, last name and zip code?"):
        return out
    c = task.customer
    if c.wrong_email:
        tool("find_user_id_by_email", {"email": c.wrong_email}, "Error: user not found")
        if say("I couldn't find an account with that email. Could you double-check it?"):
            return out
    tool("find_user_id_by_email", {"email": c.email}, c.user_id)
    goals = task.script.goals
    for turn in range(turns):
        # the goal the probe works on: the first one not written yet, by the turn count
        g = goals[min(turn // 6, len(goals) - 1)]
        move = turn % 6
        if move == 0:
            text = QUESTIONS[(turn // 6 + turn) % len(QUESTIONS)]
        elif move == 1:
            text = QUESTIONS[(turn + 3) % len(QUESTIONS)]
        elif move == 2:
            text = _proposal(g) if turn % 4 else _proposal(g).replace("Do you confirm", "Shall I proceed")
        elif move == 3:
            if g.outcome == "info":
                text = "The answer is " + ", ".join(g.answer) + "."
            elif g.outcome == "refuse":
                text = f"I'm sorry, but I can't do that for order {order_ref(g.order_id or '')}: {g.explain}."
            else:
                text = QUESTIONS[turn % len(QUESTIONS)]
        elif move == 4:
            if g.action is not None and g.outcome == "act":
                tool(g.action.name, g.action.arguments, json.dumps({"status": "ok"}))
            text = "Done. Is there anything else I can help you with?"
        else:
            text = QUESTIONS[(turn * 5) % len(QUESTIONS)]
        if say(text):
            return out
    return out


def decision_state(s: Any) -> tuple:
    """What a scripted session has decided so far (its words aside)."""
    return (s.k, dict(s.status), set(s.revealed), s.finished, s.confirmed, s.haggled, s.late_given, s.stuck)


def decisions(session: Any, task: Task) -> list[tuple]:
    """The session's `decision_state` after each reply to the probe."""
    out: list[tuple] = []
    probe(session, task, observe=lambda s: out.append(decision_state(s)))
    return out
