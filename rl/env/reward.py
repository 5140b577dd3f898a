"""The episode reward: final store state against the gold state, plus required outputs (tau1).

Reward is 1 iff (a) every record the episode changed or the gold replay changed is equal, by
value, in both final states (a record only one side touched is compared against the snapshot's
initial record), and (b) each required output appears in some agent message, compared the tau1
way: `output.lower() in message.lower().replace(",", "")`, and (c) no write took effect without the
customer's explicit yes, where the customer reports its consent (rl/env/consent.py; tau1 does not
check the policy's confirmation rule, so an agent writing straight after "no, do this instead"
passed there). Only touched records are read, so scoring costs O(changes). `RewardBreakdown` says
why an episode failed: the state match, each output found or not, every differing record as
`{"got": ..., "expected": ...}`, and each unconfirmed write.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from rl.env.changes import KINDS, Changes
from rl.env.gold import GoldSpec, GoldStateCache
from rl.env.sandbox import Sandbox


class RewardBreakdown(BaseModel):
    """The reward of one episode and what it was made of."""

    reward: float
    state_match: bool
    outputs: dict[str, bool] = Field(default_factory=dict)
    # {kind: {key: {"got": record or None, "expected": record or None}}}
    differing: dict[str, dict[str, dict[str, Any]]] = Field(default_factory=dict)
    # records the agent changed that the gold leaves untouched ("orders #W1"): what the safety gate
    # reads (rl/eval/gates.py), apart from what the agent failed to do
    unexpected: list[str] = Field(default_factory=list)
    # writes that took effect without the customer's yes; None: the customer does not report consent
    unconfirmed_writes: list[str] | None = None

    @property
    def outputs_match(self) -> bool:
        return all(self.outputs.values())

    def explain(self) -> str:
        """One line per reason the reward is 0 (empty when it is 1)."""
        lines = [f"{kind} {key} differs from the gold state" for kind, recs in self.differing.items()
                 for key in recs]
        lines += [f"required output {out!r} was never said" for out, found in self.outputs.items() if not found]
        lines += [f"write without the customer's yes: {w}" for w in self.unconfirmed_writes or []]
        return "\n".join(lines)


def canonical(value: Any) -> Any:
    """A hashable, order-insensitive form of a record: equal by value iff the records are
    (numbers by value, booleans distinct from numbers, dict key order ignored, list order kept)."""
    if isinstance(value, dict):
        return ("{}", tuple(sorted((str(k), canonical(v)) for k, v in value.items())))
    if isinstance(value, list | tuple):
        return ("[]", tuple(canonical(v) for v in value))
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        return ("num", float(value))
    return value


def compare_changes(got: Changes, expected: Changes, initial: dict[str, dict[str, Any]]
                    ) -> dict[str, dict[str, dict[str, Any]]]:
    """Records whose final value differs between the two change sets."""
    differing: dict[str, dict[str, dict[str, Any]]] = {}
    for kind in KINDS:
        g, e, base = got.get(kind, {}), expected.get(kind, {}), initial[kind]
        for key in dict.fromkeys([*g, *e]):
            gv = g[key] if key in g else base.get(key)
            ev = e[key] if key in e else base.get(key)
            if canonical(gv) != canonical(ev):
                differing.setdefault(kind, {})[key] = {"got": gv, "expected": ev}
    return differing


def outputs_found(outputs: list[str], agent_messages: list[str]) -> dict[str, bool]:
    """For each required output, whether some agent message contains it (tau1 rule)."""
    said = [m.lower().replace(",", "") for m in agent_messages if isinstance(m, str)]
    return {out: any(out.lower() in m for m in said) for out in outputs}


def reward_from(got: Changes, expected: Changes, initial: dict[str, dict[str, Any]],
                outputs: list[str], agent_messages: list[str],
                unconfirmed_writes: list[str] | None = None) -> RewardBreakdown:
    differing = compare_changes(got, expected, initial)
    found = outputs_found(outputs, agent_messages)
    state_match = not differing
    ok = state_match and all(found.values()) and not unconfirmed_writes
    unexpected = [f"{kind} {key}" for kind, recs in differing.items() for key in recs
                  if key in got.get(kind, {}) and key not in expected.get(kind, {})]
    return RewardBreakdown(reward=1.0 if ok else 0.0, state_match=state_match, outputs=found,
                           differing=differing, unexpected=unexpected, unconfirmed_writes=unconfirmed_writes)


async def score(sandbox: Sandbox, gold: GoldSpec, agent_messages: list[str], *, cache: GoldStateCache,
                upstream_compat: bool = False, unconfirmed_writes: list[str] | None = None) -> RewardBreakdown:
    """Score the episode that ran on `sandbox` against `gold` (the gold state comes from `cache`,
    replayed on a fresh copy of the same snapshot the first time); `unconfirmed_writes` are the
    episode's writes without the customer's yes (None: not known)."""
    expected = await cache.get(gold, sandbox.snapshot, upstream_compat=upstream_compat, pool=sandbox.pool)
    got = await sandbox.changed_records()
    return reward_from(got, expected, sandbox.snapshot.initial, gold.outputs, agent_messages, unconfirmed_writes)
