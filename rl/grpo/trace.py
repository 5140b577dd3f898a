"""Token-exact training traces, built by APPENDING turns as the conversation happens.

A `Trace` holds the token ids of a whole conversation, the log-prob each agent token was sampled
with, and a loss mask: 1 exactly on tokens the agent generated (its message text, its tool calls and
the `<|im_end|>` it ended its turn with), 0 on the system prompt, user messages, tool results and
template glue (`<|im_start|>assistant\n<think>\n\n</think>\n\n`, the newline after a turn, an
`<|im_end|>` we add when a turn was cut off). Tokens sampled under a constraint (a tool call's
grammar, shown references: rl/chat/call_constraint.py) also record what the constraint allowed and
their log-prob under the distribution renormalised over it (`constrained`, `masks`); unconstrained
positions record nothing. Earlier turns are never re-rendered: what the model was
conditioned on when it sampled is exactly what it is trained on. `trace_from_messages` builds the
same layout from a finished OpenAI-style conversation for SFT (loss on assistant tokens only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from transformers import PreTrainedTokenizerBase

from rl.chat.format import (
    GENERATION_PROMPT,
    IM_END,
    render_messages,
    render_turn,
    system_content,
    tool_responses_content,
)
from rl.models.tokenizer import encode


@dataclass
class Trace:
    input_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # unmasked sampling log-prob on mask-1 tokens, else 0.0
    loss_mask: list[int] = field(default_factory=list)
    # position -> (index into `masks`, log-prob under the constraint) for tokens sampled under a
    # constraint that ruled tokens out; `masks` holds each distinct allowed set once, packed
    # (rl/models/generation.py `pack_allowed`), so a forced token costs one dict entry
    constrained: dict[int, tuple[int, float]] = field(default_factory=dict)
    masks: list[bytes] = field(default_factory=list)
    # filled in by the rollout engine
    task_id: str = ""
    group: str = ""
    reward: float = 0.0
    excluded: bool = False  # infrastructure / simulator failure: out of the group statistics
    info: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def n_generated(self) -> int:
        return sum(self.loss_mask)

    def generated_ids(self) -> list[int]:
        return [t for t, m in zip(self.input_ids, self.loss_mask, strict=True) if m]

    def add_constrained(self, position: int, allowed: bytes, logprob: float) -> None:
        """Record that the token at `position` was drawn from the tokens `allowed` (packed mask)."""
        index = self.__dict__.setdefault("_mask_index", {m: i for i, m in enumerate(self.masks)})
        k = index.get(allowed)
        if k is None:
            k = index[allowed] = len(self.masks)
            self.masks.append(allowed)
        self.constrained[position] = (k, logprob)

    def behaviour_logprobs(self, constrained: bool) -> list[float]:
        """The sampling log-prob of every token: under the constraint it was drawn under
        (`constrained`), or under the unmasked distribution."""
        if not constrained or not self.constrained:
            return self.logprobs
        out = list(self.logprobs)
        for pos, (_, lp) in self.constrained.items():
            out[pos] = lp
        return out


class TraceBuilder:
    """Appends one conversation's turns as tokens; `prompt()` is what the model sees next."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, max_tokens: int | None = None) -> None:
        self.tok = tokenizer
        self.trace = Trace()
        self.max_tokens = max_tokens
        self._im_end = encode(tokenizer, IM_END)
        self.in_assistant_turn = False

    def add_context(self, text: str) -> None:
        ids = encode(self.tok, text)
        self.trace.input_ids += ids
        self.trace.logprobs += [0.0] * len(ids)
        self.trace.loss_mask += [0] * len(ids)

    def add_system(self, system: str, tools: list[dict[str, Any]] | None) -> None:
        self.add_context(render_turn("system", system_content(system, tools)))

    def add_message(self, message: dict[str, Any]) -> None:
        """Append a user message (or a system message) the agent did not write."""
        self.add_context(render_turn(message["role"], message.get("content") or ""))

    def add_tool_results(self, outputs: list[str]) -> None:
        self.add_context(render_turn("user", tool_responses_content(outputs)))

    def open_assistant_turn(self) -> list[int]:
        """Append the generation prompt; returns the full token prompt for the model."""
        assert not self.in_assistant_turn
        self.add_context(GENERATION_PROMPT)
        self.in_assistant_turn = True
        return self.trace.input_ids

    def add_generated(self, ids: list[int], logprobs: list[float] | None = None,
                      constrained: dict[int, tuple[bytes, float]] | None = None) -> None:
        """Append what the agent generated (mask 1) and close its turn; `constrained` maps an index
        in `ids` to what its constraint allowed and its log-prob under it (`Generation.constrained`)."""
        assert self.in_assistant_turn
        start = len(self.trace.input_ids)
        for j, (allowed, lp) in (constrained or {}).items():
            self.trace.add_constrained(start + j, allowed, lp)
        self.trace.input_ids += ids
        self.trace.logprobs += list(logprobs) if logprobs is not None else [0.0] * len(ids)
        self.trace.loss_mask += [1] * len(ids)
        if not ids or ids[-len(self._im_end):] != self._im_end:
            self.add_context(IM_END)  # the turn was cut off: close it, but do not train on it
        self.add_context("\n")
        self.in_assistant_turn = False

    @property
    def over_budget(self) -> bool:
        return self.max_tokens is not None and len(self.trace) >= self.max_tokens


def trace_from_messages(tokenizer: PreTrainedTokenizerBase, messages: list[dict[str, Any]],
                        tools: list[dict[str, Any]] | None = None) -> Trace:
    """A finished conversation as a trace with the loss mask on assistant-written tokens (SFT)."""
    b = TraceBuilder(tokenizer)
    for kind, text in render_messages(messages, tools):
        if kind == "assistant":
            ids = encode(tokenizer, text)
            b.trace.input_ids += ids
            b.trace.logprobs += [0.0] * len(ids)
            b.trace.loss_mask += [1] * len(ids)
        else:
            b.add_context(text)
    return b.trace
