"""Customer conversations: start one, send a message and get the agent's reply (whole, or
step by step as server-sent events), read the transcript. A conversation's token opens it;
customers can only read their own conversations."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import structlog
from fastapi import APIRouter, Request, Response
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field, field_validator
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.agent.loop import AssistantStep, Reply, ToolStep
from backend.api import conversation_store as store
from backend.api import quotas
from backend.api.chat import ChatService, Turn
from backend.api.deps import ChatDep, CustomerConversation, EngineDep, SettingsDep
from backend.api.problems import problem_responses
from backend.config import Settings

log = structlog.get_logger(__name__)

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])

# turns run as tasks of their own (a client that goes away does not cut a turn in half);
# this keeps them referenced until they finish
_running: set[asyncio.Task[Any]] = set()


def _in_background(coro: Any) -> asyncio.Task[Any]:
    task = asyncio.ensure_future(coro)
    _running.add(task)

    def _done(t: asyncio.Task[Any]) -> None:
        _running.discard(t)
        if not t.cancelled() and t.exception() is not None:
            log.error("chat.turn_failed", error=repr(t.exception()))

    task.add_done_callback(_done)
    return task


class ConversationStarted(BaseModel):
    id: str
    token: str = Field(description="Bearer token for this conversation's other endpoints; shown only once")


class CustomerMessage(BaseModel):
    content: str = Field(min_length=1, description="What the customer says")

    @field_validator("content")
    @classmethod
    def _printable(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be blank")
        if "\x00" in value:
            raise ValueError("must not contain NUL characters")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("must be valid Unicode text") from None
        return value


class ToolCallSummary(BaseModel):
    name: str
    outcome: str


class AgentReply(BaseModel):
    conversation_id: str
    reply: str
    model: str | None = Field(description="The served name of the model version that answered")
    model_version: str | None = Field(default=None, description="The registry version that answered")
    notice: bool = Field(description="True when the reply is a service notice rather than the agent's words")
    ended_by: str = Field(description="answer | transfer | llm_unavailable | step_limit | empty")
    status: str
    tool_calls: list[ToolCallSummary]


class TranscriptMessage(BaseModel):
    seq: int
    role: str
    content: str
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None
    model: str | None = None
    model_version: str | None = Field(default=None, description="The registry version that wrote it")
    notice: bool = False
    created_at: str


class Transcript(BaseModel):
    id: str
    status: str
    authenticated: bool
    messages: list[TranscriptMessage]


# the errors each route can answer (all problem JSON; see backend.api.problems)
_MESSAGE_ERRORS = problem_responses(401, 403, 404, 409, 413, 422, 429, 500, 503)


async def _take_message_quota(content: str, chat: ChatService, engine: AsyncEngine, settings: Settings,
                              request: Request) -> None:
    """Refuse what `begin_turn` would refuse anyway (no model, too long) before counting the message."""
    chat.check_message(content)
    if quotas.limit_of(settings, "messages") > 0:
        async with engine.connect() as conn:
            await quotas.take(await store.driver(conn), settings, quotas.client_of(request, settings), "messages")


@router.post("", status_code=201, response_model=ConversationStarted,
             responses=problem_responses(413, 429, 500, 503))
async def start_conversation(engine: EngineDep, settings: SettingsDep, request: Request,
                             response: Response) -> ConversationStarted:
    """Start a conversation; keep the token, it opens the conversation's other endpoints."""
    async with engine.connect() as conn:
        pg = await store.driver(conn)
        await quotas.take(pg, settings, quotas.client_of(request, settings), "conversations")
        conversation_id, token = await store.create_conversation(pg)
    response.headers["Location"] = f"/v1/conversations/{conversation_id}"
    return ConversationStarted(id=conversation_id, token=token)


