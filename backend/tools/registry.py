"""The one registry of store tools, shared by the chat agent, the MCP server, the RL
environment and data synthesis.

A tool is an async function `(ctx: ToolContext, **arguments) -> str` declared once with
`@tool(kind=...)`. Its JSON schema comes from the type hints and the docstring's `Args:`
section (arrays keep their item types; `Literal` becomes `enum`). `ToolRegistry.call`
is the single entry point: it parses and checks arguments, enforces authorization, runs
the tool inside one transaction (a savepoint when the caller already holds one) and turns
every failure into an `Error: ...` text: nothing raises out of it and nothing is written
when a call fails.
"""

from __future__ import annotations

import inspect
import json
import re
import time
import types
import typing
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

import structlog

from backend.tools.context import AccessDenied, DeniedCall, ToolContext, ToolError

log = structlog.get_logger(__name__)


class ToolKind(StrEnum):
    READ = "read"
    WRITE = "write"
    GENERIC = "generic"
    TERMINAL = "terminal"


ToolFunc = Callable[..., Awaitable[str]]


@dataclass(frozen=True)
class Param:
    name: str
    annotation: Any
    schema: dict[str, Any]
    required: bool


@dataclass(frozen=True)
class Tool:
    """A store tool: what the model sees (name, description, parameters) and how it runs."""

    name: str
    description: str
    kind: ToolKind
    func: ToolFunc
    params: tuple[Param, ...]
    domain: str = "retail"
    # False for tools that never touch a customer's records (generic and catalogue tools).
    customer_data: bool = True
    # True for the identity tools that authenticate a conversation.
    identifies_customer: bool = False

    @property
    def parameters(self) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {p.name: p.schema for p in self.params},
            "required": [p.name for p in self.params if p.required],
        }

    def openai_schema(self) -> dict[str, Any]:
        """The tool as an OpenAI / tau-bench `{"type": "function", "function": ...}` entry."""
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }

    @property
    def upstream_class_name(self) -> str:
        return "".join(part.capitalize() for part in self.name.split("_"))

    @property
    def read_only(self) -> bool:
        return self.kind in (ToolKind.READ, ToolKind.GENERIC)


@dataclass
class ToolResult:
    """The outcome of one call: the text for the model and how it ended."""

    name: str
    output: str
    ok: bool
    terminal: bool = False
    denied: bool = False
    elapsed_ms: float = 0.0
    arguments: dict[str, Any] = field(default_factory=dict)

    @property
    def outcome(self) -> str:
        return "denied" if self.denied else ("ok" if self.ok else "error")


class ToolRegistry:
    """Tools by name (listed in name order, as tau-bench lists them)."""

    def __init__(self, domain: str) -> None:
        self.domain = domain
        self._tools: dict[str, Tool] = {}

    def add(self, t: Tool) -> Tool:
        if t.name in self._tools:
            raise ValueError(f"tool {t.name!r} registered twice")
        self._tools[t.name] = t
        return t

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self):
        return iter(sorted(self._tools.values(), key=lambda t: t.name))

    def __len__(self) -> int:
        return len(self._tools)

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name) if isinstance(name, str) else None

    @property
    def names(self) -> list[str]:
        return sorted(self._tools)

    def openai_schemas(self) -> list[dict[str, Any]]:
        return [t.openai_schema() for t in self]

    def terminal_names(self) -> set[str]:
        return {t.name for t in self if t.kind is ToolKind.TERMINAL}

    async def call(self, ctx: ToolContext, name: str, arguments: Any) -> ToolResult:
        """Run tool `name` with `arguments` (a dict or a JSON object string). Never raises."""
        start = time.perf_counter()
        t = self.get(name)
        if t is None:
            text = f"Unknown action {name}" if ctx.upstream_compat else (
                f"Error: unknown tool {name!r}; available tools: {', '.join(self.names)}"
            )
            return ToolResult(str(name), text, ok=False, elapsed_ms=_ms(start))
        try:
            args = _parse_arguments(arguments)
            args = _check_arguments(t, args, ctx)
        except ToolError as e:
            return ToolResult(t.name, f"Error: {e}", ok=False, elapsed_ms=_ms(start),
                              arguments=arguments if isinstance(arguments, dict) else {})
        try:
            if t.customer_data and not t.identifies_customer:
                ctx.require_authenticated()
            output = await _run_in_transaction(t, ctx, args)
        except AccessDenied as e:
            await _report_denied(ctx, t, args, e.audit_reason)
            return ToolResult(t.name, f"Error: {e}", ok=False, denied=True, elapsed_ms=_ms(start), arguments=args)
        except ToolError as e:
            return ToolResult(t.name, f"Error: {e}", ok=False, elapsed_ms=_ms(start), arguments=args)
        except Exception as e:  # a bug or a database failure: the model still gets text
            log.exception("tool.crashed", tool=t.name)
            return ToolResult(t.name, f"Error: {e}", ok=False, elapsed_ms=_ms(start), arguments=args)
        ok = not output.startswith("Error:")
        return ToolResult(t.name, output, ok=ok, terminal=t.kind is ToolKind.TERMINAL,
                          elapsed_ms=_ms(start), arguments=args)


