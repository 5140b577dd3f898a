"""The states of the tool-call automaton (rl/chat/call_automaton.py): where a call body is, as small
frozen records (hashable, so token masks can be cached per state). A state that waits for a value
holds `after`, the state that follows once the value is written."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Final(Enum):
    DEAD = "dead"  # nothing can continue the call: the text so far is not a call the store can run
    END = "end"  # the body is complete: only `</tool_call>` may follow


DEAD = Final.DEAD
END = Final.END


class NumberPhase(Enum):
    """Where a JSON number is, -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?"""

    START = "start"
    SIGN = "sign"
    ZERO = "zero"
    INT = "int"
    DOT = "dot"
    FRAC = "frac"
    EXP = "exp"
    EXPSIGN = "expsign"
    EXPD = "expd"


@dataclass(frozen=True, slots=True)
class Literal:
    """Fixed text still to write (`rest`), then `then`."""

    rest: str
    then: State


@dataclass(frozen=True, slots=True)
class ToolName:
    """Inside the tool's name, `prefix` written so far."""

    prefix: str


@dataclass(frozen=True, slots=True)
class Arguments:
    """Between arguments of `tool`: `used` are written, `first` while none is."""

    tool: str
    used: frozenset[str]
    first: bool


@dataclass(frozen=True, slots=True)
class ArgumentName:
    """Inside a parameter name of `tool`, `prefix` written so far."""

    tool: str
    used: frozenset[str]
    prefix: str


@dataclass(frozen=True, slots=True)
class ArgumentValue:
    """At the first character of parameter `key`'s value (`used` includes `key`)."""

    tool: str
    used: frozenset[str]
    key: str


@dataclass(frozen=True, slots=True)
class EnumString:
    """Inside a string that must be one of `options`, `prefix` written so far."""

    options: tuple[str, ...]
    prefix: str
    after: State


@dataclass(frozen=True, slots=True)
class FreeString:
    """Inside a free-text string of `length` characters so far."""

    length: int
    after: State


@dataclass(frozen=True, slots=True)
class CopiedString:
    """Inside a free-text string copied from the customer's words (its span is checked per row by
    `ToolCallGrammar.copy_mask`), `length` characters so far. A person's `name` (`name_params`) is
    not empty and each of its words starts with a capital letter or is a name reference
    (`word_start`: the next character starts a word; `rest`: what a begun `<name_` still needs)."""

    length: int
    after: State
    name: bool = False
    word_start: bool = True
    rest: str = ""


@dataclass(frozen=True, slots=True)
class Reference:
    """Inside a reference token `<kind_N>`: `head` is the `<kind_` still to write, `digits` once
    a digit of N is written."""

    head: str
    digits: bool
    after: State


@dataclass(frozen=True, slots=True)
class Array:
    """Inside an array of strings (of references of kind `ref`, when set)."""

    after: State
    first: bool
    ref: str | None


@dataclass(frozen=True, slots=True)
class Number:
    """Inside a JSON number (an integer when `integer`)."""

    phase: NumberPhase
    integer: bool
    after: State


State = (Final | Literal | ToolName | Arguments | ArgumentName | ArgumentValue | EnumString | FreeString
         | CopiedString | Reference | Array | Number)
