"""The local engine: checkpoints trained here, served under names, answering OpenAI-style chat requests.

A `ModelPool` holds the served models. A full model folder is loaded with its tokenizer and its view
(rl/chat/views.py, from its manifest); a LoRA adapter folder (rl/serving/lora.py) is merged into a
copy of its base, which is found by the adapter's `base_model_name_or_path` (a served name, a served
model's folder, or a folder to load), else the only full model served. Each served model answers
through `LocalPolicy` (rl/policies/local.py): references and constrained tool calls as the view says,
and every request that arrives while a generation runs joins the next batch. There is one policy per
sampling setting (temperature, token budget), because a batch samples with one setting. The episode a
request continues is found by rl/serving/conversations.py.

Errors are `EngineError`s carrying an HTTP status and an OpenAI error type; the app turns them into
`{"error": {...}}` bodies as vLLM does.
"""

from __future__ import annotations

import asyncio
import copy
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from rl.chat.format import END_OF_TEXT, IM_END
from rl.chat.views import ChatView
from rl.policies.local import LocalPolicy, malformed_error
from rl.serving.conversations import Conversations, fingerprint
from rl.serving.lora import AdapterError, apply_adapter, is_adapter_folder, read_adapter_config


class EngineError(Exception):
    def __init__(self, status: int, message: str, kind: str = "BadRequestError", param: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param = status, message, kind, param


@dataclass(frozen=True)
class Sampling:
    temperature: float  # 0: greedy
    max_tokens: int


@dataclass
class _Slot:
    policy: LocalPolicy
    conversations: Conversations


@dataclass
class ServedModel:
    name: str
    path: str
    kind: str  # "model" or "lora"
    model: torch.nn.Module
    tokenizer: Any
    view: ChatView
    parent: str | None = None  # for an adapter: the base it was merged into (a served name or a folder)
    created: int = field(default_factory=lambda: int(time.time()))
    slots: dict[Sampling, _Slot] = field(default_factory=dict)

    @property
    def max_context(self) -> int:
        return int(getattr(self.model.config, "max_position_embeddings", 8192))

    def card(self) -> dict[str, Any]:
        return {"id": self.name, "object": "model", "created": self.created, "owned_by": "muarl",
                "root": self.path, "parent": self.parent, "max_model_len": self.max_context, "kind": self.kind}

    def stats(self) -> dict[str, Any]:
        policies = [s.policy.stats for s in self.slots.values()]
        convs = [s.conversations for s in self.slots.values()]
        return {"requests": sum(p.requests for p in policies), "batches": sum(p.calls for p in policies),
                "largest_batch": max((p.largest_batch for p in policies), default=0),
                "new_tokens": sum(p.new_tokens for p in policies),
                "generation_seconds": round(sum(p.seconds for p in policies), 3),
                "conversations_continued": sum(c.continued for c in convs),
                "conversations_started": sum(c.started for c in convs)}


def _load_folder(path: Path) -> tuple[torch.nn.Module, Any, ChatView]:
    from rl.models.tiny import load_model_folder

    try:
        model, tok, manifest = load_model_folder(path)
    except (OSError, ValueError) as e:
        raise EngineError(400, f"cannot load a model from {path}: {e}", "InvalidUserInput") from None
    return model.eval(), tok, ChatView.from_manifest(manifest.get("view"))


class ModelPool:
    def __init__(self, *, temperature: float = 0.0, max_tokens: int = 256, max_context: int = 8192,
                 max_batch: int = 64, conversations: int = 1024, seed: int = 0) -> None:
        self.temperature, self.max_tokens, self.max_context = temperature, max_tokens, max_context
        self.max_batch, self.conversation_capacity, self.seed = max_batch, conversations, seed
        self.models: dict[str, ServedModel] = {}
        self._bases: dict[str, tuple[torch.nn.Module, Any, ChatView]] = {}  # unserved base folders by path
        self._lock = asyncio.Lock()

    # ---------------------------------------------------------------- loading
    async def load(self, name: str, path: str) -> ServedModel:
        """Serve the model or adapter folder at `path` as `name`."""
        if not name or not path:
            raise EngineError(400, "Both 'lora_name' and 'lora_path' must be provided.", "InvalidUserInput")
        async with self._lock:
            if name in self.models:
                raise EngineError(400, f"The lora adapter '{name}' has already been loaded.", "InvalidUserInput")
            folder = Path(path)
            if not folder.is_dir():
                raise EngineError(404, f"Loading lora {name} failed: No adapter found for {path}", "NotFoundError")
            served = await asyncio.to_thread(self._build, name, folder)
            self.models[name] = served
            return served

    def _build(self, name: str, folder: Path) -> ServedModel:
        if is_adapter_folder(folder):
            try:
                config = read_adapter_config(folder)
            except AdapterError as e:
                raise EngineError(400, str(e), "InvalidUserInput") from None
            parent, (base, tok, view) = self._base_for(str(config.get("base_model_name_or_path") or ""))
            model = copy.deepcopy(base)
            try:
                apply_adapter(model, folder)
            except AdapterError as e:
                raise EngineError(400, f"the adapter {folder} does not fit its base {parent}: {e}",
                                  "InvalidUserInput") from None
            manifest = folder / "manifest.json"
            if manifest.is_file():  # an adapter may record its own view; else it reads as its base does
                import json

                recorded = json.loads(manifest.read_text()).get("view")
                view = ChatView.from_manifest(recorded) if recorded else view
            return ServedModel(name, str(folder), "lora", model.eval(), tok, view, parent=parent)
        if not (folder / "config.json").is_file():
            raise EngineError(400, f"{folder} is neither a model folder (config.json) nor a LoRA adapter "
                              "(adapter_config.json)", "InvalidUserInput")
        model, tok, view = _load_folder(folder)
        return ServedModel(name, str(folder), "model", model, tok, view)

    def _base_for(self, base: str) -> tuple[str, tuple[torch.nn.Module, Any, ChatView]]:
        full = [m for m in self.models.values() if m.kind == "model"]
        for m in full:
            if base and (m.name == base or _same_path(m.path, base)):
                return m.name, (m.model, m.tokenizer, m.view)
        if base and (Path(base) / "config.json").is_file():
            key = str(Path(base).resolve())
            if key not in self._bases:
                self._bases[key] = _load_folder(Path(base))
            return base, self._bases[key]
        if len(full) == 1:
            return full[0].name, (full[0].model, full[0].tokenizer, full[0].view)
        raise EngineError(400, f"the adapter's base model {base!r} is neither served here nor a model folder, "
                          f"and {len(full)} full models are served", "InvalidUserInput")

    async def unload(self, name: str) -> ServedModel:
        if not name:
            raise EngineError(400, "'lora_name' needs to be provided to unload a LoRA adapter.", "InvalidUserInput")
        async with self._lock:
            served = self.models.pop(name, None)
        if served is None:
            raise EngineError(404, f"The lora adapter '{name}' cannot be found.", "NotFoundError")
        return served  # requests already running finish on it

    def get(self, name: str) -> ServedModel:
        served = self.models.get(name)
        if served is None:
            raise EngineError(404, f"The model `{name}` does not exist.", "NotFoundError", param="model")
        return served

    # ---------------------------------------------------------------- answering
    def _slot(self, served: ServedModel, sampling: Sampling) -> _Slot:
        slot = served.slots.get(sampling)
        if slot is None:
            policy = LocalPolicy(served.model, served.tokenizer, greedy=sampling.temperature == 0,
                                 temperature=sampling.temperature or 1.0, max_new_tokens=sampling.max_tokens,
                                 max_context=min(self.max_context, served.max_context), max_batch=self.max_batch,
                                 name=served.name, seed=self.seed, view=served.view, adopt_history=True,
                                 # conversations are keyed by their opening messages, and two customers
                                 # who open alike must not get one random stream: one shared generator
                                 episode_streams=False)
            slot = served.slots[sampling] = _Slot(policy, Conversations(self.conversation_capacity))
        return slot

    def sampling(self, temperature: float | None, max_tokens: int | None) -> Sampling:
        return Sampling(self.temperature if temperature is None else float(temperature),
                        self.max_tokens if max_tokens is None else int(max_tokens))

    async def chat(self, name: str, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None,
                   sampling: Sampling) -> dict[str, Any]:
        """The chat-completions response body for one request."""
        served = self.get(name)
        slot = self._slot(served, sampling)
        policy = slot.policy
        tools = tools or None
        tool_key = fingerprint([], [t.get("function", t).get("name") for t in tools or []])
        episode = slot.conversations.take(messages, tool_key)
        if episode is None or not policy.has_episode(episode):
            episode = f"chat-{uuid.uuid4().hex}"
            policy.open_episode(episode, key=fingerprint(messages[:2]))
        shown = policy.view.tool_list(tools) if tools else None
        try:
            msg = await policy.act(episode, messages, shown, call_tools=tools)
        except Exception as e:
            policy.pop_trace(episode)
            if isinstance(e, ValueError):
                raise EngineError(400, f"cannot continue this conversation: {e}", "InvalidUserInput") from None
            raise
        trace = policy.trace_of(episode)
        reply = self._reply(msg, policy, episode)
        for gone in slot.conversations.keep(messages, reply, episode, tool_key):
            policy.pop_trace(gone)
        gen = _generated(trace.loss_mask) if trace is not None else 0
        ids = trace.input_ids if trace is not None else []
        finished = bool(gen) and ids[len(ids) - _tail_context(trace.loss_mask) - 1] == served.tokenizer.eos_token_id
        reason = "tool_calls" if reply.get("tool_calls") else ("stop" if finished else "length")
        prompt = len(ids) - gen - _tail_context(trace.loss_mask) if trace is not None else 0
        return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion", "created": int(time.time()),
                "model": served.name,
                "choices": [{"index": 0, "message": reply, "finish_reason": reason, "logprobs": None}],
                "usage": {"prompt_tokens": prompt, "completion_tokens": gen, "total_tokens": prompt + gen}}

    @staticmethod
    def _reply(msg: dict[str, Any], policy: LocalPolicy, episode: str) -> dict[str, Any]:
        """The OpenAI assistant message: parsed tool calls with fresh ids; a reply whose call could not
        be parsed comes back as the text the model wrote (as vLLM's hermes parser does)."""
        calls = msg.get("tool_calls") or []
        if any(malformed_error(c) is not None for c in calls):
            refs = policy.refs_of(episode)
            raw = str(msg.get("raw") or "")
            for stop in (IM_END, END_OF_TEXT):
                raw = raw.split(stop, 1)[0]
            return {"role": "assistant", "content": (refs.expand(raw) if refs else raw).strip()}
        out = [{"id": f"call_{uuid.uuid4().hex[:24]}", "type": "function",
                "function": {"name": c["function"]["name"], "arguments": c["function"]["arguments"]}}
               for c in calls]
        reply: dict[str, Any] = {"role": "assistant", "content": msg.get("content") or (None if out else "")}
        if out:
            reply["tool_calls"] = out
        return reply

    def stats(self) -> dict[str, Any]:
        return {"models": {name: m.stats() for name, m in self.models.items()}}


def _tail_context(mask: list[int]) -> int:
    """Tokens after the last generated one (the `<|im_end|>` added to a cut-off turn, the newline)."""
    n = 0
    for m in reversed(mask):
        if m:
            break
        n += 1
    return n


def _generated(mask: list[int]) -> int:
    """Tokens of the last assistant turn the model generated."""
    n, i = 0, len(mask) - _tail_context(mask) - 1
    while i >= 0 and mask[i]:
        n, i = n + 1, i - 1
    return n


def _same_path(a: str, b: str) -> bool:
    try:
        return Path(a).resolve() == Path(b).resolve()
    except OSError:
        return False
