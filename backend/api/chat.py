"""One customer message, end to end: checks, serialization, the agent loop and persistence.

`ChatService.begin_turn` does everything that can refuse a message before any work starts
(no model can answer -> 503, too long -> 413, transferred conversation -> 409, rate limit ->
429) and takes the conversation's turn: an in-process lock, then the database lease, so
concurrent messages to one conversation are answered one after the other even across
processes. It stores the customer's message and loads the history.
`ChatService.run_turn` then runs the agent loop and persists every step as it happens: the
assistant's tool-call message, and each tool call in the same transaction as the store
change it made, the conversation's customer binding and any audit rows for refused calls.
The authenticated customer is read from and written to the conversation row, so the binding
survives restarts. The lease is always released, whatever happens.

The model is resolved once per turn (`backend.serving.champion`): the registry's champion, else
the configured external endpoint. The turn keeps that target to its end, and every assistant
message and tool call it stores records the version (`model_version`) and its served name.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import structlog
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from backend import escalations
from backend.agent.llm import ChatModel, ToolCallRequest
from backend.agent.loop import AgentConfig, AgentEvent, AgentLoop, AssistantStep, Reply, ToolStep, TurnStats
from backend.api import conversation_store as store
from backend.api.metrics import CHAT_TURNS, CHAT_TURNS_BY_VERSION, TOOL_CALLS, TURN_OVERHEAD
from backend.api.problems import Problem
from backend.config import Settings
from backend.serving.champion import ChampionResolver, ServingTarget, no_model_details
from backend.tools.context import DeniedCall, Principal, ToolContext
from backend.tools.registry import ToolRegistry, ToolResult

log = structlog.get_logger(__name__)

NO_MODEL = ("No model can answer yet: the model registry has no champion and no external endpoint is configured. "
            "Promote a registered version (`muarl models promote ID --reason TEXT`, or POST "
            "/v1/ops/models/{id}/promote); it answers from the next message on, without a restart. Or set "
            "MUARL_LLM_BASE_URL (an OpenAI-compatible endpoint) and MUARL_LLM_MODEL (and MUARL_LLM_API_KEY if "
            "the endpoint needs one) and restart the service.")
LEASE_POLL_S = 0.05  # first pause while another process holds the turn; it doubles up to LEASE_POLL_MAX_S
LEASE_POLL_MAX_S = 1.0
BUSY_RETRY_AFTER_S = 5
SYNC_COMMIT = text("SET LOCAL synchronous_commit TO on")


@dataclass
class Turn:
    """A customer message being answered: the conversation's turn is held until `run_turn` ends."""

    conversation_id: str
    customer_user_id: str | None
    history: list[dict[str, Any]]
    next_seq: int
    started: float
    lock: asyncio.Lock
    target: ServingTarget
    stats: TurnStats = field(default_factory=TurnStats)
    status: str = "open"
    assistant_seq: int = 0  # the assistant message whose tool calls are being run
    pending_assistant: AssistantStep | None = None  # not stored yet (goes with its first tool call)


