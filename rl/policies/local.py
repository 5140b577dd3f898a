"""Local checkpoint policy: a model trained in-process (tiny Qwen3 on CPU, or any HF causal LM)
acting as the agent in many episodes at once.

Every episode calls `act(episode_id, messages, tools)`; the calls of all running episodes are
batched into one KV-cached `generate_continuing` (it runs in a worker thread, so sandboxes and simulated
customers keep working meanwhile; calls that arrive during a generation form the next batch).
Sampling at temperature 1.0 for rollouts, greedy for evaluation; each episode samples from its own
random stream (seeded by the policy's seed and the episode's key), so which episodes share a batch,
which arrival timing decides, no longer decides what each of them samples (the logits themselves
still carry float rounding that depends on the batch, which flips a rare token:
bench/grpo_repeat_bench.py). With `lockstep` that rounding is fixed too: episodes `join` a roster
and `leave` it when done, and a batch waits until every episode on the roster has asked for its
turn, then holds them in key order, so the episodes decide the batches, not their timing (the
caller must only put episodes on the roster that will ask or leave without waiting for a batch
themselves: rl/policies/admission.py admits them in a fixed order). For each episode the policy
keeps a `TraceBuilder` and APPENDS only the messages it has not seen yet (its own turns are already
in the trace exactly as sampled), so `pop_trace` returns the token-exact training trace. Replies
are parsed as hermes tool calls; a malformed call becomes a call to `malformed_tool_call` carrying
the parse error under the call's `error` key, which the agent step (backend/agent/loop.py) returns to
the model as the tool result (no tool runs). A `view` (rl/chat/views.py) sets how tool results look to
the model and, when it uses references, keeps each episode's `RefTable`: customer messages and tool
results are shown with references, and what the model writes is expanded before it is parsed.
The KV cache of every episode's conversation so far is kept between its turns (the trace only grows
by appending), so a turn processes only the new customer message or tool results; a new
conversation whose system turn (prompt and tool list) another one already had starts from that one's
cache of it. With
`constrain_calls` (by default as the view says), a call the model opens is decoded under the grammar
of the offered tools (rl/chat/call_grammar.py), so it always parses and names a real tool and its
parameters (a call still open when the turn's `max_new_tokens` run out may take `call_overrun` more
tokens to close), with references its identifiers are ones the conversation has shown, and the values
of the view's `copied_params` (a new address) are spans of the customer's messages (with
`copy_said_numbers`, so is the rest of a phrase its free text began with a number the customer
said; with `copy_product_names`, a capitalised word after "the " in its free text is a product
name the conversation's lookups showed; with `writes_after_proposal`, a write tool is callable only
right after the agent asked the customer to confirm, `asked_to_confirm`; with `proposal_template`,
a proposal it begins is written in one of the teacher's templates, rl/chat/proposal_template.py, and
with `proposal_said_items` its items are products the customer named; with `writes_follow_proposal`,
in the turn after a proposal the identifiers of a call are those the proposal named, `held_to`; with
`proposals_by_status`, a proposal offers only actions the status of an order it looked up allows; with
`propose_after_lookup`, none begins before a lookup has shown an order or the customer; with
`refused_not_again`, a cancellation the customer refused is not proposed again with that reason; with
`reason_follows_proposal`, a cancellation in the turn after a proposal writes the proposal's reason; with
`no_item_refs_in_text`, free text names no reference a lookup showed as an item id; with `status_answers`,
the word after "is currently" is the status of an order it looked up; with `refusals_by_status`, a
refusal's "is already" names the named order's status, never "pending"); the trace
keeps the unmasked log-probs and, for every token chosen under the constraint, what it allowed and
the log-prob under it (what GRPO trains on with `constrained_logprobs`). With `adopt_history` (serving,
where clients send whole conversations), assistant turns the policy did not write are shown to the model
as it would have written them.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from backend.agent.llm import Completion
from rl.chat.call_grammar import CallConstraint, ToolCallGrammar, grammar_key
from rl.chat.format import GENERATION_PROMPT, IM_END, assistant_body, parse_reply
from rl.chat.proposed_reason import proposed_reason
from rl.chat.refused_reasons import refused_cancellation
from rl.chat.views import FULL_VIEW, NAME_PARAMS, REF_PATTERN, ChatView, RefTable, item_names, rewrite_call
from rl.grpo.trace import Trace, TraceBuilder
from rl.models.generation import PrefixCache, generate_continuing
from rl.models.tokenizer import decode
from rl.policies.admission import episode_key
from rl.tasks.tools_meta import NEEDS_CUSTOMER, WRITE_TOOLS

MALFORMED_TOOL = "malformed_tool_call"


def malformed_error(call: dict[str, Any]) -> str | None:
    """The error text for a tool call the policy could not parse (None for a real call)."""
    fn = call.get("function", call)
    if fn.get("name") != MALFORMED_TOOL:
        return None
    return str(call.get("error") or "Error: malformed tool call")


def _said_in_words(message: dict[str, Any]) -> bool:
    """Whether `message` is an agent turn in words (the one `last_said` holds)."""
    return message.get("role") == "assistant" and bool(message.get("content")) and not message.get("tool_calls")


def asked_to_confirm(messages: list[dict[str, Any]]) -> bool:
    """Whether the agent's last message in words asked the customer to confirm a change (the store
    policy's "(yes/no)" form) and no write has been called since: with the view's
    `writes_after_proposal`, only then may it call a write tool."""
    for m in reversed(messages):
        if m.get("role") != "assistant":
            continue
        calls = m.get("tool_calls") or ()
        if any((c.get("function") or {}).get("name") in WRITE_TOOLS for c in calls):
            return False
        if m.get("content") and not calls:
            return "(yes/no)" in str(m["content"])
    return False


def proposed_refs(proposal: str, item_refs: dict[str, tuple[str, ...]]) -> frozenset[str]:
    """The references a proposal (as the model wrote it) names: its reference tokens and the
    references of the items whose products it names ("the Jigsaw Puzzle")."""
    refs = {m.group(0) for m in REF_PATTERN.finditer(proposal)}
    for name, items in item_refs.items():
        if re.search(r"the " + re.escape(name) + r"(?![\w-])", proposal):
            refs.update(items)
    return frozenset(refs)


def held_to(shown: frozenset[str], proposed: frozenset[str]) -> frozenset[str]:
    """The shown references a call may use when it follows a proposal (`writes_follow_proposal`):
    of each kind the proposal named, only those it named; every other kind as shown (so the tools
    a call may name are the same)."""
    kinds = {m.group(1) for r in proposed if (m := REF_PATTERN.fullmatch(r))}
    return frozenset(r for r in shown if r in proposed or not ((m := REF_PATTERN.fullmatch(r)) and m.group(1) in kinds))


def _record(result: str) -> dict[str, Any]:
    """A lookup's result as the model is shown it, parsed: a JSON object, or {} for anything else
    (an error, a user id, a list)."""
    try:
        rec = json.loads(result)
    except ValueError:
        return {}
    return rec if isinstance(rec, dict) else {}


def order_statuses(result: str) -> dict[str, str]:
    """order reference (or id) -> status, from a lookup's result as the model is shown it."""
    rec = _record(result)
    if isinstance(rec.get("order_id"), str) and isinstance(rec.get("status"), str):
        return {rec["order_id"]: rec["status"]}
    return {}


