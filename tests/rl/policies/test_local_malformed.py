"""A malformed tool call written by a local model reaches the model again as the parse error (the
agent step answers it without calling any tool), and the conversation goes on."""

from backend.agent.llm import Completion
from rl.env import GoldStateCache, SandboxPool, create_snapshot, drop_snapshot
from rl.env.episode import EpisodeLimits, run_episode
from rl.policies.local import MALFORMED_TOOL, reply_message
from rl.simulator.scripted import ScriptedCustomer
from rl.tasks.generator import generate_tasks

BAD = '<tool_call>\n{"name": "get_order_details", "arguments": {"order_id": }\n</tool_call>'


class _Writes:
    """An agent that writes fixed texts, parsed exactly as the local policy parses generations."""

    name = model = "fixed-text"

    def __init__(self, texts):
        self.texts = texts

    def session(self, task, seed):
        texts = iter(self.texts)

        class S:
            name = "fixed-text"

            async def complete(self, messages, tools):
                return Completion.from_message(reply_message(next(texts, "Goodbye."), "c"), "fixed-text")
        return S()


async def test_malformed_call_is_answered_with_the_parse_error(test_dbs, tau_retail):
    task = generate_tasks(tau_retail, 1, 0, snapshot="tau-retail", categories=["cancel"])[0]
    snap = await create_snapshot(test_dbs.server_url, tau_retail, name=f"{test_dbs.prefix}_malformed")
    try:
        async with SandboxPool(snap, size=1) as pool, pool.sandbox() as sb:
            traj = await run_episode(task, _Writes([BAD, "Could you give me your email?"]), ScriptedCustomer(), sb,
                                     cache=GoldStateCache(), limits=EpisodeLimits(max_turns=6))
    finally:
        await drop_snapshot(snap)
    assert traj.excluded is None, traj.error
    first_call = traj.tool_calls[0]
    assert first_call.name == MALFORMED_TOOL and not first_call.ok
    assert first_call.output.startswith("Error: malformed tool call: not valid JSON")
    tool_msg = next(m for m in traj.messages if m["role"] == "tool")
    assert tool_msg["content"] == first_call.output and "<tool_call>" in tool_msg["content"]
    assert traj.messages[traj.messages.index(tool_msg) + 1]["content"] == "Could you give me your email?"


def test_a_malformed_call_keeps_what_the_model_wrote():
    msg = reply_message(BAD, "c")
    [call] = msg["tool_calls"]
    assert call["function"]["name"] == MALFORMED_TOOL
    assert call["raw"] == '{"name": "get_order_details", "arguments": {"order_id": }'