def _ms(start: float) -> float:
    return (time.perf_counter() - start) * 1000.0


async def _run_in_transaction(t: Tool, ctx: ToolContext, args: dict[str, Any]) -> str:
    """Writes run in one transaction (a savepoint inside the caller's). Reads outside a
    transaction run in autocommit: a single round trip, no BEGIN/COMMIT."""
    conn = ctx.conn
    if conn.in_transaction():
        async with conn.begin_nested():
            return await t.func(ctx, **args)
    if t.read_only:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        try:
            return await t.func(ctx, **args)
        finally:
            await conn.commit()
            await conn.execution_options(isolation_level=conn.default_isolation_level)
    async with conn.begin():
        return await t.func(ctx, **args)


async def _report_denied(ctx: ToolContext, t: Tool, args: dict[str, Any], reason: str) -> None:
    log.warning("tool.denied", tool=t.name, reason=reason, user=ctx.principal.user_id)
    call = DeniedCall(tool=t.name, arguments=args, reason=reason, principal_user_id=ctx.principal.user_id)
    for hook in ctx.on_denied:
        try:
            await hook(call)
        except Exception:
            log.exception("tool.denied_hook_failed", tool=t.name)


def _parse_arguments(arguments: Any) -> dict[str, Any]:
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str | bytes):
        try:
            arguments = json.loads(arguments)
        except (ValueError, RecursionError) as e:
            raise ToolError(f"arguments are not valid JSON: {e}") from None
    if not isinstance(arguments, dict):
        raise ToolError("arguments must be a JSON object")
    return dict(arguments)


