"""Cold-start data: trajectories from the real tools (pipeline a) as JSONL records of OpenAI-style
messages + tools, and the quality filter every record must pass before SFT.

Record: `{"messages": [...], "tools": [...], "meta": {"source", "task_id", "reward", "tags", ...}}`.
Pipeline (a) plays tasks with an agent (the oracle, or any `AgentPolicy`) against a simulated
customer on sandboxes through the episode runner, exactly as RL does. The filter keeps only
successful, policy-clean trajectories: reward 1, not excluded, every tool call names a known tool
with arguments that parse and no call was refused or malformed, and every write was preceded by the
agent asking and the customer confirming (the last customer message before the write is an
affirmative reply to an assistant message); when an LLM judge has looked at a record
(rl/coldstart/synthetic.py `judge_records`), its verdict must be yes.

A proposal the customer answered and the agent then replaced with another proposal (the teacher's
corrections, rl/coldstart/teacher.py) is marked `"train": false`: SFT keeps it as context, outside
the loss, so the student learns to propose again after a no, never to make the wrong proposal.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from pathlib import Path
from typing import Any

from rl.chat.replies import AFFIRMATIVE


def record_from_trajectory(traj: Any, tools: list[dict[str, Any]], source: str) -> dict[str, Any]:
    messages = [{k: v for k, v in m.items() if k in ("role", "content", "tool_calls", "tool_call_id", "name")}
                for m in traj.messages]
    return mark_retracted_proposals({
        "messages": messages, "tools": tools,
        "meta": {"source": source, "task_id": traj.task_id, "reward": traj.reward, "tcr": traj.tcr,
                 "tags": traj.tags, "excluded": traj.excluded, "policy": traj.policy, "user": traj.user,
                 "turns": traj.turns}})


def is_proposal(message: dict[str, Any]) -> bool:
    """An agent message that asks the customer to confirm a change (the policy's "(yes/no)" form)."""
    return message.get("role") == "assistant" and not message.get("tool_calls") \
        and "(yes/no)" in str(message.get("content") or "")


def mark_retracted_proposals(record: dict[str, Any]) -> dict[str, Any]:
    """`record` with `"train": false` on every proposal whose answer the agent met with another
    proposal (customer reply in between, no tool call), and their count in `meta.retracted_proposals`."""
    msgs = [dict(m) for m in record["messages"]]
    marked = 0
    for i in range(len(msgs) - 2):
        if is_proposal(msgs[i]) and msgs[i + 1].get("role") == "user" and is_proposal(msgs[i + 2]):
            msgs[i]["train"] = False
            marked += 1
    if not marked:
        return record
    return {**record, "messages": msgs, "meta": {**record.get("meta", {}), "retracted_proposals": marked}}


def quality_problems(record: dict[str, Any], write_tools: set[str]) -> list[str]:
    """Why a record is not fit for SFT (empty list: keep it)."""
    meta = record.get("meta", {})
    problems = []
    if meta.get("excluded"):
        problems.append(f"excluded: {meta['excluded']}")
    if meta.get("reward") != 1.0:
        problems.append("reward is not 1")
    judge = meta.get("judge")
    if judge is not None and not judge.get("ok"):
        problems.append("judge rejected")
    known = {t.get("function", t)["name"] for t in record.get("tools", [])}
    msgs = record["messages"]
    for i, m in enumerate(msgs):
        if m["role"] == "tool" and str(m.get("content", "")).startswith("Error: unknown tool"):
            problems.append("unknown tool called")
        if m["role"] != "assistant":
            continue
        for call in m.get("tool_calls") or []:
            fn = call.get("function", {})
            name, args = fn.get("name"), fn.get("arguments", {})
            if name not in known:
                problems.append(f"unknown tool {name!r}")
            if isinstance(args, str):
                try:
                    args = json.loads(args)
                except ValueError:
                    problems.append(f"arguments of {name} are not JSON")
            if name in write_tools and not _confirmed_before(msgs, i):
                problems.append(f"{name} without confirmation")
    return problems


def _confirmed_before(msgs: list[dict[str, Any]], index: int) -> bool:
    for j in range(index - 1, -1, -1):
        m = msgs[j]
        if m["role"] == "user":
            asked = j > 0 and msgs[j - 1]["role"] == "assistant" and not msgs[j - 1].get("tool_calls")
            return asked and bool(AFFIRMATIVE.search(str(m.get("content") or "")))
    return False


def filter_records(records: list[dict[str, Any]], write_tools: set[str]) -> tuple[list[dict[str, Any]], Counter]:
    kept, why = [], Counter()
    for r in records:
        problems = quality_problems(r, write_tools)
        if problems:
            why.update(p.split(" ", 1)[0] if p.startswith("excluded") else p for p in problems)
        else:
            kept.append(r)
    return kept, why


def write_jsonl(records: list[dict[str, Any]], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records))
    tmp.rename(path)
    return path


async def collect_real_tool_trajectories(tasks: list[Any], policy: Any, user: Any, pool: Any, cache: Any, *,
                                         trials: int = 1, concurrency: int = 16,
                                         source: str = "real_tools") -> list[dict[str, Any]]:
    """Pipeline (a): play every task `trials` times on sandboxes; one record per episode."""
    from backend.tools.registry import RETAIL
    from rl.env.episode import run_episode
    from rl.env.gold import ensure_tools_registered

    ensure_tools_registered()
    sem = asyncio.Semaphore(concurrency)
    tools = RETAIL.openai_schemas()

    async def one(task: Any, k: int) -> dict[str, Any]:
        async with sem, pool.sandbox() as sandbox:
            traj = await run_episode(task, policy, user, sandbox, cache=cache, trial=k, seed=k)
        return record_from_trajectory(traj, tools, source)

    return list(await asyncio.gather(*(one(t, k) for t in tasks for k in range(trials))))


def write_tool_names() -> set[str]:
    from backend.tools.registry import RETAIL, ToolKind
    from rl.env.gold import ensure_tools_registered

    ensure_tools_registered()
    return {t.name for t in RETAIL if t.kind is ToolKind.WRITE}
