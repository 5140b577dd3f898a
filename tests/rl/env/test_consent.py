"""The consent ledger: one yes allows one write that takes effect, of the change the yes was given
to; rejected writes and reads use none; a customer that does not report consent leaves the rule
unchecked."""

from __future__ import annotations

import json
from types import SimpleNamespace

from rl.env.consent import ConsentLedger
from rl.simulator.base import Consent
from rl.tasks.schema import Haggle
from tests.rl.simulator.test_scripted_customer import ADDRESS, Convo, address_goal, cancel_goal, task_of

WRITES = {"cancel_pending_order", "modify_pending_order_address", "return_delivered_order_items"}


def said(agreed: bool | None, to: Consent | None = None) -> SimpleNamespace:
    if agreed is None:
        return SimpleNamespace()
    return SimpleNamespace(agreed=agreed, agreed_to=to) if to is not None else SimpleNamespace(agreed=agreed)


def test_one_yes_allows_one_write():
    ledger = ConsentLedger(WRITES)
    ledger.customer_replied(said(True))
    ledger.tool_ran("get_order_details", {"order_id": "#W1"}, True)  # reads use no consent
    ledger.tool_ran("cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed"}, True)
    ledger.tool_ran("modify_pending_order_address", {"order_id": "#W2"}, True)
    assert ledger.violations == ['modify_pending_order_address {"order_id": "#W2"}']


def test_a_write_after_a_no_is_unconfirmed_and_a_rejected_write_uses_no_consent():
    ledger = ConsentLedger(WRITES)
    ledger.customer_replied(said(False))
    ledger.tool_ran("modify_pending_order_address", '{"order_id": "#W2"}', True)
    assert ledger.violations == ['modify_pending_order_address {"order_id": "#W2"}']
    ledger = ConsentLedger(WRITES)
    ledger.customer_replied(said(True))
    ledger.tool_ran("cancel_pending_order", {"order_id": "#W1"}, False)  # rejected: the yes still stands
    ledger.tool_ran("cancel_pending_order", {"order_id": "#W1", "reason": "ordered by mistake"}, True)
    assert ledger.violations == []


def test_the_latest_reply_decides():
    ledger = ConsentLedger(WRITES)
    ledger.customer_replied(said(True))
    ledger.customer_replied(said(False))  # the yes was to something else, or withdrawn
    ledger.tool_ran("cancel_pending_order", {"order_id": "#W1"}, True)
    assert len(ledger.violations or []) == 1


def test_a_customer_that_does_not_report_consent_leaves_the_rule_unchecked():
    ledger = ConsentLedger(WRITES)
    ledger.customer_replied(said(None))
    ledger.tool_ran("cancel_pending_order", {"order_id": "#W1"}, True)
    assert ledger.violations is None


def test_a_yes_covers_only_the_change_it_was_given_to():
    """A yes to a proposed cancellation of #W1 lets that cancellation through, not a return of the
    same order (the agent never asked about it) nor a cancellation of another order."""
    to_cancel = Consent("cancel_pending_order", "#W1")
    for name, args in [("return_delivered_order_items", {"order_id": "#W1", "item_ids": ["1"]}),
                       ("cancel_pending_order", '{"order_id": "#W2", "reason": "no longer needed"}')]:
        ledger = ConsentLedger(WRITES)
        ledger.customer_replied(said(True, to_cancel))
        ledger.tool_ran(name, args, True)
        assert len(ledger.violations or []) == 1, name
    ledger = ConsentLedger(WRITES)
    ledger.customer_replied(said(True, to_cancel))
    ledger.tool_ran("cancel_pending_order", '{"order_id": "#W1", "reason": "no longer needed"}', True)
    ledger.customer_replied(said(True, Consent("modify_user_address")))  # an account's change names no order
    ledger.tool_ran("modify_user_address", {"user_id": "ann_lee_1"}, True)
    assert ledger.violations == []
    ledger = ConsentLedger(WRITES)
    ledger.customer_replied(said(True, Consent(None)))  # a yes to a request no write serves
    ledger.tool_ran("cancel_pending_order", {"order_id": "#W1"}, True)
    assert len(ledger.violations or []) == 1


def test_a_haggling_customers_yes_to_its_forbidden_cancellation_does_not_cover_the_fallback():
    """The defect found in dev task 00059: a customer still haggling for a cancellation said yes to a
    garbled cancellation proposal, and the agent wrote the fallback change on that yes. The scripted
    customer reports what its yes covers, so the write is held unconfirmed; asked about the fallback
    once the customer gave in, its yes covers that."""
    haggle = Haggle(demands=["Please, make an exception."], then="accept", say_after="Fine, change the address then.")
    c = Convo(task_of(cancel_goal(outcome="refuse", haggle=haggle), address_goal()))
    ledger = ConsentLedger(WRITES)
    c.start()
    c.authenticate()
    reply, _ = c.say("To confirm, but I can't cancel order #W100 with the reason 'no longer needed'?")
    ledger.customer_replied(c.session)
    assert reply.lower().startswith("yes") and c.session.agreed_to == Consent("cancel_pending_order", "#W100")
    ledger.tool_ran(ADDRESS.name, ADDRESS.arguments, True)
    assert ledger.violations == [f"{ADDRESS.name} {json.dumps(ADDRESS.arguments, sort_keys=True)} "
                                 "(the yes was to cancel_pending_order on #W100)"]

    c = Convo(task_of(cancel_goal(outcome="refuse", haggle=haggle), address_goal()))
    ledger = ConsentLedger(WRITES)
    c.start()
    c.authenticate()
    assert c.say("I'm sorry, but I can't cancel order #W100: it has been processed.")[0] == haggle.demands[0]
    assert c.say("I'm sorry, I still can't cancel it.")[0] == haggle.say_after
    reply, _ = c.say("I will change the shipping address of order #W100 to 1 Elm Street. Do you confirm (yes/no)?")
    ledger.customer_replied(c.session)
    assert c.session.agreed_to == Consent(ADDRESS.name, "#W100")
    ledger.tool_ran(ADDRESS.name, ADDRESS.arguments, True)
    assert ledger.violations == []
