"""Money rules of the corrected (default) mode, kept apart from the tools that use them."""

from __future__ import annotations

from decimal import Decimal
from typing import Any


def net_paid_by_method(history: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    """What each payment method has paid on an order and not yet got back, in order of first
    use: payments minus refunds per method."""
    net: dict[str, Any] = {}
    for entry in history:
        pm = entry["payment_method_id"]
        amount = entry["amount"]
        sign = 1 if entry["transaction_type"] == "payment" else -1
        net[pm] = net.get(pm, Decimal(0) if isinstance(amount, Decimal) else 0) + sign * amount
    return list(net.items())
