"""The task side's tool facts come from the registry: every goal kind names a registered write."""

from backend.tools.registry import ToolKind
from backend.tools.retail import RETAIL
from rl.tasks.tools_meta import IDENTITY_TOOLS, KIND_TOOL, TERMINAL_TOOLS, TOOL_KIND, WRITE_TOOLS


def test_tool_sets_match_the_registry():
    assert WRITE_TOOLS == {
        "cancel_pending_order", "modify_pending_order_address", "modify_pending_order_payment",
        "modify_pending_order_items", "modify_user_address", "return_delivered_order_items",
        "exchange_delivered_order_items"}
    assert IDENTITY_TOOLS == {"find_user_id_by_email", "find_user_id_by_name_zip"}
    assert TERMINAL_TOOLS == {"transfer_to_human_agents"}
    assert all(RETAIL.get(n).kind is ToolKind.READ for n in IDENTITY_TOOLS)


def test_every_write_serves_exactly_one_goal_kind():
    assert set(KIND_TOOL.values()) == WRITE_TOOLS
    assert len(TOOL_KIND) == len(KIND_TOOL)
