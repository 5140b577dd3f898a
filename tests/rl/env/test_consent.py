"""The consent ledger: one yes allows one write that takes effect; rejected writes and reads use
none; a customer that does not report consent leaves the rule unchecked."""

from __future__ import annotations

from types import SimpleNamespace

from rl.env.consent import ConsentLedger

WRITES = {"cancel_pending_order", "modify_pending_order_address"}


def said(agreed: bool | None) -> SimpleNamespace:
    return SimpleNamespace(agreed=agreed) if agreed is not None else SimpleNamespace()


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
