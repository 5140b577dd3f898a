"""What a small local model is shown of a conversation: its tool list and its tool results.

A `ChatView` is part of a training recipe, applied the same way in SFT, GRPO rollouts and
evaluation, so the model always reads the layout it was trained on. The full view (the default)
passes everything through. The tiny recipe's view lists only the tools its task mix needs, as
compact schemas (names and parameter types, no descriptions), and shows tool results as compact
JSON with the fields an agent acts on (an order's id, status, items by id and name, and the payment
methods it was paid with; a customer's name, payment methods and orders), so a 2M-parameter model's
few hundred tokens of context go to the conversation. Tools still run on the real store; only the
model's view of their output is shortened.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rl.chat.format import compact_tools


@dataclass(frozen=True)
class ChatView:
    tools: tuple[str, ...] | None = None  # only these tools are listed (None: all)
    compact_schemas: bool = False
    compact_results: bool = False

    def tool_list(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.tools is not None:
            keep = set(self.tools)
            tools = [t for t in tools if t.get("function", t)["name"] in keep]
        return compact_tools(tools) if self.compact_schemas else tools

    def result(self, text: str) -> str:
        return compact_result(text) if self.compact_results else text

    def messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A recorded conversation as this view shows it (tool results shortened)."""
        if not self.compact_results:
            return messages
        return [{**m, "content": self.result(str(m.get("content") or ""))} if m.get("role") == "tool" else m
                for m in messages]


FULL_VIEW = ChatView()


def compact_result(text: str) -> str:
    """A tool result with only the fields an agent acts on (non-JSON text is returned as is)."""
    try:
        rec = json.loads(text)
    except ValueError:
        return text
    if not isinstance(rec, dict):
        return json.dumps(rec, separators=(",", ":"), ensure_ascii=False)
    if "order_id" in rec and "items" in rec:
        out: dict[str, Any] = {"order_id": rec["order_id"], "status": rec.get("status")}
        out["items"] = [{"item_id": i.get("item_id"), "name": i.get("name")} for i in rec.get("items", [])
                        if isinstance(i, dict)]
        out["paid_with"] = sorted({p.get("payment_method_id") for p in rec.get("payment_history", [])
                                   if isinstance(p, dict) and p.get("transaction_type") == "payment"})
        rec = out
    elif "payment_methods" in rec and "orders" in rec:
        name = rec.get("name") or {}
        rec = {"name": f"{name.get('first_name', '')} {name.get('last_name', '')}".strip(),
               "payment_methods": sorted(rec.get("payment_methods") or {}), "orders": rec.get("orders")}
    elif "variants" in rec and isinstance(rec["variants"], dict):
        rec = {"name": rec.get("name"), "product_id": rec.get("product_id"),
               "available": sorted(k for k, v in rec["variants"].items() if isinstance(v, dict) and v.get("available"))}
    return json.dumps(rec, separators=(",", ":"), ensure_ascii=False)
