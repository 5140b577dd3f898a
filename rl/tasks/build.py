"""Turning a customer and their goals into a complete `Task`.

The gold plan is derived from the goals, never written by hand: identify the customer, then per
goal the lookups a careful agent makes and, for goals the agent must carry out, the write. Outputs
are the answers of information goals. Criteria (for TCR) name each write that must happen, each
forbidden or abandoned write that must not, each answer that must be said, and the authentication.
The instruction for LLM simulators is written from the same goals.
"""

from __future__ import annotations

from rl.tasks.phrasing import KIND_VERB
from rl.tasks.schema import Action, Criterion, Customer, Goal, Script, Task


def identity_action(c: Customer) -> Action:
    if c.identify_by == "email":
        return Action(name="find_user_id_by_email", arguments={"email": c.email})
    return Action(name="find_user_id_by_name_zip",
                  arguments={"first_name": c.first_name, "last_name": c.last_name, "zip": c.zip})


def gold_plan(customer: Customer, goals: list[Goal]) -> list[Action]:
    plan = [identity_action(customer)]
    for g in goals:
        plan.extend(g.lookups)
        if g.outcome == "act" and g.action is not None:
            plan.append(g.action)
    return plan


def criteria_for(goals: list[Goal]) -> list[Criterion]:
    out = [Criterion(id="authenticated", kind="authenticated", description="the customer was authenticated")]
    done = {(g.action.name, _target(g.action)) for g in goals if g.outcome == "act" and g.action is not None}
    for g in goals:
        if g.outcome == "act" and g.action is not None:
            out.append(Criterion(id=f"{g.id}:done", kind="action", action=g.action,
                                 description=f"{g.action.name} for {g.order_id or g.kind} as asked"))
        elif g.outcome in ("refuse", "abandon") and g.action is not None:
            why = "forbidden by policy" if g.outcome == "refuse" else "the customer changed their mind"
            exact = (g.action.name, _target(g.action)) in done
            out.append(Criterion(id=f"{g.id}:not_done", kind="no_action", action=g.action,
                                 match="exact" if exact else "target",
                                 description=f"no {g.action.name} on {g.order_id or g.kind} ({why})"))
        for i, a in enumerate(g.answer):
            out.append(Criterion(id=f"{g.id}:said:{i}", kind="output", output=a, description=f"told the customer {a}"))
    return out


def _target(a: Action) -> object:
    return a.arguments.get("order_id", a.arguments.get("user_id"))


def instruction_for(customer: Customer, goals: list[Goal]) -> str:
    """The hidden goal in words, for an LLM-played customer."""
    who = f"You are {customer.first_name} {customer.last_name}, zip code {customer.zip}"
    who += f", email {customer.email}." if customer.knows_email else ". You do not remember your email address."
    if customer.wrong_email:
        who += f" At first you misremember your email as {customer.wrong_email}; correct it if it is not found."
    parts = [who]
    for n, g in enumerate(goals):
        lead = "First" if n == 0 else "Then"
        text = f"{lead}: {g.say}"
        facts = [v for k, v in g.details.items()]
        if facts:
            text += " If asked: " + " ".join(facts)
        if g.late:
            text += f" Only when asked whether that is everything, add: {g.late}"
        if g.shift:
            when = ("the agent asks you to confirm this request" if g.shift.trigger == "confirmation"
                    else "the agent replies")
            text += f" When {when}, change your mind and say: {g.shift.say}"
        if g.outcome == "refuse" and g.haggle:
            text += (f" The agent may refuse. Insist up to {len(g.haggle.demands)} time(s) "
                     f"({' / '.join(g.haggle.demands)}), then say: {g.haggle.say_after}")
        elif g.outcome == "refuse":
            text += " If the agent says this is not possible, accept it."
        if g.outcome == "info":
            text += " You want the agent to tell you the answer."
        parts.append(text)
    parts.append("Confirm an action only if it is exactly what you currently want. "
                 "When everything is settled, end the conversation.")
    return " ".join(parts)


def tags_for(goals: list[Goal], extra: list[str]) -> list[str]:
    tags = set(extra)
    tags.update(f"kind:{g.kind}" for g in goals if g.outcome != "abandon")
    if any(g.outcome == "refuse" for g in goals):
        tags.add("refusal")
    if any(g.shift for g in goals):
        tags.add("goal_shift")
    if any(g.haggle for g in goals):
        tags.add("haggle")
    if any(g.late for g in goals):
        tags.add("late_info")
    if sum(g.outcome != "abandon" and not g.haggle for g in goals) > 1:
        tags.add("multi_intent")
    if any(g.outcome == "info" for g in goals):
        tags.add("info")
    return sorted(tags)


def opening_for(goals: list[Goal]) -> str:
    return "Hi! " + goals[0].say


def assemble(*, task_id: str, snapshot: str, customer: Customer, goals: list[Goal], split: str | None,
             tags: list[str], source: str = "generated", instruction: str | None = None,
             gold: list[Action] | None = None, outputs: list[str] | None = None) -> Task:
    return Task(
        id=task_id, snapshot=snapshot, split=split, customer=customer,
        instruction=instruction or instruction_for(customer, goals),
        script=Script(opening=opening_for(goals), goals=goals),
        gold_actions=gold if gold is not None else gold_plan(customer, goals),
        outputs=outputs if outputs is not None else [a for g in goals for a in g.answer],
        criteria=criteria_for(goals), tags=tags_for(goals, tags), source=source,
    )


def describe_goal(g: Goal) -> str:
    return KIND_VERB.get(g.kind, g.kind)
