"""The status slots of free text (rl/chat/status_answer.py): after "is currently" a looked-up
status, after "is already" (a refusal) the named order's status but "pending", and no "is already"
at all for an order with no other status."""

from rl.chat.status_answer import allowed_tokens as status_tokens
from rl.chat.status_answer import completing, refusal_done, refusal_slot
from rl.chat.status_answer import open_slot as status_slot


def test_a_status_slot_holds_what_the_lookups_showed():
    shown = frozenset({"cancelled", "pending"})
    assert status_slot("Order <order_1> is currently", shown) == ""
    assert status_slot("Order <order_1> is currently canc", shown) == " canc"
    assert status_slot("Order <order_1> is currently cancelled", shown) is None  # whole: free again
    assert status_slot("Order <order_1> is delivered", shown) is None
    texts = [" cancelled", " canc", "elled;", " delivered", " pending.", "x", None]
    assert [texts[i] for i in status_tokens("", shown, texts)] == [" cancelled", " canc", " pending."]
    assert [texts[i] for i in status_tokens(" canc", shown, texts)] == ["elled;"]


def test_a_refusal_slot_holds_the_named_orders_status():
    orders = {"<order_1>": "pending", "<order_2>": "processed"}
    assert refusal_slot("I can't: order <order_2> is already", orders) == ("", frozenset({"processed"}))
    assert refusal_slot("I can't: order <order_2> is already proc", orders) == (" proc", frozenset({"processed"}))
    assert refusal_slot("I can't: order <order_2> is already processed", orders) is None
    assert refusal_slot("I can't: order <order_1> is already", orders) is None  # pending: no status to give
    assert refusal_done("I can't: order <order_1> is alr", orders) == len("is alr")
    assert refusal_done("I can't: order <order_2> is alr", orders) is None
    assert refusal_done("Hello", {}) == 0  # nothing looked up: no refusal's status is known
    texts = ["eady", "ead", " already", "x", None]
    assert [texts[i] for i in completing(len("is alr"), texts)] == ["eady"]
    assert [texts[i] for i in completing(len("is"), texts)] == [" already"]
