"""The cold-start teacher on real sandboxes: it asks before it relies on a fact the customer has not
said, and it recognises a fact in any wording of the varied (or, told so, the wide) training customer,
so its data asks the same questions whichever training customer plays (and passes the filter)."""

from __future__ import annotations

import json
import re

import pytest

from rl.chat.call_grammar import ToolCallGrammar
from rl.chat.proposal_template import TRIGGER
from rl.chat.views import ChatView
from rl.coldstart.data import collect_real_tool_trajectories, filter_records, is_proposal, write_tool_names
from rl.coldstart.teacher import QUESTIONS, TeacherPolicy
from rl.env import SandboxPool, create_snapshot, drop_snapshot
from rl.env.gold import GoldStateCache
from rl.models.tokenizer import train_bpe
from rl.simulator.scripted import ScriptedCustomer
from rl.simulator.varied import VariedCustomer
from rl.simulator.wide import WideCustomer
from rl.tasks.generator import generate_tasks


def _questions(record) -> list[str]:
    asked = set(QUESTIONS.values())
    return [m["content"] for m in record["messages"] if m["role"] == "assistant" and m.get("content") in asked]


async def _play(test_dbs, tau_retail, tasks, name: str, *players) -> list[list[dict]]:
    """The records of each (teacher, customer) pair playing `tasks` once, on one fresh snapshot."""
    snap = await create_snapshot(test_dbs.server_url, tau_retail, name=f"{test_dbs.prefix}_{name}")
    try:
        async with SandboxPool(snap, size=4) as pool:
            cache = GoldStateCache()
            return [await collect_real_tool_trajectories(tasks, teacher, customer, pool, cache)
                    for teacher, customer in players]
    finally:
        await drop_snapshot(snap)


async def test_the_teacher_asks_the_same_questions_of_either_training_customer(test_dbs, tau_retail):
    kinds = ["cancel", "modify_address", "return", "info_status", "shift_modify_address_cancel", "haggle_cancel",
             "multi_cancel_return", "exchange"]
    tasks = generate_tasks(tau_retail, 24, 5, snapshot="tau-retail", categories=kinds)
    plain, varied, wide = await _play(test_dbs, tau_retail, tasks, "teacher_snap",
                                      (TeacherPolicy(), ScriptedCustomer()), (TeacherPolicy(), VariedCustomer()),
                                      (TeacherPolicy(wordings=WideCustomer.wordings), WideCustomer()))
    by_task = {r["meta"]["task_id"]: r for r in plain}
    assert len(varied) == len(wide) == len(plain) == len(tasks)
    for records in (varied, wide):
        differ = [(r["meta"]["task_id"], _questions(by_task[r["meta"]["task_id"]]), _questions(r)) for r in records
                  if _questions(r) != _questions(by_task[r["meta"]["task_id"]])]
        assert differ == []
        assert sum(len(_questions(r)) for r in records) > 0  # it does ask where the customer held a fact back
        kept, why = filter_records(records, write_tool_names())
        assert len(kept) == len(records), why
    # the customers did word things differently
    said = [[m["content"] for m in r["messages"] if m["role"] == "user"] for r in (*plain, *varied)]
    assert said[: len(plain)] != said[len(plain):]


