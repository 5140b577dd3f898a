"""Does a paper-table model read the cancellation reason the customer gave?

For each cold-start conversation of a paper-table folder whose agent proposes a cancellation
("... with the reason '<reason>'"), the model is teacher-forced on the conversation up to the
reason (as the recipe's view shows it) and the probability of each reason's first token is read.
A model that reads the customer puts most of its mass on the customer's reason; one that does not
puts the same mass on each whatever the customer said. Printed per reason the customer gave, for
each model asked, side by side.
Usage: .venv/bin/python bench/reason_probe.py --out DIR [--models cold_start,mua_rl] [--limit 400] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

from rl.policies.wording import REASON_LEAD as MARK
from rl.tasks.goals import REASONS as CUSTOMER_WORDS

REASONS = tuple(CUSTOMER_WORDS)  # the cancellation reasons the tool accepts


def probe(out: Path, model_name: str, limit: int) -> dict[str, dict[str, float]]:
    from rl.chat.format import render_conversation
    from rl.coldstart.sft import read_records
    from rl.experiment.recipe import ExperimentRecipe
    from rl.models.tiny import load_model_folder

    recipe = ExperimentRecipe.model_validate_json((out / "recipe.json").read_text())
    records = read_records(out / "coldstart" / "filtered.jsonl")
    view = recipe.view_with_names(records)
    model, tok, _ = load_model_folder(out / "models" / model_name)
    model.eval()
    first = {r: tok.encode("'" + r, add_special_tokens=False)[1] for r in REASONS}
    seen: dict[str, list[list[float]]] = {r: [] for r in REASONS}
    for rec in records[:limit]:
        shown = view.record(rec)
        msgs, tools = shown["messages"], shown["tools"]
        for i, m in enumerate(msgs):
            text = m.get("content") or ""
            if m["role"] != "assistant" or MARK not in text:
                continue
            gold = next((r for r in REASONS if MARK + r in text), None)
            if gold is None:
                break
            prefix = text[: text.index(MARK) + len(MARK)]
            rendered = render_conversation(msgs[:i] + [{"role": "assistant", "content": prefix}], tools)
            rendered = rendered[: rendered.rindex(prefix) + len(prefix)]
            ids = tok.encode(rendered, add_special_tokens=False)
            with torch.no_grad():
                p = torch.softmax(model(torch.tensor([ids])).logits[0, -1], -1)
            seen[gold].append([float(p[first[r]]) for r in REASONS])
            break
    return {gold: {"n": len(v), **{f"p({r})": round(statistics.fmean(x[j] for x in v), 3)
                                   for j, r in enumerate(REASONS)}}
            for gold, v in seen.items() if v}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="a paper-table folder")
    ap.add_argument("--models", default="cold_start", help="comma-separated model names under DIR/models")
    ap.add_argument("--limit", type=int, default=400, help="cold-start conversations to read")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(2)
    result = {name: probe(a.out, name, a.limit) for name in a.models.split(",") if name}
    if a.json:
        print(json.dumps(result))
        return
    print(f"{'model':14s} {'customer said':20s} {'n':>4s} " + " ".join(f"p({r})" for r in REASONS))
    for name, rows in result.items():
        for gold, row in rows.items():
            print(f"{name:14s} {gold:20s} {row['n']:4d} " + " ".join(
                f"{row[f'p({r})']:{len(r) + 3}.2f}" for r in REASONS))


if __name__ == "__main__":
    main()
