"""Request plumbing shared by the routes, as named `Annotated` dependencies so route
signatures read like prose: the settings, the database engine, the chat service, the
conversation a customer's bearer token opens, the model registry, and the ops-token guard
for ops endpoints (`RequireOps`: the ops actor's name, or 401 without the token, 403 with a
wrong one, 503 when MUARL_OPS_TOKEN is not set)."""

from __future__ import annotations

import hmac
import re
from typing import Annotated

from fastapi import Depends, Header, Path, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.api import conversation_store as store
from backend.api.chat import ChatService
from backend.api.problems import Problem, shown
from backend.config import Settings
from backend.serving.registry import ModelRegistry

_bearer = HTTPBearer(auto_error=False, description="The conversation token returned when it was started")
_ops_bearer = HTTPBearer(auto_error=False, scheme_name="OpsToken", description="MUARL_OPS_TOKEN")


async def _settings(request: Request) -> Settings:
    return request.app.state.settings


async def _engine(request: Request) -> AsyncEngine:
    return request.app.state.engine


async def _chat(request: Request) -> ChatService:
    return request.app.state.chat


SettingsDep = Annotated[Settings, Depends(_settings)]
EngineDep = Annotated[AsyncEngine, Depends(_engine)]
ChatDep = Annotated[ChatService, Depends(_chat)]
ConversationId = Annotated[str, Path(description="The conversation id returned when it was started")]
Credentials = Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]


_TOKEN_CACHE_SIZE = 100_000
_token_hashes: dict[str, str] = {}
# what a conversation id can look like (ours are 32 hex digits); anything else cannot name one, so it
# never reaches the database (a NUL byte there is an error, not a miss)
_CONVERSATION_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")


def no_conversation(conversation_id: str) -> Problem:
    return Problem(404, f"There is no conversation {shown(conversation_id)}.")


async def _customer_conversation(conversation_id: ConversationId, engine: EngineDep,
                                 credentials: Credentials) -> store.ConversationRow:
    if not _CONVERSATION_ID.fullmatch(conversation_id):
        raise no_conversation(conversation_id)
    if credentials is None or not credentials.credentials:
        raise Problem(401, "Send the conversation's token as 'Authorization: Bearer <token>'.",
                      headers={"WWW-Authenticate": "Bearer"})
    token_hash = _token_hashes.get(conversation_id)  # ids and token hashes never change: cache them
    if token_hash is None:
        async with engine.connect() as conn:
            found = await store.get_conversation(await store.driver(conn), conversation_id)
        if found is not None:
            token_hash = found.token_hash
            if len(_token_hashes) >= _TOKEN_CACHE_SIZE:
                _token_hashes.clear()
            _token_hashes[conversation_id] = token_hash
    if token_hash is None:
        raise no_conversation(conversation_id)
    if not store.token_matches(credentials.credentials, token_hash):
        raise Problem(403, "This token does not open this conversation.")
    return store.ConversationRow(conversation_id, token_hash, status=None, customer_user_id=None)


CustomerConversation = Annotated[store.ConversationRow, Depends(_customer_conversation)]


async def _registry(request: Request) -> ModelRegistry:
    return request.app.state.chat.resolver.registry


RegistryDep = Annotated[ModelRegistry, Depends(_registry)]


async def _require_ops_token(
    settings: SettingsDep, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_ops_bearer)],
    actor: Annotated[str | None, Header(alias="X-Ops-Actor", description="who acts (recorded in events)")] = None,
) -> str:
    if not settings.ops_token:
        raise Problem(503, "Ops endpoints are disabled: set MUARL_OPS_TOKEN to enable them.")
    if credentials is None or not credentials.credentials:
        raise Problem(401, "Ops endpoints need 'Authorization: Bearer <MUARL_OPS_TOKEN>'.",
                      headers={"WWW-Authenticate": "Bearer"})
    if not hmac.compare_digest(credentials.credentials.encode(), settings.ops_token.encode()):
        raise Problem(403, "This token is not the ops token (MUARL_OPS_TOKEN).")
    name = (actor or "").strip()[:100]
    return f"ops:{name}" if name else "ops"


RequireOps = Annotated[str, Depends(_require_ops_token)]
OpsAccess = RequireOps  # the name earlier ops code used