def shows_record(result: str) -> bool:
    """Whether a lookup's result (as the model is shown it) is an order's or a customer's record:
    what every proposal of the teacher's follows (`propose_after_lookup`)."""
    rec = _record(result)
    return {"order_id", "status"} <= rec.keys() or {"payment_methods", "orders"} <= rec.keys()


def reply_message(text: str, call_id_prefix: str = "call") -> dict[str, Any]:
    """The assistant message (OpenAI format) for what the model generated: its text and tool calls;
    each malformed call becomes a `malformed_tool_call` carrying the parse error as `error` and what
    the model wrote inside the call block as `raw` (kept in episode logs for debugging)."""
    reply = parse_reply(text, call_id_prefix=call_id_prefix)
    calls = [c.openai() for c in reply.tool_calls]
    calls += [{"id": f"{call_id_prefix}_bad{i}", "type": "function",
               "function": {"name": MALFORMED_TOOL, "arguments": "{}"}, "error": e.message,
               "raw": e.raw}
              for i, e in enumerate(reply.errors)]
    msg: dict[str, Any] = {"role": "assistant", "content": reply.content, "raw": text}
    if calls:
        msg["tool_calls"] = calls
    return msg


# Grammars (and their cached token masks) shared by the policies of one process: a GRPO run builds a
# new LocalPolicy every step for the same tokenizer and tools.
_GRAMMARS: dict[tuple[Any, ...], ToolCallGrammar] = {}


