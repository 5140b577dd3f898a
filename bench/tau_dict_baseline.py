"""The in-memory baseline for bench/env_bench.py: tau-bench's way of resetting and rewarding.

The store is three JSON documents reloaded from disk on every reset; write tools mutate the
dicts (`tests/backend/tools/upstream_reference.py`, our own model of the tau1 retail
semantics as restated in docs/REFERENCE.md, with Python floats like upstream); the reward hashes the whole data
(sha256 of `str()` of a sorted-tuple form), reloads, replays the gold actions and hashes again.
Nothing here is used by muarl itself; it exists to be measured against.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

Data = dict[str, dict[str, Any]]


def load_data(retail_dir: Path) -> Data:
    """tau-bench's reset: read users, orders and products from disk."""
    return {name: json.loads((retail_dir / f"{name}.json").read_text()) for name in ("users", "orders", "products")}


def to_hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, to_hashable(v)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(to_hashable(v) for v in value)
    return value


def data_hash(data: Data) -> str:
    return hashlib.sha256(str(to_hashable(data)).encode()).hexdigest()


# ------------------------------------------------------------------ write tools on dicts


# The dict-based tools are the test suite's independent model of tau-bench's semantics (the
# same one the differential test checks our Postgres tools against): one model, two uses.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.backend.tools.upstream_reference import call as step  # noqa: E402


def reward(current: Data, retail_dir: Path, gold_actions: list[dict[str, Any]]) -> float:
    """tau-bench's reward: hash the final data, reload, replay the gold actions, hash again."""
    got = data_hash(current)
    gold = load_data(retail_dir)
    for action in gold_actions:
        if action["name"] != "transfer_to_human_agents":
            step(gold, action["name"], action["kwargs"])
    return 1.0 if data_hash(gold) == got else 0.0
