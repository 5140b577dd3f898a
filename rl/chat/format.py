"""Qwen3 non-thinking chat format with hermes-style tool calls, rendered and parsed as plain text.

This is the exact text a Qwen3 chat template produces for OpenAI-style messages: turns are
`<|im_start|>{role}\n{content}<|im_end|>\n`; tools are listed in the system turn inside
`<tools></tools>` (one JSON schema per line); an assistant tool call is
`<tool_call>\n{"name": ..., "arguments": {...}}\n</tool_call>`; tool results go back in one `user`
turn, each wrapped `<tool_response>\n...\n</tool_response>`; a non-thinking assistant turn opens
with an empty `<think>\n\n</think>\n\n` block. The trace builder (rl/grpo/trace.py) uses the
per-turn pieces here to APPEND turns; `render_conversation` renders a whole conversation (SFT).
`parse_reply` never raises: malformed tool calls become `ReplyError`s that the episode turns into
an error message for the model.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
END_OF_TEXT = "<|endoftext|>"
TOOL_CALL_OPEN, TOOL_CALL_CLOSE = "<tool_call>", "</tool_call>"
TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE = "<tool_response>", "</tool_response>"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
SPECIAL_TOKENS = [END_OF_TEXT, IM_START, IM_END, TOOL_CALL_OPEN, TOOL_CALL_CLOSE,
                  TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE, THINK_OPEN, THINK_CLOSE]
EMPTY_THINK = f"{THINK_OPEN}\n\n{THINK_CLOSE}\n\n"
# What the model is given before it writes an assistant turn (non-thinking mode).
GENERATION_PROMPT = f"{IM_START}assistant\n{EMPTY_THINK}"

TOOLS_PREAMBLE = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>"
)
TOOLS_POSTAMBLE = (
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments "
    "within <tool_call></tool_call> XML tags:\n<tool_call>\n"
    '{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
)


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any]
    id: str = ""

    def openai(self) -> dict[str, Any]:
        """The call as an OpenAI `tool_calls` entry (arguments as a JSON string)."""
        return {"id": self.id, "type": "function",
                "function": {"name": self.name, "arguments": json.dumps(self.arguments)}}


@dataclass
class ReplyError:
    """A tool call the agent wrote that could not be understood; `message` is shown to the model."""

    raw: str
    message: str


@dataclass
class ParsedReply:
    content: str
    tool_calls: list[ToolCall] = field(default_factory=list)
    errors: list[ReplyError] = field(default_factory=list)


def system_content(system: str, tools: list[dict[str, Any]] | None) -> str:
    """The system turn's content: the system prompt followed by the tool list (if any)."""
    if not tools:
        return system
    lines = "".join("\n" + json.dumps(t, ensure_ascii=False) for t in tools)
    return f"{system}{TOOLS_PREAMBLE}{lines}{TOOLS_POSTAMBLE}"


def render_turn(role: str, content: str) -> str:
    return f"{IM_START}{role}\n{content}{IM_END}\n"


def render_tool_call(name: str, arguments: Any) -> str:
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            pass
    args = json.dumps(arguments, ensure_ascii=False)
    head = json.dumps(name, ensure_ascii=False)
    return f'{TOOL_CALL_OPEN}\n{{"name": {head}, "arguments": {args}}}\n{TOOL_CALL_CLOSE}'


def assistant_body(content: str | None, tool_calls: list[dict[str, Any]] | None = None) -> str:
    """What the agent writes in one assistant turn (after the think block, before `<|im_end|>`)."""
    text = (content or "").strip()
    for i, call in enumerate(tool_calls or []):
        fn = call.get("function", call)
        if text or i > 0:
            text += "\n"
        text += render_tool_call(fn["name"], fn.get("arguments", {}))
    return text


def tool_responses_content(outputs: list[str]) -> str:
    """The content of the user turn that returns tool results to the model."""
    return "\n".join(f"{TOOL_RESPONSE_OPEN}\n{o}\n{TOOL_RESPONSE_CLOSE}" for o in outputs)