class ChatService:
    def __init__(self, engine: AsyncEngine, settings: Settings, resolver: ChampionResolver,
                 registry: ToolRegistry) -> None:
        self.engine = engine
        self.settings = settings
        self.resolver = resolver
        self.model: ChatModel | None = None  # set: this in-process model answers every turn instead
        self.registry = registry
        self.agent = AgentLoop(registry, AgentConfig.from_settings(settings))
        self.holder = f"{socket.gethostname()[:30]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    # -- taking a turn -----------------------------------------------------------------

    async def serving_target(self) -> ServingTarget:
        """The version answering a new turn (503 when none can)."""
        if self.model is not None:
            return ServingTarget(None, self.model)
        target = await self.resolver.resolve()
        if target is None:
            extra = await no_model_details()
            suffix = extra.pop("detail_suffix", "")
            raise Problem(503, f"{NO_MODEL} {suffix}".strip(), title="No model configured", **extra)
        return target

    def check_message(self, content: str) -> None:
        limit = self.settings.api_max_message_chars
        if len(content) > limit:
            raise Problem(413, f"The message has {len(content)} characters; at most {limit} are accepted.")

    async def begin_turn(self, conv: store.ConversationRow, content: str, started: float | None = None) -> Turn:
        """Take the conversation's turn for `content` (`started`: when the request arrived).

        One transaction takes the lease, checks the rate limit, loads the history and stores the
        message; a refusal (busy, transferred, rate limited) rolls it back, so nothing changes."""
        started = time.perf_counter() if started is None else started
        self.check_message(content)
        target = await self.serving_target()  # once per turn: the whole turn is this version's
        lock = self._lock_for(conv.id)
        await lock.acquire()
        try:
            start = await self._take_turn(conv.id, content)
        except BaseException:
            self._unlock(conv.id, lock)
            raise
        assert start.seq is not None
        history = [store.as_model_message(r) for r in start.history if not r["notice"]]
        history.append({"role": "user", "content": store.clean_text(content)})
        return Turn(conv.id, start.customer_user_id, history, start.seq + 1, started, lock, target,
                    status=start.status)

    async def _take_turn(self, conversation_id: str, content: str) -> store.TurnStart:
        # another process answering this conversation: wait for it a while (a crashed one's lease
        # expires after api_turn_lease_s), then tell the customer to retry. The wait holds no
        # pooled connection: each attempt borrows one and gives it back before sleeping.
        deadline = time.monotonic() + min(self.settings.api_turn_lease_s, self.settings.api_turn_wait_s)
        limit = self.settings.api_rate_limit_per_minute
        pause = LEASE_POLL_S
        while True:
            async with self.engine.connect() as conn:
                pg = await store.driver(conn)
                start = await store.take_turn(pg, conversation_id, self.holder, self.settings.api_turn_lease_s,
                                              limit, content)
                if start is not None and start.seq is None:  # refused: nothing was stored; give the lease back
                    await store.release_lease(pg, conversation_id, self.holder)
            if start is not None:
                break
            if time.monotonic() + pause > deadline:  # another process is answering this conversation
                raise Problem(409, "Another message to this conversation is still being answered; "
                                   "please retry shortly.", headers={"Retry-After": str(BUSY_RETRY_AFTER_S)})
            await asyncio.sleep(pause)
            pause = min(pause * 2, LEASE_POLL_MAX_S)
        if start.seq is None:
            if start.status == "transferred":
                raise Problem(409, "This conversation was handed to a human agent; start a new conversation.")
            raise Problem(429, f"At most {limit} messages per minute are accepted in one conversation; "
                               "please wait a moment.", headers={"Retry-After": "60"})
        return start

    async def _release(self, conversation_id: str, status: str | None = None) -> None:
        async with self.engine.connect() as conn:
            await store.release_lease(await store.driver(conn), conversation_id, self.holder, status)

    def _lock_for(self, conversation_id: str) -> asyncio.Lock:
        lock, users = self._locks.get(conversation_id, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[conversation_id] = (lock, users + 1)
        return lock

    def _unlock(self, conversation_id: str, lock: asyncio.Lock) -> None:
        lock.release()
        _, users = self._locks.get(conversation_id, (lock, 1))
        if users <= 1:
            self._locks.pop(conversation_id, None)
        else:
            self._locks[conversation_id] = (lock, users - 1)

    # -- answering ---------------------------------------------------------------------

    async def run_turn(self, turn: Turn) -> AsyncIterator[AgentEvent]:
        """Run the agent on the turn's message, persisting each step; yields the steps."""
        reply: Reply | None = None
        run_tool = self._tool_runner(turn)
        try:
            # the turn's one version answers every model call of the turn
            async for event in self.agent.run_turn(turn.target.model, turn.history, run_tool, turn.stats):
                if event.model:  # what the customer sees is the version's served name
                    event.model = turn.target.served_name
                if isinstance(event, ToolStep) and not event.ran:  # answered without running: stored here
                    await run_tool(event, unread=event.result)
                if isinstance(event, AssistantStep):
                    # stored with its first tool call's result, in that call's transaction
                    turn.pending_assistant = event
                    turn.assistant_seq = turn.next_seq
                    turn.next_seq += 1
                elif isinstance(event, Reply):
                    await self._finish(turn, event)
                    reply = event
                yield event
        finally:
            if reply is None:  # cancelled or failed half way: give the turn back
                try:
                    await asyncio.shield(self._release(turn.conversation_id))
                except Exception:
                    log.exception("chat.release_failed", conversation=turn.conversation_id)
            self._unlock(turn.conversation_id, turn.lock)

    async def answer(self, turn: Turn) -> tuple[Reply, list[ToolStep]]:
        """Run a whole turn; returns the reply and the tool steps taken."""
        reply: Reply | None = None
        steps: list[ToolStep] = []
        async for event in self.run_turn(turn):
            if isinstance(event, ToolStep):
                steps.append(event)
            elif isinstance(event, Reply):
                reply = event
        assert reply is not None
        return reply, steps

    async def _finish(self, turn: Turn, reply: Reply) -> None:
        status = "transferred" if reply.reason == "transfer" else None
        async with self.engine.connect() as conn:
            await store.finish_turn(await store.driver(conn), turn.conversation_id, self.holder, turn.next_seq,
                                    reply.content, reply.model, reply.notice, status,
                                    model_version=turn.target.version_id if reply.model else None)
        turn.next_seq += 1
        if status:
            turn.status = status
            await self._escalate(turn.conversation_id)
        overhead = max(0.0, time.perf_counter() - turn.started - turn.stats.model_seconds)
        TURN_OVERHEAD.observe(overhead)
        CHAT_TURNS.labels(reply.reason).inc()
        CHAT_TURNS_BY_VERSION.labels(turn.target.version_id or "unregistered", reply.reason).inc()

    async def _escalate(self, conversation_id: str) -> None:
        """A transferred conversation enters the ops escalation queue (with the customer's records
        as they are now). The customer already has their reply: a failure here is logged, not raised."""
        try:
            async with self.engine.begin() as conn:
                await escalations.enqueue(conn, conversation_id)
        except Exception:
            log.exception("chat.escalation_failed", conversation=conversation_id)

    def _tool_runner(self, turn: Turn):
        async def run_tool(call: ToolCallRequest | ToolStep, unread: ToolResult | None = None) -> ToolResult:
            """Run `call` and store it with its result, in one transaction with the store change it
            made; with `unread` (a call the model side could not read) only store that answer."""
            seq, name, arguments = turn.next_seq, call.name, call.arguments
            call_id = call.call_id if isinstance(call, ToolStep) else call.id
            async with self.engine.begin() as conn:
                tool = self.registry.get(name) if unread is None else None
                if tool is not None and not tool.read_only:  # a store change waits for its WAL flush
                    await conn.execute(SYNC_COMMIT)
                denied: list[DeniedCall] = []

                async def on_denied(refused: DeniedCall) -> None:
                    denied.append(refused)

                ctx = ToolContext(conn, principal=Principal.customer(turn.customer_user_id), on_denied=[on_denied])
                result = unread if unread is not None else await self.registry.call(ctx, name, arguments)
                bound = ctx.principal.user_id
                newly_bound = bound if bound is not None and bound != turn.customer_user_id else None
                await store.record_tool_step(conn, store.ToolStepRecord(
                    conversation_id=turn.conversation_id, seq=seq, call_id=call_id, name=name, arguments=arguments,
                    output=result.output, outcome=result.outcome, elapsed_ms=result.elapsed_ms,
                    model=turn.target.served_name, model_version=turn.target.version_id,
                    assistant_seq=turn.assistant_seq,
                    assistant=turn.pending_assistant.message if turn.pending_assistant is not None else None,
                    bind_user_id=newly_bound,
                    denied=[{"tool": d.tool, "arguments": d.arguments, "reason": d.reason,
                             "principal_user_id": d.principal_user_id} for d in denied],
                ))
            turn.pending_assistant = None
            if newly_bound is not None:
                turn.customer_user_id = newly_bound
                log.info("chat.customer_bound", conversation=turn.conversation_id, user=newly_bound)
            turn.next_seq += 1
            TOOL_CALLS.labels(name if name in self.registry else "<unknown>", result.outcome).inc()
            return result

        return run_tool