@dataclass
class _Episode:
    builder: TraceBuilder
    seen: int = 0  # messages already in the trace
    cache: PrefixCache | None = None  # key/value cache of the trace's first tokens (append-only, so it stays valid)
    used: int = 0  # when the cache was last used (for dropping the oldest ones)
    refs: RefTable | None = None  # the view's references in this conversation
    said: tuple[str, ...] = ()  # the customer's messages as the model read them (copied values come from these)
    products: tuple[str, ...] = ()  # product names its tool results showed (with `copy_product_names`)
    # product name -> its items' references (with `writes_follow_proposal` or `no_item_refs_in_text`)
    item_refs: dict[str, tuple[str, ...]] = field(default_factory=dict)
    last_said: str = ""  # the agent's last message in words as the model wrote it (with references)
    order_status: dict[str, str] = field(default_factory=dict)  # order reference -> status its lookups showed
    looked_up: bool = False  # a lookup has shown an order's or the customer's record (`propose_after_lookup`)
    # (order reference, reason) cancellations the customer did not say yes to (`refused_not_again`)
    refused: set[tuple[str, str]] = field(default_factory=set)
    system_len: int = 0  # tokens of its system turn (shared by every conversation with the same prompt and tools)
    key: str = ""  # the conversation's name: its sampling stream's seed and its place in a lockstep batch
    # the episode's own random stream for sampling (with `episode_streams`): which episodes share its
    # batches does not decide its draws
    rng: random.Random | None = None


@dataclass(frozen=True)
class RowLimits:
    """What one conversation's turn is held to while it is generated (rl/chat/call_constraint.py)."""
    grammar: ToolCallGrammar | None = None  # its calls' grammar (None: unconstrained)
    shown: frozenset[str] | None = None  # references the conversation has shown (identifier slots take only these)
    said: tuple[str, ...] = ()  # the customer's messages (copied values are spans of these)
    products: tuple[str, ...] | None = None  # product names free text may write (None: any)
    orders: dict[str, str] | None = None  # order reference -> status (with `proposals_by_status`)
    may_propose: bool = True  # whether a proposal may begin (with `propose_after_lookup`: after a lookup)
    refused: frozenset[tuple[str, str]] = frozenset()  # cancellations refused (with `refused_not_again`)
    reason: str | None = None  # the reason a call writes (with `reason_follows_proposal`: the proposal's)
    text_shown: frozenset[str] | None = None  # references free text may write (None: `shown`)


@dataclass
class _Request:
    episode_id: str
    prompt: list[int]
    future: asyncio.Future = field(repr=False)
    limits: RowLimits = RowLimits()
    key: str = ""  # the episode's key (its order in a lockstep batch)


@dataclass
class GenerationStats:
    calls: int = 0  # batched generations
    requests: int = 0  # turns generated (a batch holds one or more)
    largest_batch: int = 0
    new_tokens: int = 0
    seconds: float = 0.0
    prompt_tokens: int = 0  # tokens of the prompts handed to the model
    cached_tokens: int = 0  # of which were served from an episode's cache

    @property
    def tokens_per_second(self) -> float:
        return self.new_tokens / self.seconds if self.seconds else 0.0


