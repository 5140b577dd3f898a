"""Which store writes of an episode had the customer's explicit yes.

The store policy every agent is given says a change needs the customer's explicit confirmation (yes)
first. The final database cannot show whether the agent asked: an agent that proposes the wrong
change, hears "no, send it to 4107 Hillcrest Road instead" and writes that address at once reaches
the gold state without a yes. Customers that report their consent (the scripted ones set `agreed`
after each reply: rl/simulator/scripted.py) let the episode hold every write to the rule: a write
that took effect needs the customer's latest reply to be a consenting one, given to a proposal of
that very change (the customer's `agreed_to`: the write tool, on its order), and no earlier write
that took effect to have used it (one yes, one change). A yes to a cancellation does not let a
return through: the agent that proposed the wrong change and wrote another one never asked. A write
the store rejected changed nothing and uses no consent. Customers that do not report it (an LLM
customer, the static-query customer that answers nothing) leave the rule unchecked, as tau-bench's
reward does.
"""

from __future__ import annotations

import json
from typing import Any

from rl.simulator.base import Consent


class ConsentLedger:
    """Follows one episode: the customer's replies and the writes, in order."""

    def __init__(self, write_tools: set[str]) -> None:
        self.write_tools = write_tools
        self.checked = True  # False once a reply came from a customer that does not report consent
        self.standing = False  # a consenting reply no write has used yet
        self.covers: Consent | None = None  # the change it was given to (None: not said, so any)
        self.unconfirmed: list[str] = []  # writes that took effect without one ("name {args}")

    def customer_replied(self, session: object) -> None:
        agreed = getattr(session, "agreed", None)
        if agreed is None:
            self.checked = False
            return
        self.standing = bool(agreed)
        self.covers = getattr(session, "agreed_to", None) if agreed else None

    def tool_ran(self, name: str, arguments: Any, took_effect: bool) -> None:
        if name not in self.write_tools or not took_effect:
            return
        if not self.standing:
            self.unconfirmed.append(f"{name} {_brief(arguments)}")
        elif self.covers is not None and not self.covers.covers(name, _args(arguments)):
            given = f"{self.covers.tool or 'a request no write serves'}" + (
                f" on {self.covers.order_id}" if self.covers.order_id else "")
            self.unconfirmed.append(f"{name} {_brief(arguments)} (the yes was to {given})")
        self.standing = False

    @property
    def violations(self) -> list[str] | None:
        """The unconfirmed writes, or None when the customer does not report consent."""
        return list(self.unconfirmed) if self.checked else None


def _args(arguments: Any) -> dict[str, Any]:
    if isinstance(arguments, dict):
        return arguments
    try:
        parsed = json.loads(arguments)
    except (TypeError, ValueError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _brief(arguments: Any) -> str:
    text = arguments if isinstance(arguments, str) else json.dumps(arguments, sort_keys=True)
    return text if len(text) <= 200 else text[:197] + "..."
