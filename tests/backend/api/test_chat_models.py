"""The chat service serves any `ChatModel`, not only an HTTP endpoint: with an in-process model (as a
local policy is) a call the model side could not read is answered with its error, stored in the
transcript like any call, and runs no tool."""

from __future__ import annotations

import httpx

from backend.agent.llm import Completion, ToolCallRequest
from tests.backend.api.serving import ApiServer, db_rows, start_chat

UNREAD = "Error: malformed tool call: not valid JSON"


class InProcess:
    name = "in-process"

    def __init__(self) -> None:
        self.completions = [
            Completion("", [ToolCallRequest("c1", "malformed_tool_call", "{}", error=UNREAD)], model="in-process"),
            Completion("Sorry, could you give me your email?", model="in-process"),
        ]
        self.seen: list[list[dict]] = []

    async def complete(self, messages, tools):
        self.seen.append(list(messages))
        return self.completions.pop(0)


async def test_an_in_process_model_and_an_unreadable_call(client: httpx.AsyncClient, api: ApiServer,
                                                         tau_db: str) -> None:
    model = InProcess()
    api.app.state.chat.model = model
    chat = await start_chat(client)
    reply = await chat.send("Hi, I need help with an order.")
    assert reply["reply"] == "Sorry, could you give me your email?" and reply["model"] == "in-process"
    assert reply["tool_calls"] == [{"name": "malformed_tool_call", "outcome": "error"}]
    assert model.seen[1][-1] == {"role": "tool", "tool_call_id": "c1", "content": UNREAD}
    roles = [(m["role"], m["content"]) for m in (await chat.transcript())["messages"]]
    assert roles[:3] == [("user", "Hi, I need help with an order."), ("assistant", ""), ("tool", UNREAD)]
    calls = await db_rows(tau_db, "SELECT name, output, outcome FROM conversation_tool_calls "
                                  "WHERE conversation_id = :c", c=chat.id)
    assert calls == [{"name": "malformed_tool_call", "output": UNREAD, "outcome": "error"}]
