"""Reading a proposal through the records the conversation showed: kind words inside a record's
description do not count, and `states_action` recognises an action named in full (options in any
order) but not one with another order, item or payment method."""

from __future__ import annotations

import json

from rl.simulator.proposal import Records, states_action
from rl.tasks.phrasing import proposal_matches
from rl.tasks.schema import Action

ORDER = {"order_id": "#W100", "user_id": "ann_lee_1", "status": "delivered", "items": [
    {"item_id": "11", "name": "Headphones", "product_id": "p1",
     "options": {"style": "in-ear", "connectivity": "wired", "noise cancelling": "no", "color": "black"}},
    {"item_id": "21", "name": "Yoga Mat", "product_id": "p2", "options": {"thickness": "3 mm", "color": "black"}}]}
PRODUCT = {"name": "Headphones", "product_id": "p1", "variants": {
    "11": {"item_id": "11", "options": {"color": "black", "style": "in-ear", "connectivity": "wired",
                                        "noise cancelling": "no"}},
    "12": {"item_id": "12", "options": {"color": "black", "style": "on-ear", "connectivity": "wireless",
                                        "noise cancelling": "no"}},
    "13": {"item_id": "13", "options": {"color": "black", "style": "in-ear", "connectivity": "wireless",
                                        "noise cancelling": "no"}}}}
USER = {"user_id": "ann_lee_1", "orders": ["#W100", "#W200"], "payment_methods": {
    "credit_card_1": {"id": "credit_card_1", "source": "credit_card", "brand": "visa", "last_four": "8906"},
    "paypal_1": {"id": "paypal_1", "source": "paypal"}}}
RECORDS = Records.from_conversation([{"role": "tool", "content": json.dumps(r)} for r in (ORDER, PRODUCT, USER)]
                                    + [{"role": "tool", "content": "ann_lee_1"}])
RETURN = Action(name="return_delivered_order_items",
                arguments={"order_id": "#W100", "item_ids": ["11"], "payment_method_id": "credit_card_1"})
EXCHANGE = Action(name="exchange_delivered_order_items", arguments={
    "order_id": "#W100", "item_ids": ["11"], "new_item_ids": ["12"], "payment_method_id": "credit_card_1"})
RETURN_TEXT = ("To confirm, I will return the Headphones (color: black, style: in-ear, connectivity: wired, "
               "noise cancelling: no) from order #W100, with the refund going to your Visa card ending in 8906. "
               "Do you confirm (yes/no)?")


def test_kind_words_inside_record_descriptions_are_not_the_kind_of_the_proposal():
    # the cause of the false failures: "noise cancelling" read as a cancellation
    assert not proposal_matches(RETURN_TEXT, "return", ["#W100", "8906"])
    assert proposal_matches(RETURN_TEXT, "return", ["#W100", "8906"],
                            kind_text=RECORDS.outside_descriptions(RETURN_TEXT))
    hyphenated = RETURN_TEXT.replace("noise cancelling: no", "noise-cancelling: no")
    assert "cancel" not in RECORDS.outside_descriptions(hyphenated).lower()
    # a real cancellation is still read as one
    cancel = "To confirm, I will cancel order #W100 and return the refund. Do you confirm?"
    assert not proposal_matches(cancel, "return", ["#W100"], kind_text=RECORDS.outside_descriptions(cancel))


def test_kind_words_are_read_where_a_word_starts():
    assert proposal_matches("Shall I process the return of #W100 (it is uncancelable)?", "return", ["#W100"])
    assert proposal_matches("Shall I proceed with the return of #W100?", "return", ["#W100"])
    assert not proposal_matches("Shall I proceed with the cancellation of #W100?", "return", ["#W100"])


def test_states_action_in_full_whatever_the_order_of_options():
    assert states_action(RETURN_TEXT, RETURN, RECORDS)
    reordered = RETURN_TEXT.replace("color: black, style: in-ear, connectivity: wired, noise cancelling: no",
                                    "noise cancelling: no, connectivity: wired, style: in-ear, color: black")
    assert states_action(reordered, RETURN, RECORDS)
    exchange = ("To confirm, I will exchange the Headphones (color: black, style: in-ear, connectivity: wired, "
                "noise cancelling: no) from order #W100 for the Headphones (style: on-ear, color: black, "
                "connectivity: wireless, noise cancelling: no), settling any price difference with your Visa card "
                "ending in 8906. Do you confirm (yes/no)?")
    assert states_action(exchange, EXCHANGE, RECORDS)
    assert not states_action(exchange, RETURN, RECORDS)  # names a new item the return does not have


def test_states_action_not_when_another_record_or_an_argument_is_missing():
    assert not states_action(RETURN_TEXT.replace("8906", "1234"), RETURN, RECORDS)  # payment not named
    assert not states_action(RETURN_TEXT.replace("Visa card ending in 8906", "PayPal account"), RETURN, RECORDS)
    assert not states_action(RETURN_TEXT.replace("#W100", "#W200"), RETURN, RECORDS)
    assert not states_action(RETURN_TEXT.replace("from order #W100", "from order #W100 and #W200"), RETURN, RECORDS)
    both = RETURN_TEXT.replace(") from", ") and the Yoga Mat (thickness: 3 mm, color: black) from")
    assert not states_action(both, RETURN, RECORDS)  # an item the goal does not return
    other_variant = RETURN_TEXT.replace("connectivity: wired", "connectivity: wireless")
    assert not states_action(other_variant, RETURN, RECORDS)
    assert not states_action("Shall I return items from #W100 to your Visa card ending in 8906?", RETURN, RECORDS)
    assert not states_action(RETURN_TEXT, RETURN, Records())  # no records looked up: nothing recognised


def test_an_item_named_by_its_id_is_named():
    # the mention a view with item references expands into (rl/chat/views.py `item_mention`)
    text = ("To confirm, I will return the Headphones (item 11) from order #W100, with the refund going to your "
            "Visa card ending in 8906. Do you confirm (yes/no)?")
    assert RECORDS.named_items(text) == {"11"}
    assert states_action(text, RETURN, RECORDS)
    assert not states_action(text.replace("(item 11)", "(item 21)"), RETURN, RECORDS)
