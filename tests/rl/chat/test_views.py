"""The tiny recipe's chat view: a subset of compact tool schemas and compact tool results."""

import json

from rl.chat.views import FULL_VIEW, ChatView, compact_result

ORDER = {"order_id": "#W1", "user_id": "u1", "address": {"city": "Austin"}, "status": "pending",
         "items": [{"name": "Lamp", "product_id": "p1", "item_id": "111", "price": 9.5, "options": {"color": "red"}}],
         "fulfillments": [], "payment_history": [{"transaction_type": "payment", "amount": 9.5,
                                                  "payment_method_id": "paypal_1"},
                                                 {"transaction_type": "refund", "amount": 9.5,
                                                  "payment_method_id": "gift_card_2"}]}
TOOLS = [{"type": "function", "function": {"name": n, "description": "long words " * 20, "parameters": {
    "type": "object", "properties": {"order_id": {"type": "string"},
                                     "item_ids": {"type": "array", "items": {"type": "string"}}}}}}
         for n in ("get_order_details", "calculate")]


def test_compact_order_keeps_what_an_agent_acts_on():
    out = json.loads(compact_result(json.dumps(ORDER)))
    assert out == {"order_id": "#W1", "status": "pending", "items": [{"item_id": "111", "name": "Lamp"}],
                   "paid_with": ["paypal_1"]}
    assert compact_result("Error: order not found") == "Error: order not found"
    user = {"name": {"first_name": "A", "last_name": "B"}, "email": "a@b", "payment_methods": {"paypal_1": {}},
            "orders": ["#W1"], "address": {}}
    assert json.loads(compact_result(json.dumps(user))) == {"name": "A B", "payment_methods": ["paypal_1"],
                                                            "orders": ["#W1"]}


def test_view_filters_tools_and_rewrites_only_tool_messages():
    view = ChatView(tools=("get_order_details",), compact_schemas=True, compact_results=True)
    assert view.tool_list(TOOLS) == [{"name": "get_order_details",
                                      "parameters": {"order_id": "string", "item_ids": "array[string]"}}]
    msgs = [{"role": "user", "content": json.dumps(ORDER)}, {"role": "tool", "content": json.dumps(ORDER)}]
    shown = view.messages(msgs)
    assert shown[0] == msgs[0] and len(shown[1]["content"]) < len(msgs[1]["content"]) / 2
    assert FULL_VIEW.tool_list(TOOLS) == TOOLS and FULL_VIEW.messages(msgs) == msgs
