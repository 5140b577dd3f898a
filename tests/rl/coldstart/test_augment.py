"""Identifier augmentation: fresh ids and names, the same replacement everywhere, nothing else touched."""

import json
import random

from rl.coldstart.augment import augment_record, augmented_copies, customer_names

RECORD = {
    "tools": [{"name": "find_user_id_by_name_zip"}],
    "meta": {"task_id": "t1", "reward": 1.0},
    "messages": [
        {"role": "system", "content": "You are a store agent."},
        {"role": "user", "content": "Hi, cancel order #W8520591. I'm James Lee, zip 95161."},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "find_user_id_by_name_zip",
            "arguments": json.dumps({"first_name": "James", "last_name": "Lee", "zip": "95161"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "james_lee_5010"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c2", "type": "function", "function": {
            "name": "get_order_details", "arguments": {"order_id": "#W8520591"}}}]},
        {"role": "tool", "tool_call_id": "c2",
         "content": '{"order_id":"#W8520591","status":"pending","items":[{"item_id":"9494281769","name":"E-Reader"}]}'},
        {"role": "assistant", "content": "Cancel #W8520591 (E-Reader 9494281769) for James Lee? (yes/no)"},
    ],
}


def _text(record):
    return json.dumps(record["messages"])


def test_finds_the_customer_name_in_a_lookup_or_a_user_id():
    assert customer_names(RECORD) == ("James", "Lee")
    by_id = {"messages": [{"role": "tool", "content": "olivia_smith_1234"}]}
    assert customer_names(by_id) == ("Olivia", "Smith")
    assert customer_names({"messages": [{"role": "user", "content": "hello"}]}) is None


def test_every_identifier_is_replaced_the_same_way_everywhere():
    out = augment_record(RECORD, random.Random(3))
    text = _text(out)
    for old in ("8520591", "95161", "5010", "9494281769", "James", "james", "Lee"):
        assert old not in text
    user = out["messages"][1]["content"]
    order_id = user.split("order ")[1].split(".")[0]
    assert order_id.startswith("#W") and len(order_id) == len("#W8520591")
    call = json.loads(out["messages"][2]["tool_calls"][0]["function"]["arguments"])
    assert call["zip"] in user and f"{call['first_name']} {call['last_name']}" in user
    assert out["messages"][3]["content"] == f"{call['first_name'].lower()}_{call['last_name'].lower()}_" + \
        out["messages"][3]["content"].rsplit("_", 1)[1]
    assert out["messages"][4]["tool_calls"][0]["function"]["arguments"] == {"order_id": order_id}
    assert order_id in out["messages"][5]["content"] and order_id in out["messages"][6]["content"]
    assert "E-Reader" in out["messages"][6]["content"] and "You are a store agent." in text
    assert out["meta"] == {**RECORD["meta"], "augmented": True} and out["tools"] == RECORD["tools"]
    assert RECORD["messages"][1]["content"].startswith("Hi, cancel order #W8520591")  # input untouched


def test_copies_differ_from_each_other_and_are_reproducible():
    copies = augmented_copies([RECORD], 4, seed=7)
    assert len({_text(c) for c in copies}) == 4
    assert [_text(c) for c in copies] == [_text(c) for c in augmented_copies([RECORD], 4, seed=7)]


def test_a_reason_counterfactual_swaps_only_the_customers_reason_and_the_agents():
    from rl.coldstart.augment import reason_counterfactual, reason_counterfactuals
    from rl.tasks.goals import REASONS

    said = "Cancel it, I ordered it by mistake."
    rec = {"tools": [], "meta": {"task_id": "t"}, "messages": [
        {"role": "system", "content": "Cancel with a reason: no longer needed or ordered by mistake."},
        {"role": "user", "content": said},
        {"role": "assistant", "content": "To confirm, I will cancel order #W1, reason: ordered by mistake. (yes/no)?"},
        {"role": "user", "content": "Yes."},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "type": "function", "function": {
            "name": "cancel_pending_order",
            "arguments": json.dumps({"order_id": "#W1", "reason": "ordered by mistake"})}}]},
        {"role": "tool", "tool_call_id": "c", "content": '{"order_id": "#W1", "status": "cancelled"}'}]}
    out = reason_counterfactual(rec, REASONS)
    m = out["messages"]
    assert m[0] == rec["messages"][0]  # the system prompt lists both reasons: unchanged
    assert m[1]["content"] == "Cancel it, I no longer need it."
    assert m[2]["content"] == "To confirm, I will cancel order #W1, reason: no longer needed. (yes/no)?"
    call = json.loads(m[4]["tool_calls"][0]["function"]["arguments"])
    assert call == {"order_id": "#W1", "reason": "no longer needed"}
    assert m[3] == rec["messages"][3] and m[5] == rec["messages"][5]
    assert out["meta"] == {"task_id": "t", "counterfactual": "reason"} and rec["messages"][1]["content"] == said
    assert reason_counterfactual(out, REASONS)["messages"] == rec["messages"]  # swapping twice is the original
    assert reason_counterfactuals([RECORD, rec], REASONS) == [out]  # no cancellation: no counterfactual
