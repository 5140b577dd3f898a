"""The character-level automaton of a hermes tool-call body: after `<tool_call>` exactly the layout
`render_tool_call` writes (`\\n{"name": "NAME", "arguments": {...}}\\n`), a tool name from the
offered list, only that tool's parameter names, each at most once, every required one before the
closing brace, values of the declared JSON type: strings of at most `max_string` characters without
quotes, backslashes, control characters or U+FFFD (a token holding part of a UTF-8 character); an
`enum` spelled exactly; arrays of strings; JSON numbers; booleans. A parameter in `ref_params`
takes one reference token of its kind (`order_id` -> `<order_N>`), one in `copy_params` a copied
string (rl/chat/copy_spans.py), one in `name_params` too a person's name (not empty, each word
capitalised or a name reference: a name is never "" or "email"), and with `spaced_values` a string
value starts with one space."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from rl.chat.call_states import (
    DEAD,
    END,
    ArgumentName,
    Arguments,
    ArgumentValue,
    Array,
    CopiedString,
    EnumString,
    FreeString,
    Literal,
    Number,
    NumberPhase,
    Reference,
    State,
    ToolName,
)

_STRING_BANNED = frozenset('"\\')
NAME_REF = "<name_"  # how a name reference begins (rl/chat/views.py REF_KINDS)
_NUMBER_ENDS = frozenset({NumberPhase.ZERO, NumberPhase.INT, NumberPhase.FRAC, NumberPhase.EXPD})
_KINDS = ("string", "array", "number", "integer", "boolean")


def number_step(phase: NumberPhase, ch: str, integer: bool) -> NumberPhase | None:
    """JSON number syntax one character at a time (integers: no fraction or exponent). Returns the
    next phase, or None when `ch` cannot continue the number."""
    P = NumberPhase
    digit = ch.isascii() and ch.isdigit()
    if phase is P.START or phase is P.SIGN:
        if ch == "-" and phase is P.START:
            return P.SIGN
        return P.ZERO if ch == "0" else P.INT if digit else None
    if phase in (P.ZERO, P.INT) and not integer and ch == ".":
        return P.DOT
    if phase in (P.ZERO, P.INT, P.FRAC) and not integer and ch in "eE":
        return P.EXP
    if phase is P.INT and digit:
        return P.INT
    if phase in (P.DOT, P.FRAC) and digit:
        return P.FRAC
    if phase is P.EXP and ch in "+-":
        return P.EXPSIGN
    if phase in (P.EXP, P.EXPSIGN, P.EXPD) and digit:
        return P.EXPD
    return None


@dataclass(frozen=True)
class Schema:
    """What the automaton needs of one tool: parameter kinds, required ones and enums."""

    name: str
    kinds: dict[str, str]
    enums: dict[str, tuple[str, ...]]
    required: frozenset[str]

    @classmethod
    def from_tool(cls, tool: dict[str, Any]) -> Schema:
        """From an OpenAI tool (full JSON schema, or a compact `{"param": "type"}` one)."""
        fn = tool.get("function", tool)
        params = fn.get("parameters") or {}
        props = params.get("properties")
        if props is None and isinstance(params, dict):  # a compact schema: {"param": "type"}
            props = {k: {"type": "array" if str(v).startswith("array") else v} for k, v in params.items()}
        kinds: dict[str, str] = {}
        enums: dict[str, tuple[str, ...]] = {}
        for key, spec in (props or {}).items():
            kind = spec.get("type", "string") if isinstance(spec, dict) else "string"
            kinds[key] = kind if kind in _KINDS else "string"
            enum = spec.get("enum") if isinstance(spec, dict) else None
            if enum and all(isinstance(e, str) for e in enum):
                enums[key] = tuple(enum)
        return cls(fn["name"], kinds, enums, frozenset(params.get("required") or []) & frozenset(kinds))


class CallAutomaton:
    """The automaton over the calls of one tool list (see the module docstring)."""

    def __init__(self, schemas: Iterable[Schema], *, ref_params: dict[str, str] | None = None,
                 copy_params: Iterable[str] = (), max_string: int = 64, spaced_values: bool = False,
                 name_params: Iterable[str] = ()) -> None:
        self.schemas = {s.name: s for s in schemas}
        self.ref_params = dict(ref_params or {})  # parameter -> reference kind its value must be
        self.copy_params = frozenset(copy_params)  # free-text parameters copied from the customer's words
        self.name_params = frozenset(name_params) & self.copy_params  # of which a person's name
        self.max_string = max_string
        self.spaced_values = spaced_values  # free-text string values start with one space

    def restricted(self, names: Iterable[str]) -> CallAutomaton:
        """The same automaton over the tools in `names` only."""
        keep = frozenset(names)
        return CallAutomaton((s for n, s in self.schemas.items() if n in keep), ref_params=self.ref_params,
                             copy_params=self.copy_params, max_string=self.max_string,
                             spaced_values=self.spaced_values, name_params=self.name_params)

    def start(self) -> State:
        """The state right after `<tool_call>`."""
        return Literal('\n{"name": "', ToolName(""))

    def consume(self, state: State, text: str) -> State:
        for ch in text:
            state = self.step(state, ch)
            if state is DEAD:
                return DEAD
        return state

    def step(self, state: State, ch: str) -> State:  # noqa: C901 - one branch per kind of state
        if isinstance(state, Literal):
            if ch != state.rest[0]:
                return DEAD
            return Literal(state.rest[1:], state.then) if len(state.rest) > 1 else state.then
        if isinstance(state, CopiedString) and state.name:
            return self._name_step(state, ch)
        if isinstance(state, FreeString | CopiedString):
            if ch == '"':
                return state.after
            if self._breaks_string(state, ch):
                return DEAD
            return type(state)(state.length + 1, state.after)
        if isinstance(state, EnumString):
            if ch == '"':
                return state.after if state.prefix in state.options else DEAD
            if ch in _STRING_BANNED or ch < " " or ch == "\ufffd":
                return DEAD
            longer = state.prefix + ch
            return EnumString(state.options, longer, state.after) \
                if any(e.startswith(longer) for e in state.options) else DEAD
        if isinstance(state, ToolName):
            if ch == '"':
                return Literal(', "arguments": {', Arguments(state.prefix, frozenset(), True)) \
                    if state.prefix in self.schemas else DEAD
            longer = state.prefix + ch
            return ToolName(longer) if any(n.startswith(longer) for n in self.schemas) else DEAD
        if isinstance(state, Arguments):
            schema = self.schemas[state.tool]
            if ch == "}":
                return Literal("}\n", END) if schema.required <= state.used else DEAD
            left = set(schema.kinds) - state.used
            if state.first and ch == '"' and left:
                return ArgumentName(state.tool, state.used, "")
            if not state.first and ch == "," and left:
                return Literal(' "', ArgumentName(state.tool, state.used, ""))
            return DEAD
        if isinstance(state, ArgumentName):
            free = [k for k in self.schemas[state.tool].kinds if k not in state.used]
            if ch == '"':
                return Literal(": ", ArgumentValue(state.tool, state.used | {state.prefix}, state.prefix)) \
                    if state.prefix in free else DEAD
            longer = state.prefix + ch
            return ArgumentName(state.tool, state.used, longer) if any(k.startswith(longer) for k in free) else DEAD
        if isinstance(state, ArgumentValue):
            return self._value_start(self.schemas[state.tool], state.key, ch,
                                     Arguments(state.tool, state.used, False))
        if isinstance(state, Reference):  # `<kind_` digits `>` then the closing quote
            if state.head:
                return Reference(state.head[1:], False, state.after) if ch == state.head[0] else DEAD
            if ch.isascii() and ch.isdigit():
                return Reference("", True, state.after)
            return Literal('"', state.after) if ch == ">" and state.digits else DEAD
        if isinstance(state, Array):
            if ch == "]":
                return state.after
            item = Array(state.after, False, state.ref)
            string: State = Reference(f"<{state.ref}_", False, item) if state.ref else FreeString(0, item)
            if state.first and ch == '"':
                return string
            if not state.first and ch == ",":
                return Literal(' "', string)
            return DEAD
        if isinstance(state, Number):
            nxt = number_step(state.phase, ch, state.integer)
            if nxt is not None:
                return Number(nxt, state.integer, state.after)
            if state.phase in _NUMBER_ENDS:
                return self.step(state.after, ch)  # the number ended: the character belongs to what follows
            return DEAD
        return DEAD  # END, DEAD

    def _breaks_string(self, state: FreeString | CopiedString, ch: str) -> bool:
        """Whether `ch` may not be the next character of a string value: JSON needs it escaped,
        it is U+FFFD (a token holding part of a UTF-8 character), or the value is at its longest."""
        return ch in _STRING_BANNED or ch < " " or ch == "\ufffd" or state.length >= self.max_string

    def _name_step(self, state: CopiedString, ch: str) -> State:
        """A person's name: words that start with a capital or are a name reference (`<name_N>`,
        not an order's or a zip's), one space apart."""
        if state.rest:
            return CopiedString(state.length + 1, state.after, True, False, state.rest[1:]) \
                if ch == state.rest[0] else DEAD
        if ch == '"':
            return state.after if state.length and not state.word_start else DEAD
        if self._breaks_string(state, ch):
            return DEAD
        if ch == " ":
            return DEAD if state.word_start else CopiedString(state.length + 1, state.after, True, True)
        if state.word_start and ch == "<":
            return CopiedString(state.length + 1, state.after, True, False, NAME_REF[1:])
        if state.word_start and not ch.isupper():
            return DEAD
        return CopiedString(state.length + 1, state.after, True, False)

    def _value_start(self, schema: Schema, key: str, ch: str, after: State) -> State:
        kind = schema.kinds[key]
        ref = self.ref_params.get(key)
        if kind == "string":
            if ch != '"':
                return DEAD
            if ref:
                return Reference(f"<{ref}_", False, after)
            enum = schema.enums.get(key)
            value: State = EnumString(enum, "", after) if enum else (
                CopiedString(0, after, key in self.name_params) if key in self.copy_params else FreeString(0, after))
            return Literal(" ", value) if self.spaced_values else value
        if kind == "array":
            return Array(after, True, ref) if ch == "[" else DEAD
        if kind in ("number", "integer"):
            phase = number_step(NumberPhase.START, ch, kind == "integer")
            return Number(phase, kind == "integer", after) if phase else DEAD
        if kind == "boolean":
            for word in ("true", "false"):
                if ch == word[0]:
                    return Literal(word[1:], after)
            return DEAD
        return DEAD
