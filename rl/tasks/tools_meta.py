"""What the task side knows about the store's tools: which calls write, which identify a customer
and which end a conversation, read from the tool registry (backend/tools/registry.py), plus the
one thing the registry does not record, which write serves each goal kind."""

from __future__ import annotations

from backend.tools.registry import ToolKind
from backend.tools.retail import RETAIL

WRITE_TOOLS = frozenset(t.name for t in RETAIL if t.kind is ToolKind.WRITE)
IDENTITY_TOOLS = frozenset(t.name for t in RETAIL if t.identifies_customer)
# tools the tool layer runs only once the conversation has identified its customer
NEEDS_CUSTOMER = frozenset(t.name for t in RETAIL if t.customer_data and not t.identifies_customer)
TERMINAL_TOOLS = frozenset(RETAIL.terminal_names())

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
