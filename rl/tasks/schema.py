"""The task format: one customer with a hidden goal, the gold plan and how success is judged.

A `Task` is versioned JSON (pydantic). It names the store snapshot it runs on, the customer and
the facts they know, a natural-language instruction for LLM simulators, and a structured
`Script` for the scripted simulator: goals in the order the customer raises them, each with what
the customer says, the details they reveal only when asked (and the ones they add late), how a
goal ends (`act`: the agent must do it; `refuse`: the policy forbids it; `info`: the agent must
tell something; `abandon`: the customer changes their mind, see `GoalShift`), and haggling. Gold
actions (tau-style tool calls; only writes change state), required outputs and the criteria for
the task completion rate (TCR) are stored with the task, so every consumer reads one file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

TASK_FORMAT = "muarl.tasks"
TASK_FORMAT_VERSION = 1

GoalKind = Literal[
    "cancel", "modify_address", "modify_payment", "modify_items", "user_address",
    "return", "exchange", "info", "other",
]
Outcome = Literal["act", "refuse", "info", "abandon"]
# Slots the customer can be asked about, and what words in the agent's message ask for them.
Slot = Literal["order_id", "items", "new_items", "reason", "payment", "address", "product"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Action(_Model):
    """One tool call (tau's `{name, kwargs}`, OpenAI's `{name, arguments}`)."""

    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)

    def key(self) -> str:
        return self.name + json.dumps(self.arguments, sort_keys=True)


class GoalShift(_Model):
    """The customer drops this goal for the next one when `trigger` fires, saying `say`."""

    trigger: Literal["confirmation", "agent_turn"] = "confirmation"
    after_turns: int = 1  # for `agent_turn`: shift after this many agent messages on the goal
    say: str


class Haggle(_Model):
    """The customer pushes for a forbidden request: one demand per refusal, then gives in."""

    demands: list[str]
    then: Literal["accept", "give_up"] = "accept"  # accept: the next goal is the fallback
    say_after: str


class Goal(_Model):
    id: str
    kind: GoalKind
    outcome: Outcome
    say: str  # how the customer states the goal
    details: dict[str, str] = Field(default_factory=dict)  # slot -> answer when asked
    upfront: list[str] = Field(default_factory=list)  # slots already mentioned in `say`
    late: str | None = None  # added only when the agent asks whether the list is complete
    action: Action | None = None  # the write this goal asks for (refuse: the forbidden call)
    stated_action: Action | None = None  # what acting on the first statement alone would do
    lookups: list[Action] = Field(default_factory=list)  # reads a careful agent makes first
    order_id: str | None = None
    confirm_terms: list[str] = Field(default_factory=list)  # a proposal must mention these
    answer: list[str] = Field(default_factory=list)  # info goals: what the agent must say
    explain: str = ""  # refuse goals: the policy reason (the oracle says it)
    shift: GoalShift | None = None
    haggle: Haggle | None = None


class Customer(_Model):
    user_id: str
    first_name: str
    last_name: str
    email: str
    zip: str
    identify_by: Literal["email", "name_zip"] = "email"
    wrong_email: str | None = None  # identity mistake: offered first, corrected when not found
    knows_email: bool = True


class Script(_Model):
    opening: str
    goals: list[Goal]
    closing: str = "Thanks, that's all I needed."


class Criterion(_Model):
    """One checkable piece of the task, for TCR."""

    id: str
    kind: Literal["action", "no_action", "output", "authenticated"]
    description: str
    action: Action | None = None
    output: str | None = None
    # no_action: "target" = no such call on the same order/user at all; "exact" = not this very call
    match: Literal["target", "exact"] = "target"


class Task(_Model):
    version: Literal[1] = TASK_FORMAT_VERSION
    id: str
    domain: str = "retail"
    snapshot: str  # "tau-retail" or "synthetic:<seed>:<users>"
    split: str | None = None
    customer: Customer
    instruction: str
    script: Script
    gold_actions: list[Action]
    outputs: list[str] = Field(default_factory=list)
    criteria: list[Criterion] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    source: str = "generated"

    @property
    def gold_writes(self) -> list[Action]:
        from rl.tasks.tools_meta import WRITE_TOOLS

        return [a for a in self.gold_actions if a.name in WRITE_TOOLS]


class TaskFile(_Model):
    format: Literal["muarl.tasks"] = TASK_FORMAT
    version: Literal[1] = TASK_FORMAT_VERSION
    meta: dict[str, Any] = Field(default_factory=dict)
    tasks: list[Task]


class TaskFileError(ValueError):
    """A task file that cannot be read: the message says where and why."""


def save_tasks(path: Path | str, tasks: list[Task], meta: dict[str, Any] | None = None) -> None:
    """Write a task file atomically (a temporary file renamed into place)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(TaskFile(meta=meta or {}, tasks=tasks).model_dump_json(indent=1, exclude_none=True))
    tmp.replace(path)


def load_tasks(path: Path | str) -> list[Task]:
    """Read a task file (the versioned object, or JSON Lines of tasks)."""
    path = Path(path)
    if not path.is_file():
        raise TaskFileError(f"task file {path} not found")
    text = path.read_text()
    try:
        try:
            whole = json.loads(text)
        except ValueError:
            whole = None
        if isinstance(whole, dict) and "tasks" in whole:
            return TaskFile.model_validate(whole).tasks
        if isinstance(whole, dict):
            return [Task.model_validate(whole)]
        return [Task.model_validate_json(line) for line in text.splitlines() if line.strip()]
    except ValueError as e:
        raise TaskFileError(f"{path}: not a muarl task file: {e}") from None
