"""Why a paper-table model's plain address changes fail: its greedy episodes of `modify_address`
tasks, read against each task's expected call.

Per model and evaluation customer: episodes, passed, episodes that called
`modify_pending_order_address` on the right order, those whose call got every field right but
`address2`, calls that wrote an empty `address2` where the address has one, and confirmations that
stated the new address's first line as the customer gave it (the scripted customers accept a
proposal only when it names it). The episodes must still be in the folder (a run's own `var/run`
folder; committed results keep only summaries).

With `--teacher-forced N`, each model is also teacher-forced on up to N cold-start conversations that
change an address (as the recipe's view shows them) and the probability it gives the teacher's first
token of `address2` and of an empty value are read: split by whether the address has a second line, it says whether the
model writes the line when the conversation before the call is right.

Usage: .venv/bin/python bench/address_calls.py --out DIR [--models cold_start,mua_rl_s0]
       [--teacher-forced 60] [--json]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

TOOL = "modify_pending_order_address"
FIELDS = ("address1", "address2", "city", "state", "zip", "country")


def _calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        for c in m.get("tool_calls") or []:
            if c["function"]["name"] == TOOL:
                args = c["function"]["arguments"]
                out.append(json.loads(args) if isinstance(args, str) else dict(args))
    return out


def read_episodes(out: Path, model: str, customer: str, gold: dict[str, dict[str, Any]]) -> dict[str, int]:
    from rl.experiment.plan import customer_folder

    path = out / "eval" / model / customer_folder(customer) / "greedy" / "episodes.jsonl"
    row = {"episodes": 0, "passed": 0, "right_order": 0, "all_but_address2": 0, "address2_dropped": 0,
           "confirmed_address1": 0}
    for line in path.read_text().splitlines():
        e = json.loads(line)
        want = gold.get(e["task_id"])
        if want is None:
            continue
        row["episodes"] += 1
        row["passed"] += int((e.get("reward") or 0) >= 1.0)
        agent = " ".join(m.get("content") or "" for m in e["messages"] if m["role"] == "assistant")
        row["confirmed_address1"] += int(want["address1"] in agent)
        calls = [c for c in _calls(e["messages"]) if c.get("order_id") == want["order_id"]]
        if not calls:
            continue
        row["right_order"] += 1
        last = calls[-1]
        if all(str(last.get(f, "")) == str(want[f]) for f in FIELDS if f != "address2"):
            row["all_but_address2"] += 1
        if want["address2"] and not last.get("address2"):
            row["address2_dropped"] += 1
    return row


def teacher_forced(out: Path, model_name: str, limit: int) -> dict[str, dict[str, float]]:
    """Mean probability of the teacher's first `address2` token, by whether the address has one."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rl.coldstart.sft import read_records
    from rl.experiment.recipe import ExperimentRecipe
    from rl.grpo.trace import trace_from_messages

    recipe = ExperimentRecipe.model_validate_json((out / "recipe.json").read_text())
    records = read_records(out / "coldstart" / "filtered.jsonl")
    view = recipe.view_with_names(records)
    tok = AutoTokenizer.from_pretrained(out / "models" / model_name)
    model = AutoModelForCausalLM.from_pretrained(out / "models" / model_name).eval()
    probs: dict[str, list[float]] = {"with a second line": [], "without": []}
    empty: dict[str, list[float]] = {"with a second line": [], "without": []}
    # an empty value closes at once: with spaced values the space and the closing quote (one token)
    close = tok.encode(' ",' if view.spaced_values else '",', add_special_tokens=False)
    for r in records:
        calls = _calls(r["messages"])
        if not calls:
            continue
        shown = view.record(r)
        trace = trace_from_messages(tok, shown["messages"], shown.get("tools"))
        ids, text = trace.input_ids, ""
        for i, token in enumerate(ids[:-1]):
            text += tok.decode([token])
            # the call's own `address2` (generated), not the tool list's description of it
            if text.endswith('"address2": "') and trace.loss_mask[i + 1]:
                with torch.no_grad():
                    logits = model(torch.tensor([ids[: i + 1]])).logits[0, -1]
                dist = torch.softmax(logits.float(), -1)
                split = "with a second line" if calls[0].get("address2") else "without"
                probs[split].append(float(dist[ids[i + 1]]))
                empty[split].append(float(dist[close[0]]) if len(close) == 1 else float("nan"))
                break
        if sum(len(v) for v in probs.values()) >= limit:
            break
    return {k: {"n": len(v), "p_teacher_token": sum(v) / len(v) if v else float("nan"),
                "p_empty": sum(empty[k]) / len(v) if v else float("nan")} for k, v in probs.items()}


def main() -> None:
    from rl.experiment.recipe import ExperimentRecipe
    from rl.grpo.batches import task_kind
    from rl.tasks.schema import load_tasks

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="a paper-table folder with its episodes")
    ap.add_argument("--models", default="cold_start,mua_rl_s0,mua_rl_s1")
    ap.add_argument("--teacher-forced", type=int, default=0, metavar="N")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    recipe = ExperimentRecipe.model_validate_json((a.out / "recipe.json").read_text())
    gold = {}
    for t in load_tasks(a.out / "tasks" / f"{recipe.eval_set}.json"):
        goals = t.script.goals if t.script else []
        if task_kind(t) == "modify_address" and goals and goals[0].action is not None:
            gold[t.id] = goals[0].action.arguments
    models = [m for m in a.models.split(",") if (a.out / "eval" / m).is_dir()]
    res: dict[str, Any] = {c: {m: read_episodes(a.out, m, c, gold) for m in models} for c in recipe.eval_customers}
    if a.teacher_forced:
        res["teacher_forced"] = {m: teacher_forced(a.out, m, a.teacher_forced) for m in models
                                 if (a.out / "models" / m).is_dir()}
    if a.json:
        print(json.dumps(res, indent=1))
        return
    print(f"{len(gold)} modify_address tasks of the {recipe.eval_set} set, greedy episodes\n")
    cols = ("episodes", "passed", "right_order", "all_but_address2", "address2_dropped", "confirmed_address1")
    for customer in recipe.eval_customers:
        rows = res[customer]
        print(f"## {customer} customer\n\n| model | {' | '.join(cols)} |\n|---|{'---|' * len(cols)}")
        for m, r in rows.items():
            print(f"| {m} | {' | '.join(str(r[c]) for c in cols)} |")
        print()
    for m, split in res.get("teacher_forced", {}).items():
        cells = ", ".join(f"{k} (n={v['n']}): teacher's token {v['p_teacher_token']:.3f}, empty value "
                          f"{v['p_empty']:.3f}" for k, v in split.items())
        print(f"teacher-forced {m}, address2's first token: {cells}")


if __name__ == "__main__":
    main()