@pytest.mark.parametrize("quiet", [0.0, 1.0])
async def test_corrections_put_a_wrong_proposal_first_and_keep_it_out_of_the_loss(test_dbs, tau_retail, quiet):
    """With corrections the teacher's first proposal is wrong, the customer says no, and the teacher
    proposes the right change before it writes; the wrong proposal is marked out of the loss. A quiet
    customer refuses the other cancellation reason without its own, and the teacher still switches."""
    kinds = ["cancel", "modify_address", "return", "multi_cancel_cancel"]
    tasks = generate_tasks(tau_retail, 12, 3, snapshot="tau-retail", categories=kinds)
    [records] = await _play(test_dbs, tau_retail, tasks, "teacher_fix",
                            (TeacherPolicy(corrections=1.0), VariedCustomer(quiet_reasons=quiet)))
    kept, why = filter_records(records, write_tool_names())
    assert len(kept) == len(records), why
    reason_refusals = 0
    for r in records:
        msgs = r["messages"]
        wrong = [i for i, m in enumerate(msgs) if m.get("train") is False]
        assert r["meta"]["retracted_proposals"] == len(wrong) == 1, r["meta"]
        i = wrong[0]
        assert "(yes/no)" in msgs[i]["content"] and "(yes/no)" in msgs[i + 2]["content"]
        assert msgs[i]["content"] != msgs[i + 2]["content"]
        # worded alike (rl/policies/wording.py `proposal`): only the action tells them apart
        for m in (msgs[i], msgs[i + 2]):
            said = m["content"]
            assert said.startswith("To confirm, I will ") and said.endswith(". Do you confirm (yes/no)?")
        assert not is_proposal(msgs[i + 3]) and msgs[i + 3]["role"] == "user"  # the yes is to the right one
        if "cancel" in r["meta"]["task_id"].rsplit("-", 1)[-1] and "with the reason" in msgs[i]["content"]:
            refusal = msgs[i + 1]["content"]
            assert (refusal in ("No, that's not the reason.", "That's not my reason.")) == (quiet == 1.0), refusal
            reason_refusals += 1
        # nothing was written between the wrong proposal and the right one
        assert not any(m.get("tool_calls") for m in msgs[i:i + 3])
    assert reason_refusals > 0
    plain = TeacherPolicy(corrections=0.0)
    assert all(not plain.session(t, 0).wrong_first for t in tasks)
    some = TeacherPolicy(corrections=0.5)
    drawn = [some.session(t, 0).wrong_first for t in tasks]
    assert drawn == [some.session(t, 5).wrong_first for t in tasks]  # per task, not per trial
    assert 0 < sum(drawn) < len(tasks)


async def test_the_teacher_names_items_with_options_by_product_or_by_reference_and_every_task_passes(
        test_dbs, tau_retail):
    # without options: for a student whose view shows an order's items by id and name only; by
    # reference: for one whose view names them by their `<num_K>` (rl/chat/views.py `item_refs`)
    kinds = ["return", "haggle_cancel", "exchange", "multi_cancel_return", "late_return"]
    tasks = generate_tasks(tau_retail, 15, 5, snapshot="tau-retail", categories=kinds)
    full, named, refs = await _play(test_dbs, tau_retail, tasks, "teacher_names",
                                    (TeacherPolicy(), VariedCustomer()),
                                    (TeacherPolicy(item_options=False), VariedCustomer()),
                                    (TeacherPolicy(item_refs=True), VariedCustomer()))
    for records in (full, named, refs):
        kept, why = filter_records(records, write_tool_names())
        assert len(kept) == len(records) == len(tasks), why

    def return_proposals(records):
        return [m["content"] for r in records for m in r["messages"]
                if m["role"] == "assistant" and is_proposal(m) and " return the " in m["content"]]

    assert return_proposals(full) and all("(" in p.split(" from order")[0] for p in return_proposals(full))
    assert return_proposals(named) and not any("(" in p.split(" from order")[0] for p in return_proposals(named))
    assert return_proposals(refs) and all(re.search(r"return the [A-Z][^(]* \(item \d{10}\)", p)
                                          for p in return_proposals(refs))
    # exchanges still name the new variant's options: they are all that tells it from the old item
    for records in (named, refs):
        swaps = [m["content"] for r in records for m in r["messages"]
                 if m["role"] == "assistant" and is_proposal(m) and " exchange the " in m["content"]]
        assert swaps and all(" for the " in p and "(" in p.split(" for the ", 1)[1] for p in swaps)
    # a view with item references shows each returned item as the reference its order lookup gave it
    view = ChatView(compact_schemas=True, compact_results=True, refs=True, item_refs=True)
    for record in refs:
        shown = view.messages(record["messages"])
        for m in shown:
            if m["role"] == "assistant" and " return the " in (m.get("content") or ""):
                assert re.match(r"To confirm, I will return the <num_\d+>( and the <num_\d+>)* from order <order_\d+>",
                                m["content"]), m["content"]


async def test_with_said_order_the_teachers_address_calls_follow_the_customers_sentence(test_dbs, tau_retail):
    kinds = ["modify_address", "user_address", "shift_modify_address_cancel"]
    tasks = generate_tasks(tau_retail, 6, 5, snapshot="tau-retail", categories=kinds)
    plain, said = await _play(test_dbs, tau_retail, tasks, "teacher_said_order",
                              (TeacherPolicy(), VariedCustomer()), (TeacherPolicy(said_order=True), VariedCustomer()))

    def address_calls(records):
        return [json.loads(c["function"]["arguments"]) for r in records for m in r["messages"]
                if m["role"] == "assistant" for c in m.get("tool_calls") or ()
                if c["function"]["name"] in ("modify_pending_order_address", "modify_user_address")]

    for records in (plain, said):
        kept, why = filter_records(records, write_tool_names())
        assert len(kept) == len(records) == len(tasks), why
    fields = ["address1", "address2", "city", "state", "zip", "country"]
    assert len(address_calls(said)) == len(address_calls(plain)) >= 4
    assert all([k for k in call if k in fields] == fields for call in address_calls(said))
    assert not any([k for k in call if k in fields] == fields for call in address_calls(plain))
    # the same calls, values and all: only the order of the fields differs
    assert address_calls(said) == address_calls(plain)


