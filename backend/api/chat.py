"""One customer message, end to end: checks, serialization, the agent loop and persistence.

`ChatService.begin_turn` does everything that can refuse a message before any work starts
(no model configured -> 503, too long -> 413, transferred conversation -> 409, rate limit ->
429) and takes the conversation's turn: an in-process lock, then the database lease, so
concurrent messages to one conversation are answered one after the other even across
processes. It stores the customer's message and loads the history.
`ChatService.run_turn` then runs the agent loop and persists every step as it happens: the
assistant's tool-call message, and each tool call in the same transaction as the store
change it made, the conversation's customer binding and any audit rows for refused calls.
The authenticated customer is read from and written to the conversation row, so the binding
survives restarts. The lease is always released, whatever happens.
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
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.agent.llm import ChatModel, ToolCallRequest
from backend.agent.loop import AgentConfig, AgentEvent, AgentLoop, AssistantStep, Reply, ToolStep, TurnStats
from backend.api import conversation_store as store
from backend.api.metrics import CHAT_TURNS, TOOL_CALLS, TURN_OVERHEAD
from backend.api.problems import Problem
from backend.config import Settings
from backend.tools.context import DeniedCall, Principal, ToolContext
from backend.tools.registry import ToolRegistry, ToolResult

log = structlog.get_logger(__name__)

NO_MODEL = ("No language model is configured, so the agent cannot answer. Set MUARL_LLM_BASE_URL (an "
            "OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 for vLLM) and MUARL_LLM_MODEL (and "
            "MUARL_LLM_API_KEY if the endpoint needs one) in the environment or .env, then restart the service.")
LEASE_POLL_S = 0.05


@dataclass
class Turn:
    """A customer message being answered: the conversation's turn is held until `run_turn` ends."""

    conversation_id: str
    customer_user_id: str | None
    history: list[dict[str, Any]]
    next_seq: int
    started: float
    lock: asyncio.Lock
    stats: TurnStats = field(default_factory=TurnStats)
    status: str = "open"
    assistant_seq: int = 0  # the assistant message whose tool calls are being run


class ChatService:
    def __init__(self, engine: AsyncEngine, settings: Settings, model: ChatModel | None,
                 registry: ToolRegistry) -> None:
        self.engine = engine
        self.settings = settings
        self.model = model
        self.registry = registry
        config = AgentConfig(max_steps=settings.agent_max_steps,
                             tool_calls_per_step=settings.agent_tool_calls_per_step)
        self.agent = AgentLoop(model, registry, config) if model is not None else None
        self.holder = f"{socket.gethostname()[:30]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    # -- taking a turn -----------------------------------------------------------------

    def check_message(self, content: str) -> None:
        if self.agent is None:
            raise Problem(503, NO_MODEL, title="No model configured")
        limit = self.settings.api_max_message_chars
        if len(content) > limit:
            raise Problem(413, f"The message has {len(content)} characters; at most {limit} are accepted.")

    async def begin_turn(self, conv: store.ConversationRow, content: str, started: float | None = None) -> Turn:
        """Take the conversation's turn for `content` (`started`: when the request arrived)."""
        started = time.perf_counter() if started is None else started
        self.check_message(content)
        if conv.status == "transferred":
            raise Problem(409, "This conversation was handed to a human agent; start a new conversation.")
        lock = self._lock_for(conv.id)
        await lock.acquire()
        try:
            lease = await self._acquire_lease(conv.id)
            limit = self.settings.api_rate_limit_per_minute
            if lease.recent_user_messages >= limit:
                await self._release(conv.id)
                raise Problem(429, f"At most {limit} messages per minute are accepted in one conversation; "
                                   "please wait a moment.", headers={"Retry-After": "60"})
            try:
                async with self.engine.begin() as conn:
                    rows = await store.load_messages(conn, conv.id)
                    seq = (rows[-1]["seq"] if rows else 0) + 1
                    await store.append_message(conn, conv.id, seq, "user", content)
            except BaseException:
                await self._release(conv.id)
                raise
        except BaseException:
            self._unlock(conv.id, lock)
            raise
        history = [store.as_model_message(r) for r in rows if not r["notice"]]
        history.append({"role": "user", "content": store.clean_text(content)})
        return Turn(conv.id, lease.customer_user_id, history, seq + 1, started, lock, status=lease.status)

    async def _acquire_lease(self, conversation_id: str) -> store.Lease:
        deadline = time.monotonic() + self.settings.api_turn_lease_s
        while True:
            async with self.engine.begin() as conn:
                lease = await store.acquire_lease(conn, conversation_id, self.holder,
                                                  self.settings.api_turn_lease_s)
            if lease is not None:
                return lease
            if time.monotonic() > deadline:
                raise Problem(409, "Another message to this conversation is still being answered.")
            await asyncio.sleep(LEASE_POLL_S)

    async def _release(self, conversation_id: str, status: str | None = None) -> None:
        async with self.engine.begin() as conn:
            await store.release_lease(conn, conversation_id, self.holder, status)

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
        assert self.agent is not None
        reply: Reply | None = None
        try:
            async for event in self.agent.run_turn(turn.history, self._tool_runner(turn), turn.stats):
                if isinstance(event, AssistantStep):
                    async with self.engine.begin() as conn:
                        await store.append_message(conn, turn.conversation_id, turn.next_seq, "assistant",
                                                   event.message["content"], model=event.model,
                                                   tool_calls=event.message["tool_calls"])
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
        async with self.engine.begin() as conn:
            await store.append_message(conn, turn.conversation_id, turn.next_seq, "assistant", reply.content,
                                       model=reply.model, notice=reply.notice)
            await store.release_lease(conn, turn.conversation_id, self.holder, status)
        turn.next_seq += 1
        if status:
            turn.status = status
        overhead = max(0.0, time.perf_counter() - turn.started - turn.stats.model_seconds)
        TURN_OVERHEAD.observe(overhead)
        CHAT_TURNS.labels(reply.reason).inc()

    def _tool_runner(self, turn: Turn):
        async def run_tool(call: ToolCallRequest) -> ToolResult:
            seq, name, arguments = turn.next_seq, call.name, call.arguments
            async with self.engine.begin() as conn:
                denied: list[DeniedCall] = []

                async def on_denied(call: DeniedCall) -> None:
                    denied.append(call)

                ctx = ToolContext(conn, principal=Principal.customer(turn.customer_user_id), on_denied=[on_denied])
                result = await self.registry.call(ctx, name, arguments)
                for refused in denied:
                    await store.write_audit(conn, event="tool_denied", actor="customer", tool=refused.tool,
                                            arguments=refused.arguments, reason=refused.reason,
                                            conversation_id=turn.conversation_id,
                                            principal_user_id=refused.principal_user_id)
                bound = ctx.principal.user_id
                if bound is not None and bound != turn.customer_user_id:
                    await store.bind_customer(conn, turn.conversation_id, bound)
                    turn.customer_user_id = bound
                    log.info("chat.customer_bound", conversation=turn.conversation_id, user=bound)
                await store.append_message(conn, turn.conversation_id, seq, "tool", result.output,
                                           tool_call_id=call.id, name=name)
                await store.record_tool_call(conn, turn.conversation_id, turn.assistant_seq, call.id, name,
                                             arguments, result.output, result.outcome, result.elapsed_ms,
                                             turn.stats.models[-1] if turn.stats.models else None)
            turn.next_seq += 1
            TOOL_CALLS.labels(name if name in self.registry else "<unknown>", result.outcome).inc()
            return result

        return run_tool

