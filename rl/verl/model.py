"""verl's token-level generation server as a `ChatModel`, so the one agent step drives verl rollouts.

`VerlServerModel.complete(messages, tools)` APPENDS the messages it has not seen yet to a
`TraceBuilder` (system prompt with the tool list, customer messages, tool results: mask 0), opens an
assistant turn (`<|im_start|>assistant\n<think>\n\n</think>\n\n`: mask 0), asks verl's
`server_manager.generate(request_id, prompt_ids=..., sampling_params=...)` for the continuation of
that exact token prompt, appends the generated ids (mask 1; an `<|im_end|>` added for a cut-off
turn is mask 0) and decodes them into a `Completion` with the local policy's hermes reader (a
malformed call carries its error, which the agent step answers without running a tool). The trace
only grows, so the tokens the model was conditioned on are exactly the tokens it is trained on.
Earlier turns are never re-rendered. `VerlPolicy` is the `AgentPolicy` the episode runner asks for
one model per episode.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from transformers import PreTrainedTokenizerBase

from backend.agent.llm import Completion, LLMUnavailable
from rl.grpo.trace import Trace, TraceBuilder
from rl.models.tokenizer import decode
from rl.policies.local import reply_message


class VerlServerModel:
    """One conversation's model: verl's generation server behind the `ChatModel` interface."""

    def __init__(self, server_manager: Any, tokenizer: PreTrainedTokenizerBase, sampling_params: dict[str, Any], *,
                 max_tokens: int, request_id: str | None = None, name: str = "verl") -> None:
        self.server, self.tok, self.name = server_manager, tokenizer, name
        self.sampling_params = dict(sampling_params)
        self.request_id = request_id or uuid.uuid4().hex  # one id per rollout: it sticks to one server
        self.builder = TraceBuilder(tokenizer, max_tokens)
        self.prompt_len: int | None = None  # tokens before the first assistant turn (verl's prompt_ids)
        self.seen = 0
        self.turns = 0

    @property
    def trace(self) -> Trace:
        return self.builder.trace

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        start = time.perf_counter()
        self._append_new(messages, tools)
        prompt = list(self.builder.open_assistant_turn())
        if self.prompt_len is None:
            self.prompt_len = len(prompt)
        room = (self.builder.max_tokens or 0) - len(prompt)
        if self.builder.max_tokens is not None and room <= 1:  # the context is full: an empty, untrained turn
            self.builder.add_generated([])
            self.seen = len(messages) + 1
            return Completion(content="", model=self.name, trace=self.trace)
        params = dict(self.sampling_params)
        if self.builder.max_tokens is not None:
            params["max_tokens"] = min(int(params.get("max_tokens") or room), room)
        try:
            out = await self.server.generate(self.request_id, prompt_ids=prompt, sampling_params=params)
        except LLMUnavailable:
            raise
        except Exception as e:  # the generation server is infrastructure: its failure is not the agent's
            self.builder.add_generated([])  # keep the trace consistent (nothing trained)
            raise LLMUnavailable("server_error", f"verl generation failed: {type(e).__name__}: {e}") from e
        ids = list(out.token_ids)
        logprobs = list(out.log_probs) if getattr(out, "log_probs", None) is not None else None
        self.builder.add_generated(ids, logprobs)
        self.seen = len(messages) + 1
        self.turns += 1
        msg = reply_message(decode(self.tok, ids), call_id_prefix=f"call_{self.turns}")
        msg.pop("raw", None)
        return Completion.from_message(msg, self.name, latency_s=time.perf_counter() - start, trace=self.trace)

    def _append_new(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> None:
        b, i = self.builder, self.seen
        if i == 0:
            if messages and messages[0]["role"] == "system":
                b.add_system(messages[0].get("content") or "", tools)
                i = 1
            elif tools:
                b.add_system("", tools)
        while i < len(messages):
            m = messages[i]
            if m["role"] == "tool":
                outputs = []
                while i < len(messages) and messages[i]["role"] == "tool":
                    outputs.append(messages[i].get("content") or "")
                    i += 1
                b.add_tool_results(outputs)
                continue
            if m["role"] == "assistant":
                raise ValueError("an assistant message the model did not write was added to the conversation")
            b.add_message(m)
            i += 1
        self.seen = i


class VerlPolicy:
    """The agent policy of one verl rollout: `session` opens the (only) conversation's model."""

    def __init__(self, model: VerlServerModel) -> None:
        self._model = model
        self.name = f"verl:{model.name}"
        self.model = model.name

    def session(self, task: Any, seed: int) -> VerlServerModel:
        del task, seed
        return self._model