def render_messages(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> list[
        tuple[str, str]]:
    """Render OpenAI-style messages as (kind, text) pieces: kind is `assistant` for text the agent
    wrote (the body and its closing `<|im_end|>`) and `context` for everything else, including an
    agent message marked `"train": false` (shown, not learned: rl/coldstart/data.py)."""
    pieces: list[tuple[str, str]] = []
    msgs = list(messages)
    if tools and not (msgs and msgs[0]["role"] == "system"):
        msgs.insert(0, {"role": "system", "content": ""})
    i = 0
    while i < len(msgs):
        m = msgs[i]
        role = m["role"]
        if role == "system":
            pieces.append(("context", render_turn("system", system_content(m.get("content") or "", tools))))
        elif role == "assistant":
            pieces.append(("context", GENERATION_PROMPT))
            kind = "context" if m.get("train") is False else "assistant"
            pieces.append((kind, assistant_body(m.get("content"), m.get("tool_calls")) + IM_END))
            pieces.append(("context", "\n"))
        elif role == "tool":
            outputs = []
            while i < len(msgs) and msgs[i]["role"] == "tool":
                outputs.append(msgs[i].get("content") or "")
                i += 1
            pieces.append(("context", render_turn("user", tool_responses_content(outputs))))
            continue
        else:
            pieces.append(("context", render_turn(role, m.get("content") or "")))
        i += 1
    return pieces


def render_conversation(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                        add_generation_prompt: bool = False) -> str:
    text = "".join(t for _, t in render_messages(messages, tools))
    return text + (GENERATION_PROMPT if add_generation_prompt else "")


_CALL_HINT = 'Write <tool_call>\n{"name": <tool name>, "arguments": {...}}\n</tool_call>'
_CALL_BLOCK = re.compile(re.escape(TOOL_CALL_OPEN) + r"(.*?)(?:" + re.escape(TOOL_CALL_CLOSE) + r"|$)", re.S)


def parse_reply(text: str, call_id_prefix: str = "call") -> ParsedReply:
    """Split what the agent generated into its message text and tool calls. Never raises."""
    for stop in (IM_END, END_OF_TEXT):
        text = text.split(stop, 1)[0]
    if EMPTY_THINK in text:
        text = text.replace(EMPTY_THINK, "", 1)
    calls: list[ToolCall] = []
    errors: list[ReplyError] = []
    for n, m in enumerate(_CALL_BLOCK.finditer(text)):
        raw = m.group(1).strip()
        closed = m.group(0).endswith(TOOL_CALL_CLOSE)
        call, problem = _parse_call(raw)
        if problem is None and not closed:
            problem = "the tool call is not closed with </tool_call>"
        if problem is not None:
            errors.append(ReplyError(raw=raw, message=f"Error: malformed tool call: {problem}. {_CALL_HINT}"))
        else:
            assert call is not None
            call.id = f"{call_id_prefix}_{n}"
            calls.append(call)
    content = _CALL_BLOCK.sub("", text).replace(TOOL_CALL_CLOSE, "").strip()
    return ParsedReply(content=content, tool_calls=calls, errors=errors)


def _parse_call(raw: str) -> tuple[ToolCall | None, str | None]:
    try:
        obj = json.loads(raw)
    except (ValueError, RecursionError) as e:
        return None, f"not valid JSON ({str(e)[:80]})"
    if not isinstance(obj, dict):
        return None, "expected a JSON object"
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return None, 'missing "name"'
    args = obj.get("arguments", {})
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return None, '"arguments" is not a JSON object'
    if not isinstance(args, dict):
        return None, '"arguments" must be a JSON object'
    return ToolCall(name=name, arguments=args), None


def compact_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Tool schemas without descriptions (names, parameter names and types only): the tiny recipe's
    short tool list, so a 4M-parameter model's context is spent on the conversation."""
    out = []
    for t in tools:
        fn = t.get("function", t)
        props = (fn.get("parameters") or {}).get("properties", {})
        params = {k: (f"array[{v.get('items', {}).get('type', 'any')}]" if v.get("type") == "array"
                      else v.get("type", "any")) for k, v in props.items()}
        out.append({"name": fn["name"], "parameters": params})
    return out
