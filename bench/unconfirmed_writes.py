"""Writes the customer did not confirm: in a paper-table folder's greedy evaluation episodes, each
store write whose customer turn just before it does not answer a proposal affirmatively (the
cold-start filter's own test, rl/coldstart/data.py), per model and customer.

The reward reads only the final database, so a write made right after the customer said "No, that's
not the reason. It was ordered by mistake." passes when its arguments are right; the cold-start data
never writes unconfirmed (the filter drops such conversations), so these come from the models. Per
model: writes that took effect (a call the store rejected changed nothing and is not counted),
unconfirmed ones, episodes with one, how many of those earned reward 1, and the passes left if every
write had to be confirmed. The test is a word match ("sure" in "I'm not sure" reads as a yes) and
does not check that the yes answered a proposal of that very write: the counts are a lower bound.
Since code ef06dd7 the reward itself requires the yes and each episode's breakdown lists its
unconfirmed writes from the customer's own report (rl/env/consent.py): where it does, that list is
counted instead (exact), and no pass has one.

Usage: .venv/bin/python bench/unconfirmed_writes.py --out DIR [--models cold_start mua_rl_s0 ...] [--json]
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from compare_runs import mua_models


def count(path: Path) -> dict[str, Any]:
    from rl.coldstart.data import _confirmed_before, write_tool_names

    writes = write_tool_names()
    out: dict[str, Any] = {"episodes": 0, "passed": 0, "writes": 0, "unconfirmed_writes": 0,
                           "episodes_unconfirmed": 0, "passed_unconfirmed": 0, "strict_by_task": {}}
    for line in path.read_text().splitlines():
        e = json.loads(line)
        msgs = e["messages"]
        calls = [(i, c) for i, m in enumerate(msgs) if m.get("role") == "assistant" for c in m.get("tool_calls") or []]
        # the store's answer to each call, in order (a rejected write changed nothing: not counted)
        done = e.get("tool_calls") or []
        took = [bool(d.get("ok")) and not d.get("denied") for d in done] if len(done) == len(calls) else \
            [True] * len(calls)
        reported = (e.get("breakdown") or {}).get("unconfirmed_writes")
        unconfirmed = 0
        for (i, call), effective in zip(calls, took, strict=True):
            if call["function"]["name"] in writes and effective:
                out["writes"] += 1
                unconfirmed += reported is None and not _confirmed_before(msgs, i)
        if isinstance(reported, list):
            unconfirmed = len(reported)
        passed = e.get("reward") == 1.0
        out["episodes"] += 1
        out["passed"] += passed
        out["unconfirmed_writes"] += unconfirmed
        out["episodes_unconfirmed"] += unconfirmed > 0
        out["passed_unconfirmed"] += passed and unconfirmed > 0
        if not e.get("excluded"):
            out["strict_by_task"][e["task_id"]] = float(passed and unconfirmed == 0)
    return out


def strict_gain(res: dict[str, dict[str, dict[str, Any]]], customer: str,
                mua: list[str]) -> tuple[float, tuple[float, float]] | None:
    """The MUA-RL models' (`mua`, those of them in `res`) mean gain over the cold start in greedy
    pass^1 counted strictly (a pass with an unconfirmed write is a miss), with the paper table's interval."""
    from rl.eval.metrics import mean_difference_over_seeds

    seeds = [res[m][customer]["strict_by_task"] for m in mua if m in res]
    if "cold_start" not in res or not seeds:
        return None
    cold = res["cold_start"][customer]["strict_by_task"]
    common = [t for t in cold if all(t in s for s in seeds)]
    return mean_difference_over_seeds([{t: s[t] for t in common} for s in seeds], {t: cold[t] for t in common})


def evaluated_models(folder: Path) -> list[str]:
    """The models a paper-table folder evaluated, but the random base."""
    return sorted(p.name for p in (folder / "eval").iterdir() if p.is_dir() and p.name != "base")


def per_model_and_customer(folder: Path, models: list[str],
                           count_file: Callable[[Path], dict[str, Any]]) -> dict[str, dict[str, dict[str, Any]]]:
    """`count_file` of each model's greedy episodes with each customer: {model: {customer: counts}}."""
    res: dict[str, dict[str, dict[str, Any]]] = {}
    for model in models:
        for customer_dir in sorted(p for p in (folder / "eval" / model).iterdir() if p.is_dir()):
            path = customer_dir / "greedy" / "episodes.jsonl"
            if path.exists():
                res.setdefault(model, {})[customer_dir.name] = count_file(path)
    return res


def gold_arguments(folder: Path, tool: str) -> list[tuple[str, dict[str, Any]]]:
    """(task id, arguments) of every goal of the folder's evaluation tasks whose action is `tool`,
    in task order (refused goals included: their action is the forbidden call)."""
    eval_set = json.loads((folder / "recipe.json").read_text()).get("eval_set", "test")
    tasks = json.loads((folder / "tasks" / f"{eval_set}.json").read_text())["tasks"]
    return [(t["id"], g["action"]["arguments"]) for t in tasks for g in t["script"]["goals"]
            if (g.get("action") or {}).get("name") == tool]


def counts_from_cli(doc: str, count_file: Callable[[Path], dict[str, Any]]
                    ) -> dict[str, dict[str, dict[str, Any]]] | None:
    """The shared command line of the transcript counters: `--out DIR [--json]`; `count_file` of each
    model's greedy episodes with each customer, or None once `--json` has printed them."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res = per_model_and_customer(a.out, evaluated_models(a.out), count_file)
    if a.json:
        print(json.dumps(res, indent=1))
        return None
    return res


def print_strict_gains(res: dict[str, dict[str, dict[str, Any]]], folder: Path, counted: str) -> None:
    """Per customer, the MUA-RL gain over the cold start with the passes `strict_by_task` drops
    counted as misses (`counted` says which)."""
    for customer in next(iter(res.values()), {}):
        got = strict_gain(res, customer, mua_models(folder))
        if got is not None:
            gain, (lo, hi) = got
            print(f"\n{customer}: MUA-RL (mean over its seeds) minus cold start, {counted}: "
                  f"{gain * 100:+.1f} points [{lo * 100:+.1f}, {hi * 100:+.1f}]")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--models", nargs="+")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    res = per_model_and_customer(a.out, a.models or evaluated_models(a.out), count)
    if a.json:
        print(json.dumps(res, indent=1))
        return
    print("| model | customer | episodes (passed) | writes | unconfirmed writes | episodes with one | "
          "of them passed | passed, every write confirmed |\n|---|---|---|---|---|---|---|---|")
    for model, by_customer in res.items():
        for customer, c in by_customer.items():
            print(f"| {model} | {customer} | {c['episodes']} ({c['passed']}) | {c['writes']} | "
                  f"{c['unconfirmed_writes']} | {c['episodes_unconfirmed']} | {c['passed_unconfirmed']} | "
                  f"{c['passed'] - c['passed_unconfirmed']} |")
    print_strict_gains(res, a.out, "every write confirmed")


if __name__ == "__main__":
    main()