async def test_with_payment_refs_the_teachers_refunds_name_the_method_the_view_shows_as_its_reference(
        test_dbs, tau_retail):
    kinds = ["return", "haggle_cancel", "multi_cancel_return", "refuse_refund_card"]
    tasks = generate_tasks(tau_retail, 12, 5, snapshot="tau-retail", categories=kinds)
    plain, refs = await _play(test_dbs, tau_retail, tasks, "teacher_payment_refs",
                              (TeacherPolicy(), VariedCustomer()), (TeacherPolicy(payment_refs=True), VariedCustomer()))
    for records in (plain, refs):  # the customer recognises the refund's method in both wordings
        kept, why = filter_records(records, write_tool_names())
        assert len(kept) == len(records) == len(tasks), why

    def refunds(records):
        return [m["content"] for r in records for m in r["messages"]
                if m["role"] == "assistant" and is_proposal(m) and "with the refund going to" in m["content"]]

    assert len(refunds(refs)) == len(refunds(plain)) >= 6
    assert all(re.search(r"refund going to your .+ \((credit_card|paypal|gift_card)_\d+\)\.", p) for p in refunds(refs))
    assert not any(re.search(r"\((credit_card|paypal)_\d+\)", p) for p in refunds(plain))
    # the view shows each as the reference the return call writes
    view = ChatView(compact_schemas=True, compact_results=True, refs=True, payment_refs=True)
    matched = 0
    for record in refs:
        shown = view.messages(record["messages"])
        said = [m["content"] for m in shown
                if m["role"] == "assistant" and "with the refund going to" in (m["content"] or "")]
        called = [json.loads(c["function"]["arguments"])["payment_method_id"] for m in shown
                  for c in m.get("tool_calls") or () if c["function"]["name"] == "return_delivered_order_items"]
        for text in said:
            assert re.search(r"refund going to your <payment_\d+>\.", text), text
        if said and called:
            assert said[-1].split("your ")[-1].split(".")[0] == called[-1]
            matched += 1
    assert matched >= 4


@pytest.mark.parametrize("item_refs", [False, True])
async def test_every_proposal_the_teacher_makes_is_whole_in_the_proposal_templates(test_dbs, tau_retail, item_refs):
    """What a view with `proposal_template` holds a model to (rl/chat/proposal_template.py) is what
    the teacher says, in every kind of change, as the model reads it."""
    kinds = ["cancel", "modify_address", "user_address", "return", "haggle_cancel", "exchange", "modify_items",
             "modify_payment", "multi_cancel_return"]
    tasks = generate_tasks(tau_retail, 18, 9, snapshot="tau-retail", categories=kinds)
    [records] = await _play(test_dbs, tau_retail, tasks, f"teacher_templates_{int(item_refs)}",
                            (TeacherPolicy(corrections=0.5, item_options=False, item_refs=item_refs,
                                           payment_refs=True), VariedCustomer()))
    view = ChatView(compact_schemas=True, compact_results=True, refs=True, item_refs=item_refs, payment_refs=True)
    tok = train_bpe(["x"], vocab_size=300, extra_tokens=view.extra_tokens)
    lookup = {"type": "function", "function": {"name": "get_order_details", "parameters": {
        "type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"}}}}}
    template = ToolCallGrammar([lookup], tok).proposal_template(payment_refs=True, item_refs=item_refs)
    proposals = [m["content"] for r in records for m in view.messages(r["messages"])
                 if m["role"] == "assistant" and TRIGGER in (m.get("content") or "")]
    kinds_said = {p.split()[4] for p in proposals}
    assert {"cancel", "change", "update", "return", "exchange", "modify"} <= kinds_said, kinds_said
    for p in proposals:
        state = template.consume(template.start(), p[p.index(TRIGGER) + len(TRIGGER):])
        assert state and template.done(state), p
