"""What the task side needs to know about the retail tools without importing the database layer:
which calls write, and which order/user argument a write acts on."""

from __future__ import annotations

WRITE_TOOLS = frozenset({
    "cancel_pending_order",
    "modify_pending_order_address",
    "modify_pending_order_payment",
    "modify_pending_order_items",
    "modify_user_address",
    "return_delivered_order_items",
    "exchange_delivered_order_items",
})
IDENTITY_TOOLS = frozenset({"find_user_id_by_email", "find_user_id_by_name_zip"})
TERMINAL_TOOLS = frozenset({"transfer_to_human_agents"})

# goal kind -> the write tool that serves it
KIND_TOOL = {
    "cancel": "cancel_pending_order",
    "modify_address": "modify_pending_order_address",
    "modify_payment": "modify_pending_order_payment",
    "modify_items": "modify_pending_order_items",
    "user_address": "modify_user_address",
    "return": "return_delivered_order_items",
    "exchange": "exchange_delivered_order_items",
}
TOOL_KIND = {v: k for k, v in KIND_TOOL.items()}
