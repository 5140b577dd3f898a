"""An address's fields in the order a customer says them (rl/tasks/phrasing.py `in_said_order`)."""

from __future__ import annotations

import random

from rl.tasks.goals import new_address
from rl.tasks.phrasing import ADDRESS_SAID_ORDER, address_text, in_said_order


def test_an_address_call_lists_its_fields_in_the_order_of_the_customers_sentence():
    addr = new_address(random.Random(3))
    assert list(addr) != list(ADDRESS_SAID_ORDER)  # the task's own order puts the country before state and zip
    args = in_said_order({"order_id": "#W1", **addr})
    assert list(args) == ["order_id", *ADDRESS_SAID_ORDER]
    assert args == {"order_id": "#W1", **addr}  # the same values
    # each field's value comes later in the customer's sentence than the one before (empty lines aside)
    text = address_text(addr)
    starts = [text.index(args[k]) for k in ADDRESS_SAID_ORDER if args[k]]
    assert starts == sorted(starts)


def test_arguments_around_an_address_keep_their_places_and_other_calls_are_unchanged():
    args = in_said_order({"user_id": "u", "zip": "12345", "country": "USA", "address1": "1 Elm St", "note": "x"})
    assert list(args) == ["user_id", "address1", "zip", "country", "note"]
    plain = {"order_id": "#W1", "reason": "ordered by mistake"}
    assert in_said_order(plain) == plain and list(in_said_order(plain)) == list(plain)