class LocalPolicy:
    def __init__(self, model: PreTrainedModel, tokenizer: PreTrainedTokenizerBase, *, greedy: bool = False,
                 temperature: float = 1.0, max_new_tokens: int = 256, max_context: int = 8192,
                 max_batch: int = 64, name: str = "local", seed: int = 0, reuse_cache: bool = True,
                 max_cached_episodes: int = 256, view: ChatView | None = None,
                 constrain_calls: bool | None = None, call_overrun: int = 160, adopt_history: bool = False,
                 episode_streams: bool = True, lockstep: bool = False) -> None:
        self.model, self.tok = model, tokenizer
        self.greedy, self.temperature = greedy, temperature
        self.max_new_tokens, self.max_context, self.max_batch = max_new_tokens, max_context, max_batch
        self.name = name
        self.stats = GenerationStats()
        self.reuse_cache, self.max_cached_episodes = reuse_cache, max_cached_episodes
        self.view = view or FULL_VIEW  # how the conversation is shown to the model
        # tool calls decoded under their grammar (rl/chat/call_grammar.py); by default as the view says
        self.constrain_calls = self.view.constrain_calls if constrain_calls is None else constrain_calls
        # tokens past max_new_tokens a constrained call may take to close (rl/models/generation.py)
        self.call_overrun = call_overrun
        # assistant turns this policy did not write are taken into the conversation (serving: the
        # client sends the whole history) instead of refused (training: traces must be token-exact)
        self.adopt_history = adopt_history
        self._episodes: dict[str, _Episode] = {}
        self._system_caches: dict[tuple[int, ...], PrefixCache] = {}  # system-turn tokens -> their cache
        self._queue: list[_Request] = []
        self._worker: asyncio.Task | None = None
        self.seed = seed
        # each episode samples from its own stream; off, all draw from one generator in batch order
        # (what GRPO did before: bench/grpo_repeat_bench.py measures the difference)
        self.episode_streams = episode_streams
        self._gen = torch.Generator().manual_seed(seed)  # for prompts generated outside an episode
        # lockstep: the keys of episodes whose every turn a batch waits for (a multiset: a task may be
        # played twice under one key), and each batch's keys as generated (the episodes decide them)
        self._roster: Counter[str] | None = Counter() if lockstep else None
        self._changed = asyncio.Event()
        self.rounds: list[tuple[str, ...]] = []

    # ---------------------------------------------------------------- episode side
    async def act(self, episode_id: str, messages: list[dict[str, Any]],
                  tools: list[dict[str, Any]] | None = None,
                  call_tools: list[dict[str, Any]] | None = None) -> dict[str, Any]:
        """The agent's next assistant message (OpenAI format) for this conversation. `tools` is the
        list as the model is shown it; `call_tools` (default: `tools`) the full schemas that
        constrained decoding holds calls to."""
        ep = self._episodes.get(episode_id)
        if ep is None:
            ep = self._episodes[episode_id] = self.new_episode(episode_id)
        self._append_new(ep, messages, tools)
        if ep.cache is None and ep.system_len and self.reuse_cache:  # a new conversation: its system turn is known
            ep.cache = self._system_caches.get(tuple(ep.builder.trace.input_ids[: ep.system_len]))
        prompt = ep.builder.open_assistant_turn()
        if len(prompt) + 1 >= self.max_context:  # no room left: an empty turn (the episode runs out of turns)
            ep.builder.add_generated([])
            ep.seen = len(messages) + 1
            return {"role": "assistant", "content": "", "truncated": True}
        fut = asyncio.get_running_loop().create_future()
        grammar = self._grammar(call_tools or tools)
        confirming = asked_to_confirm(messages)  # the turn answers a proposal: writes may follow it
        if grammar is not None and self.view.writes_after_proposal and not confirming:
            grammar = grammar.without(WRITE_TOOLS)
        shown = ep.refs.shown() if grammar is not None and ep.refs is not None else None
        if shown is not None and self.view.writes_follow_proposal and confirming:
            shown = held_to(shown, proposed_refs(ep.last_said, ep.item_refs))
        copying = grammar is not None and (grammar.copy_params or self.view.copy_said_numbers
                                           or self.view.proposal_template)
        products = ep.products if grammar is not None and self.view.copy_product_names else None
        orders = dict(ep.order_status) if grammar is not None and self.view.proposals_by_status else None
        may_propose = ep.looked_up or not self.view.propose_after_lookup
        refused = frozenset(ep.refused) if grammar is not None and self.view.refused_not_again else frozenset()
        reason = proposed_reason(ep.last_said) if grammar is not None and self.view.reason_follows_proposal \
            and confirming else None
        text_shown = None
        if shown is not None and self.view.no_item_refs_in_text:  # no reference a lookup showed as an item's
            text_shown = shown - {r for refs in ep.item_refs.values() for r in refs}
        limits = RowLimits(grammar, shown, ep.said if copying else (), products, orders, may_propose, refused, reason,
                           text_shown)
        self._queue.append(_Request(episode_id, list(prompt), fut, limits, ep.key))
        self._changed.set()
        if self._worker is None or self._worker.done():
            self._worker = asyncio.create_task(self._drain())
        ids, logprobs, *held = await fut
        ep.builder.add_generated(ids, logprobs, held[0] if held else None)
        ep.seen = len(messages) + 1
        text = decode(self.tok, ids)
        msg = reply_message(ep.refs.expand(text) if ep.refs else text, call_id_prefix=f"{episode_id}_{ep.seen}")
        if self.view.spaced_values and msg.get("tool_calls"):
            msg["tool_calls"] = [self.view.read_call(c) for c in msg["tool_calls"]]
        msg["raw"] = text
        if msg.get("content") and not msg.get("tool_calls"):
            ep.last_said = text
        return msg

    def _grammar(self, tools: list[dict[str, Any]] | None) -> ToolCallGrammar | None:
        """The grammar of calls to the tools this turn offers (the view's selection, full schemas so
        enums and required parameters count), or None when calls are not constrained."""
        if not self.constrain_calls or not tools:
            return None
        keep = set(self.view.tools) if self.view.tools is not None else None
        offered = [t for t in tools if keep is None or t.get("function", t)["name"] in keep]
        if not offered:
            return None
        needs_customer = NEEDS_CUSTOMER if self.view.identified_calls else frozenset()
        key = (id(self.tok), grammar_key(offered), tuple(sorted(self.view.ref_params.items())),
               self.view.spaced_values, self.view.copied_params, needs_customer, self.view.whole_names)
        g = _GRAMMARS.get(key)
        if g is None or g.tokenizer is not self.tok:
            g = _GRAMMARS[key] = ToolCallGrammar(offered, self.tok, text_tokens=self.view.extra_tokens,
                                                 ref_params=self.view.ref_params,
                                                 spaced_values=self.view.spaced_values,
                                                 copy_params=self.view.copied_params,
                                                 needs_customer=needs_customer,
                                                 name_params=NAME_PARAMS if self.view.whole_names else ())
        return g

    def new_episode(self, key: str = "") -> _Episode:
        """A fresh episode; `key` names its conversation: it seeds the view's shuffled references and,
        with the policy's seed, the episode's sampling stream (so what else runs beside an episode,
        which arrival time decides, does not decide its draws; see the module doc)."""
        return _Episode(TraceBuilder(self.tok, self.max_context), refs=self.view.conversation(key),
                        rng=random.Random(f"{self.seed}:{key}") if self.episode_streams else None, key=key)

    # ---------------------------------------------------------------- lockstep roster
    @property
    def lockstep(self) -> bool:
        return self._roster is not None

    def join(self, key: str) -> None:
        """With `lockstep`: batches wait for the episode named `key` until it `leave`s (no-op without)."""
        if self._roster is not None:
            self._roster[key] += 1
            self._changed.set()

    def leave(self, key: str) -> None:
        """The episode named `key` asks for no more turns; batches stop waiting for it."""
        if self._roster is not None and self._roster[key] > 0:
            self._roster[key] -= 1
            if not self._roster[key]:
                del self._roster[key]
            self._changed.set()

    def open_episode(self, episode_id: str, key: str = "") -> None:
        """Start `episode_id` as a fresh conversation named `key` (see `new_episode`)."""
        self._episodes[episode_id] = self.new_episode(key)

    def has_episode(self, episode_id: str) -> bool:
        return episode_id in self._episodes

    def trace_of(self, episode_id: str) -> Trace | None:
        ep = self._episodes.get(episode_id)
        return ep.builder.trace if ep else None

    def refs_of(self, episode_id: str) -> RefTable | None:
        ep = self._episodes.get(episode_id)
        return ep.refs if ep else None

    def pop_trace(self, episode_id: str) -> Trace | None:
        ep = self._episodes.pop(episode_id, None)
        return ep.builder.trace if ep else None

    def _append_new(self, ep: _Episode, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> None:
        b = ep.builder
        i = ep.seen
        if i == 0:
            if messages and messages[0]["role"] == "system":
                b.add_system(self.view.system(messages[0].get("content") or ""), tools)
                ep.system_len = len(b.trace.input_ids)
                i = 1
            elif tools:
                b.add_system("", tools)
                ep.system_len = len(b.trace.input_ids)
        while i < len(messages):
            m = messages[i]
            if m["role"] == "tool":
                outputs = []
                while i < len(messages) and messages[i]["role"] == "tool":
                    out = self.view.result(messages[i].get("content") or "")
                    if self.view.copy_product_names:
                        ep.products = tuple(dict.fromkeys((*ep.products, *item_names(out).values())))
                    outputs.append(ep.refs.show(out) if ep.refs else out)
                    if self.view.proposals_by_status:
                        ep.order_status.update(order_statuses(outputs[-1]))
                    if self.view.propose_after_lookup and shows_record(outputs[-1]):
                        ep.looked_up = True
                    if self.view.writes_follow_proposal or self.view.no_item_refs_in_text:
                        for ref, name in item_names(outputs[-1]).items():
                            ep.item_refs[name] = tuple(dict.fromkeys((*ep.item_refs.get(name, ()), ref)))
                    i += 1
                b.add_tool_results(outputs)
                continue
            if m["role"] == "assistant":
                if not self.adopt_history:
                    raise ValueError("an assistant message the local policy did not write was added to the "
                                     "conversation")
                self._append_assistant(ep, m)
                i += 1
                continue
            shown = {**m, "content": ep.refs.show(m.get("content") or "")} if ep.refs else m
            b.add_message(shown)
            if m["role"] == "user":
                ep.said = (*ep.said, str(shown.get("content") or ""))
                if self.view.refused_not_again and i > 0 and _said_in_words(messages[i - 1]) \
                        and (refused := refused_cancellation(ep.last_said, m.get("content") or "")):
                    ep.refused.add(refused)  # the agent's proposal just before it, answered with no yes
            i += 1
        ep.seen = i

    def _append_assistant(self, ep: _Episode, message: dict[str, Any]) -> None:
        """An assistant turn written elsewhere (another model version, or this one before the
        conversation was forgotten), shown as the model would have written it under its view."""
        calls = message.get("tool_calls") or []
        content = message.get("content") or ""
        if ep.refs is not None:
            content = ep.refs.show(content)
            calls = [rewrite_call(c, ep.refs.show) for c in calls]
        if self.view.spaced_values:
            calls = [self.view.show_call(c) for c in calls]
        ep.builder.add_context(GENERATION_PROMPT + assistant_body(content, calls) + IM_END + "\n")
        if content and not calls:
            ep.last_said = content

    # ---------------------------------------------------------------- batching side
    async def _drain(self) -> None:
        await asyncio.sleep(0)  # let every episode that is ready queue its request
        while self._queue:
            if self._roster is None:
                await asyncio.sleep(0.002)
                batch, self._queue = self._queue[: self.max_batch], self._queue[self.max_batch:]
                await self._run_batch(batch)
                continue
            ready = await self._lockstep_round()
            for i in range(0, len(ready), self.max_batch):  # a round larger than a batch: in key order
                await self._run_batch(ready[i: i + self.max_batch])

    async def _lockstep_round(self) -> list[_Request]:
        """Every queued request, in key order, once each episode on the roster has queued one."""
        while True:
            self._queue = [r for r in self._queue if not r.future.done()]  # an episode that gave up waiting
            if not self._queue:  # nothing left to generate: the worker ends, the next turn starts another
                return []
            waiting = Counter(r.key for r in self._queue)
            if all(waiting[k] >= n for k, n in self._roster.items()):
                break
            self._changed.clear()
            await self._changed.wait()
        ready, self._queue = sorted(self._queue, key=lambda r: r.key), []
        return ready

    async def _run_batch(self, batch: list[_Request]) -> None:
        if self._roster is not None:
            self.rounds.append(tuple(r.key for r in batch))
        try:
            outs = await asyncio.to_thread(self._generate, [r.prompt for r in batch],
                                           [r.episode_id for r in batch], [r.limits for r in batch])
        except Exception as e:  # noqa: BLE001 - hand the failure to every waiting episode
            for r in batch:
                if not r.future.done():
                    r.future.set_exception(e)
            return
        for r, o in zip(batch, outs, strict=True):
            if not r.future.done():
                r.future.set_result(o)

    def _generate(self, prompts: list[list[int]], episode_ids: list[str] | None = None,
                  limits: list[RowLimits] | None = None) -> list[
                      tuple[list[int], list[float], dict[int, tuple[bytes, float]]]]:
        """Per prompt: the new token ids, their unmasked log-probs, and for tokens chosen under the
        constraint, what it allowed and their log-prob under it (`Generation.constrained`)."""
        start = time.perf_counter()
        room = self.max_context - max(len(p) for p in prompts)
        budget = min(self.max_new_tokens, max(1, room))
        overrun = max(0, min(self.call_overrun, room - budget))
        was_training = self.model.training
        self.model.eval()
        found = [self._episodes.get(e) for e in episode_ids] if episode_ids else [None] * len(prompts)
        eps = found if self.reuse_cache else [None] * len(prompts)
        caches = [ep.cache if ep is not None else None for ep in eps]
        streams = [ep.rng for ep in found if ep is not None and ep.rng is not None]
        gens, new_caches = generate_continuing(
            self.model, prompts, caches, max_new_tokens=budget, eos_id=self.tok.eos_token_id,
            pad_id=self.tok.pad_token_id, temperature=self.temperature, greedy=self.greedy, generator=self._gen,
            streams=streams if len(streams) == len(prompts) else None,
            constraint=self._constraint(limits) if limits and any(lim.grammar for lim in limits) else None,
            call_overrun=overrun)
        if was_training:
            self.model.train()
        self.stats.calls += 1
        self.stats.requests += len(prompts)
        self.stats.largest_batch = max(self.stats.largest_batch, len(prompts))
        self.stats.prompt_tokens += sum(len(p) for p in prompts)
        self.stats.cached_tokens += sum(c.length if c is not None and c.length < len(p) else 0
                                        for c, p in zip(caches, prompts, strict=True))
        for ep, c in zip(eps, new_caches, strict=True):
            if ep is not None:
                ep.cache, ep.used = c, self.stats.calls
                self._remember_system(ep)
        self._drop_old_caches()
        self.stats.new_tokens += sum(len(g.ids) for g in gens)
        self.stats.seconds += time.perf_counter() - start
        return [(g.ids, g.logprobs, g.constrained) for g in gens]


    def _constraint(self, limits: list[RowLimits]) -> CallConstraint:
        """The decoding constraint of one batch under this policy's view."""
        grammars = [lim.grammar for lim in limits]
        template = None
        if self.view.proposal_template:
            base = next(g for g in grammars if g is not None)
            # the items an action takes away carry their options only where the records show them
            template = base.proposal_template(self.view.payment_refs, self.view.item_refs,
                                              item_options=not self.view.compact_results)
        return CallConstraint(grammars, [lim.shown for lim in limits], [lim.said for lim in limits],
                              text_refs=self.view.shown_refs_in_text, copy_numbers=self.view.copy_said_numbers,
                              products=[lim.products for lim in limits], proposal=template,
                              said_items=self.view.proposal_said_items, orders=[lim.orders for lim in limits],
                              may_propose=[lim.may_propose for lim in limits],
                              refused=[lim.refused for lim in limits], reasons=[lim.reason for lim in limits],
                              text_shown=[lim.text_shown for lim in limits], status_answers=self.view.status_answers,
                              refusals_by_status=self.view.refusals_by_status)

    def _remember_system(self, ep: _Episode) -> None:
        """Keep the key/value cache of `ep`'s system turn for new conversations that start with the same
        tokens (a service's system prompt and tool list are the same for every customer), so that they
        process only their own messages, as vLLM's prefix caching does."""
        if not ep.system_len or ep.cache is None or ep.cache.length <= ep.system_len:
            return
        key = tuple(ep.builder.trace.input_ids[: ep.system_len])
        if key in self._system_caches:
            return
        if len(self._system_caches) >= 8:  # a few distinct prompts at most; forget the oldest
            self._system_caches.pop(next(iter(self._system_caches)))
        n = ep.system_len
        self._system_caches[key] = PrefixCache([(k[:, :n].clone(), v[:, :n].clone()) for k, v in ep.cache.layers])

    def _drop_old_caches(self) -> None:
        live = [e for e in self._episodes.values() if e.cache is not None]
        if len(live) > self.max_cached_episodes:
            for e in sorted(live, key=lambda e: e.used)[: len(live) - self.max_cached_episodes]:
                e.cache = None


class LocalSession:
    """One episode of a `LocalAgentPolicy`: a `ChatModel` that shows the conversation through the
    model's view (its tool list, results and references) and hands back its trace."""

    def __init__(self, policy: LocalAgentPolicy, episode_id: str) -> None:
        self.policy, self.episode_id, self.name = policy, episode_id, policy.model
        self._tools: tuple[int, list[dict[str, Any]]] | None = None  # (id of the full list, the list as shown)

    async def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Completion:
        start = time.perf_counter()
        if self._tools is None or self._tools[0] != id(tools):
            self._tools = (id(tools), (self.policy.tools_transform or self.policy.engine.view.tool_list)(tools))
        msg = await self.policy.engine.act(self.episode_id, messages, self._tools[1], tools)
        msg.pop("raw", None)
        trace = self.policy.engine._episodes[self.episode_id].builder.trace
        return Completion.from_message(msg, self.policy.model, latency_s=time.perf_counter() - start, trace=trace)


class LocalAgentPolicy:
    """`local:PATH` policies for the episode runner: sessions share one batching `LocalPolicy`.
    `traces[(task_id, seed)]` is the token-exact trace of each finished or running episode."""

    def __init__(self, engine: LocalPolicy, model_name: str = "local",
                 tools_transform: Any = None) -> None:
        self.engine = engine
        self.tools_transform = tools_transform  # how the tool list is shown (default: the engine's view)
        self.name = f"local:{model_name}"
        self.model = model_name
        self.traces: dict[tuple[str, int], Trace] = {}
        self._n = 0

    def session(self, task: Any, seed: int) -> LocalSession:
        self._n += 1
        key = episode_key(task, seed)
        eid = f"{key}#{self._n}"
        s = LocalSession(self, eid)
        self.engine._episodes[eid] = self.engine.new_episode(key)
        self.traces[(str(getattr(task, "id", task)), seed)] = self.engine._episodes[eid].builder.trace
        return s


def load_local_policy(path: str, *, greedy: bool = True, **options: Any) -> LocalAgentPolicy:
    """Build the agent from a model folder (tiny recipe or a real HF checkpoint); greedy by default."""
    from rl.models.tiny import load_model_folder

    torch.set_num_threads(int(options.pop("threads", 2)))
    model, tok, manifest = load_model_folder(path)
    options.setdefault("view", ChatView.from_manifest(manifest.get("view")))  # the layout the model was trained on
    return LocalAgentPolicy(LocalPolicy(model.eval(), tok, greedy=greedy, **options), model_name=path)


def local_policy(path: str, *, base_url: str | None = None, **options: Any) -> LocalAgentPolicy:
    """`local:PATH` (an endpoint does not apply to an in-process model)."""
    del base_url
    if not path:
        raise ValueError("local policy needs a model folder: --policy local:PATH")
    return load_local_policy(path, **options)