@router.post("/{conversation_id}/messages", response_model=AgentReply, responses=_MESSAGE_ERRORS)
async def send_message(conv: CustomerConversation, message: CustomerMessage, chat: ChatDep, engine: EngineDep,
                       settings: SettingsDep, request: Request, response: Response) -> AgentReply:
    """Send the customer's message; the agent's reply is in `reply`."""
    await _take_message_quota(message.content, chat, engine, settings, request)
    turn = await chat.begin_turn(conv, message.content, getattr(request.state, "request_started", None))
    reply, steps = await asyncio.shield(_in_background(chat.answer(turn)))
    response.headers["Server-Timing"] = _server_timing(turn)
    return AgentReply(conversation_id=conv.id, reply=reply.content, model=reply.model,
                      model_version=turn.target.version_id if reply.model else None, notice=reply.notice,
                      ended_by=reply.reason, status=turn.status,
                      tool_calls=[ToolCallSummary(name=s.name, outcome=s.result.outcome) for s in steps])


@router.post("/{conversation_id}/messages/stream",
             responses={200: {"content": {"text/event-stream": {}},
                              "description": "events: tool_call, tool_result, reply, done"}, **_MESSAGE_ERRORS})
async def stream_message(conv: CustomerConversation, message: CustomerMessage, chat: ChatDep, engine: EngineDep,
                         settings: SettingsDep, request: Request) -> StreamingResponse:
    """Send the customer's message and follow the agent's work as server-sent events."""
    await _take_message_quota(message.content, chat, engine, settings, request)
    turn = await chat.begin_turn(conv, message.content, getattr(request.state, "request_started", None))
    queue: asyncio.Queue[tuple[str, dict[str, Any]] | None] = asyncio.Queue()

    async def produce() -> None:
        try:
            async for event in chat.run_turn(turn):
                queue.put_nowait(_sse_event(event, turn))
        except Exception:
            queue.put_nowait(("error", {"detail": "Something went wrong on our side; please try again."}))
            raise
        finally:
            queue.put_nowait(None)

    _in_background(produce())

    async def events() -> AsyncIterator[str]:
        while (item := await queue.get()) is not None:
            name, data = item
            yield f"event: {name}\ndata: {json.dumps(data)}\n\n"
        yield f"event: done\ndata: {json.dumps({'status': turn.status})}\n\n"

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


@router.get("/{conversation_id}", response_model=Transcript, responses=problem_responses(401, 403, 404, 422, 500, 503))
async def read_transcript(conv: CustomerConversation, engine: EngineDep) -> Transcript:
    """The whole conversation: customer messages, the agent's tool calls and results, its replies."""
    async with engine.connect() as conn:
        pg = await store.driver(conn)
        current = await store.get_conversation(pg, conv.id)
        rows = await store.load_messages(pg, conv.id)
    assert current is not None
    messages = [TranscriptMessage(**{**r, "created_at": r["created_at"].isoformat()}) for r in rows]
    return Transcript(id=conv.id, status=current.status or "open",
                      authenticated=current.customer_user_id is not None, messages=messages)


def _sse_event(event: AssistantStep | ToolStep | Reply, turn: Turn) -> tuple[str, dict[str, Any]]:
    if isinstance(event, AssistantStep):
        calls = [{"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
                 for c in event.message["tool_calls"]]
        return "tool_call", {"content": event.message["content"], "tool_calls": calls, "model": event.model}
    if isinstance(event, ToolStep):
        return "tool_result", {"id": event.call_id, "name": event.name, "outcome": event.result.outcome,
                               "output": event.result.output}
    return "reply", {"conversation_id": turn.conversation_id, "reply": event.content, "model": event.model,
                     "model_version": turn.target.version_id if event.model else None,
                     "notice": event.notice, "ended_by": event.reason}


def _server_timing(turn: Turn) -> str:
    total = (time.perf_counter() - turn.started) * 1000.0
    model = turn.stats.model_seconds * 1000.0
    return f"overhead;dur={max(0.0, total - model):.3f}, model;dur={model:.3f}"
