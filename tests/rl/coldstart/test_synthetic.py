"""Cold-start pipeline (b) against a fake OpenAI-compatible server playing the agent, the customer,
the tool simulator and the judge; records have pipeline (a)'s format and go through the same filter."""

import asyncio
import json

from backend.agent.llm import OpenAICompatibleModel
from rl.coldstart.data import filter_records, quality_problems
from rl.coldstart.synthetic import DomainSpec, SimulatedToolConversations, judge_records, synthesize
from tests.fakes.openai_server import FakeOpenAIServer, Step, text, tool_call

SPEC = DomainSpec(
    domain="bakery",
    policy="You are a bakery's agent. Confirm before cancelling a pre-order.",
    tools=[{"type": "function", "kind": "read", "function": {
                "name": "get_preorder", "description": "Look up a pre-order.",
                "parameters": {"type": "object", "properties": {"preorder_id": {"type": "string"}}}}},
           {"type": "function", "kind": "write", "function": {
                "name": "cancel_preorder", "description": "Cancel a pre-order.",
                "parameters": {"type": "object", "properties": {"preorder_id": {"type": "string"}}}}}],
    store={"preorders": {"P1": {"item": "sourdough", "status": "open"}}},
    scenarios=[{"instruction": "Cancel pre-order P1.", "opening": "Hi, please cancel my pre-order P1."}],
)


def responder(careful: bool):
    def answer(req):
        system = req["messages"][0]["content"]
        last = req["messages"][-1]
        if system.startswith("You simulate the tools"):
            assert '"P1"' in system  # the store is in the simulator's prompt
            call = last["content"].split("New call: ", 1)[1]
            if call.startswith("get_preorder"):
                return text('{"preorder_id": "P1", "item": "sourdough", "status": "open"}')
            return text('{"preorder_id": "P1", "status": "cancelled"}')
        if system.startswith("You are a customer"):
            said = req["messages"][-1]["content"]
            return text("Yes, please." if "confirm" in said.lower() else "Thanks! ###STOP###")
        if system.startswith("You judge"):
            return text("YES - cancelled after confirmation" if "confirm" in last["content"].lower() else "NO - no ask")
        # the agent
        n_tool = sum(m["role"] == "tool" for m in req["messages"])
        if last["role"] == "user" and n_tool == 0:
            return tool_call("get_preorder", {"preorder_id": "P1"})
        if last["role"] == "tool" and n_tool == 1:
            return text("Do you confirm cancelling pre-order P1 (yes/no)?") if careful else \
                tool_call("cancel_preorder", {"preorder_id": "P1"})
        if last["role"] == "user" and n_tool == 1:
            return tool_call("cancel_preorder", {"preorder_id": "P1"})
        if last["role"] == "tool":
            return text("Pre-order P1 is cancelled.")
        return Step(content="Anything else?")
    return answer


def _play(careful: bool):
    with FakeOpenAIServer(responder(careful)) as server:
        def model():
            return OpenAICompatibleModel(base_url=server.url, model="fake", max_retries=0)
        convs = SimulatedToolConversations(model(), model(), model(), judge=model())
        records = asyncio.run(synthesize(SPEC, convs))
        tool_requests = [r for r in server.requests if r["messages"][0]["content"].startswith("You simulate")]
    return records, tool_requests


def test_careful_agent_record_passes_filter_with_judge():
    records, tool_requests = _play(careful=True)
    assert len(records) == 1
    r = json.loads(json.dumps(records[0]))  # JSONL-safe
    assert [m["role"] for m in r["messages"]][:3] == ["system", "user", "assistant"]
    assert r["tools"][0] == {k: v for k, v in SPEC.tools[0].items() if k != "kind"}
    assert r["meta"]["source"] == "simulated_tools" and r["meta"]["ended_by"] == "user_stop"
    assert r["meta"]["judge"]["ok"] and r["meta"]["reward"] == 1.0
    # the second tool call is simulated with the first one's result in view
    assert "get_preorder" in tool_requests[1]["messages"][1]["content"].split("New call")[0]
    assert quality_problems(r, SPEC.tool_names("write")) == []


def test_hasty_agent_is_rejected_by_judge_and_filter():
    records, _ = _play(careful=False)
    kept, why = filter_records(records, SPEC.tool_names("write"))
    assert kept == [] and why["judge rejected"] == 1 and why["cancel_preorder without confirmation"] == 1


def test_judge_records_annotates_pipeline_a_records():
    rec = {"messages": [{"role": "system", "content": "p"}, {"role": "user", "content": "hi"},
                        {"role": "assistant", "content": "Done, I did not need to confirm."}],
           "tools": [], "meta": {"reward": 1.0, "instruction": "say hi"}}
    with FakeOpenAIServer(lambda req: text("NO - nothing was done")) as server:
        judge = OpenAICompatibleModel(base_url=server.url, model="fake", max_retries=0)
        asyncio.run(judge_records(judge, [rec], "policy"))
    assert rec["meta"]["judge"] == {"ok": False, "reason": "NO - nothing was done"}
    assert quality_problems(rec, set()) == ["judge rejected"]


def test_endpoint_failure_is_excluded_not_a_crash():
    with FakeOpenAIServer(lambda req: Step(status=500)) as server:
        m = OpenAICompatibleModel(base_url=server.url, model="fake", max_retries=0)
        records = asyncio.run(synthesize(SPEC, SimulatedToolConversations(m, m, m)))
    assert records[0]["meta"]["excluded"] == "llm_server_error"
    assert filter_records(records, set())[0] == []