def _check_arguments(t: Tool, args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    known = {p.name for p in t.params}
    extra = [k for k in args if k not in known]
    missing = [p.name for p in t.params if p.required and p.name not in args]
    if ctx.upstream_compat:
        # tau-bench calls `Tool.invoke(data=..., **kwargs)`: reproduce Python's TypeError text.
        if extra:
            raise ToolError(f"{t.upstream_class_name}.invoke() got an unexpected keyword argument '{extra[0]}'")
        if missing:
            n = len(missing)
            quoted = [f"'{m}'" for m in missing]
            listed = quoted[0] if n == 1 else (
                f"{quoted[0]} and {quoted[1]}" if n == 2 else ", ".join(quoted[:-1]) + f", and {quoted[-1]}"
            )
            plural = "argument" if n == 1 else "arguments"
            raise ToolError(f"{t.upstream_class_name}.invoke() missing {n} required positional {plural}: {listed}")
    else:
        if extra:
            raise ToolError(f"unexpected argument(s) for {t.name}: {', '.join(map(str, extra))}")
        if missing:
            raise ToolError(f"missing required argument(s) for {t.name}: {', '.join(missing)}")
    for p in t.params:
        if p.name in args:
            _check_value(p.name, args[p.name], p.schema, ctx.max_string_length)
    return args


_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


def _check_value(name: str, value: Any, schema: dict[str, Any], max_len: int) -> None:
    kind = schema.get("type")
    expected = _JSON_TYPES.get(kind or "")
    if expected is not None:
        if isinstance(value, bool) and kind in ("integer", "number"):
            raise ToolError(f"argument '{name}' must be of type {kind}, got boolean")
        if not isinstance(value, expected):
            raise ToolError(f"argument '{name}' must be of type {kind}, got {_json_type(value)}")
    if isinstance(value, str):
        if "\x00" in value:
            raise ToolError(f"argument '{name}' contains a NUL character")
        if len(value) > max_len:
            raise ToolError(f"argument '{name}' is too long ({len(value)} characters, at most {max_len})")
    if kind == "array" and isinstance(value, list):
        if len(value) > 1000:
            raise ToolError(f"argument '{name}' has too many elements ({len(value)}, at most 1000)")
        item_schema = schema.get("items", {})
        for i, item in enumerate(value):
            _check_value(f"{name}[{i}]", item, item_schema, max_len)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    for kind, types_ in _JSON_TYPES.items():
        if isinstance(value, types_) and not (kind == "integer" and isinstance(value, bool)):
            return kind
    return type(value).__name__


# ------------------------------------------------------------------ declaring tools

_ARGS_LINE = re.compile(r"^\s{2,}(\w+)(?:\s*\([^)]*\))?:\s*(.*)$")


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    doc = inspect.cleandoc(doc or "")
    head, _, rest = doc.partition("\nArgs:")
    descriptions: dict[str, str] = {}
    current: str | None = None
    for line in rest.splitlines():
        if re.match(r"^\S", line):  # a new section (Returns:, ...) ends Args
            break
        m = _ARGS_LINE.match(line)
        if m and (len(line) - len(line.lstrip())) <= 4:
            current = m.group(1)
            descriptions[current] = m.group(2).strip()
        elif current and line.strip():
            descriptions[current] += " " + line.strip()
    description = " ".join(head.split())
    return description, descriptions


def schema_for(annotation: Any) -> dict[str, Any]:
    """JSON schema of a parameter type hint (str, int, float, bool, list[...], Literal[...])."""
    origin = typing.get_origin(annotation)
    if annotation is str:
        return {"type": "string"}
    if annotation is bool:
        return {"type": "boolean"}
    if annotation is int:
        return {"type": "integer"}
    if annotation is float:
        return {"type": "number"}
    if origin is Literal:
        values = list(typing.get_args(annotation))
        return {"type": "string", "enum": values}
    if origin is list:
        (item,) = typing.get_args(annotation) or (str,)
        return {"type": "array", "items": schema_for(item)}
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(inner) == 1:
            return schema_for(inner[0])
    raise TypeError(f"unsupported tool parameter type {annotation!r}")


def make_tool(func: ToolFunc, *, kind: ToolKind, domain: str, customer_data: bool,
              identifies_customer: bool) -> Tool:
    sig = inspect.signature(func)
    hints = typing.get_type_hints(func)
    description, arg_docs = _parse_docstring(func.__doc__ or "")
    params = []
    for i, (pname, p) in enumerate(sig.parameters.items()):
        if i == 0:
            continue  # the ToolContext
        schema = schema_for(hints[pname])
        if pname in arg_docs:
            schema = {**schema, "description": arg_docs[pname]}
        params.append(Param(pname, hints[pname], schema, required=p.default is inspect.Parameter.empty))
    return Tool(
        name=func.__name__,
        description=description,
        kind=kind,
        func=func,
        params=tuple(params),
        domain=domain,
        customer_data=customer_data,
        identifies_customer=identifies_customer,
    )


RETAIL = ToolRegistry("retail")


def tool(
    kind: ToolKind | str,
    *,
    registry: ToolRegistry = RETAIL,
    customer_data: bool | None = None,
    identifies_customer: bool = False,
) -> Callable[[ToolFunc], ToolFunc]:
    """Declare a store tool: `@tool(ToolKind.READ)` above `async def name(ctx, ...) -> str`."""
    kind = ToolKind(kind)

    def decorate(func: ToolFunc) -> ToolFunc:
        cd = customer_data if customer_data is not None else kind in (ToolKind.READ, ToolKind.WRITE)
        registry.add(make_tool(func, kind=kind, domain=registry.domain, customer_data=cd,
                               identifies_customer=identifies_customer))
        return func

    return decorate
