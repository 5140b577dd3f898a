"""Why a paper-table model's plain address changes fail: its greedy episodes of `modify_address`
tasks, read against each task's expected call.

Per model and evaluation customer: episodes, passed, episodes that called
`modify_pending_order_address` on the right order, those whose call got every field but `address2`
right (whatever its `address2`), calls that wrote an empty `address2` where the address has one, and
episodes whose agent text states the new address's first line as the customer gave it (the scripted
customers decline a proposal that does not name it; the reward reads only the database, so an agent
that calls anyway can still pass). The episodes must still be in the folder (a run's own `var/run`
folder; committed results keep only summaries).

With `--replay`, each call that had to write a second line is re-read: the probability of an empty
`address2` as the episode was played, and with the agent's last confirmation before it replaced by
the teacher's (the new address in full) and the customer's answer by a plain yes.

With `--teacher-forced N`, each model is also teacher-forced on up to N cold-start conversations that
change an address (as the recipe's view shows them) and the probability it gives the teacher's first
token of `address2` and of an empty value are read: split by whether the address has a second line, it says whether the
model writes the line when the conversation before the call is right.

With `--routing`, each model is read where a conversation decides what it is about: at the agent's
first text after the first order lookup, the probability it gives the first token of the teacher's
question for a new address and of its question for a cancellation reason, on the cold-start
conversations that ask for a new address (teacher-forced) and on its own greedy episodes of the
`modify_address` tasks; beside it, the share of address conversations among those that ask either
question in the records SFT trains on (reason counterfactuals included), the prior a model that
does not read the customer's request would follow.

Usage: .venv/bin/python bench/address_calls.py --out DIR [--models cold_start,mua_rl_s0]
       [--replay] [--teacher-forced 60] [--routing] [--json]
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


def episodes_path(out: Path, model: str, customer: str) -> Path:
    """Where a paper-table run keeps a model's greedy episodes with one customer."""
    from rl.experiment.plan import customer_folder

    return out / "eval" / model / customer_folder(customer) / "greedy" / "episodes.jsonl"


def read_episodes(out: Path, model: str, customer: str, gold: dict[str, dict[str, Any]]) -> dict[str, int]:
    path = episodes_path(out, model, customer)
    row = {"episodes": 0, "passed": 0, "right_order": 0, "other_fields_right": 0, "address2_dropped": 0,
           "confirmed_address1": 0}
    for line in path.read_text().splitlines():
        e = json.loads(line)
        want = gold.get(e["task_id"])
        if want is None:
            continue
        row["episodes"] += 1
        row["passed"] += int((e.get("reward") or 0) >= 1.0)
        agent = " ".join(m.get("content") or "" for m in e["messages"] if m["role"] == "assistant")
        row["confirmed_address1"] += int(want["address1"].lower() in agent.lower())
        calls = [c for c in _calls(e["messages"]) if c.get("order_id") == want["order_id"]]
        if not calls:
            continue
        row["right_order"] += 1
        last = calls[-1]
        if all(str(last.get(f, "")) == str(want[f]) for f in FIELDS if f != "address2"):
            row["other_fields_right"] += 1
        if want["address2"] and not last.get("address2"):
            row["address2_dropped"] += 1
    return row


class _Model:
    """One model of a paper-table folder with the recipe's view, read at a call's `address2`."""

    def __init__(self, out: Path, name: str) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from rl.coldstart.sft import read_records
        from rl.experiment.recipe import ExperimentRecipe

        recipe = self.recipe = ExperimentRecipe.model_validate_json((out / "recipe.json").read_text())
        self.records = read_records(out / "coldstart" / "filtered.jsonl")
        self.view = recipe.view_with_names(self.records)
        self.tools = self.records[0].get("tools") or []
        self.tok = AutoTokenizer.from_pretrained(out / "models" / name)
        self.model = AutoModelForCausalLM.from_pretrained(out / "models" / name).eval()
        # an empty value closes at once: with spaced values the space and the closing quote (one token)
        close = self.tok.encode(' ",' if self.view.spaced_values else '",', add_special_tokens=False)
        self.close = close[0] if len(close) == 1 else None

    def at_address2(self, messages: list[dict[str, Any]]) -> tuple[float, float] | None:
        """At the last `address2` value the agent writes in `messages`: the probability of the token
        written there and of an empty value; None when the tokens do not split at the value."""
        import torch

        from rl.grpo.trace import trace_from_messages

        shown = self.view.record({"messages": messages, "tools": self.tools})
        trace = trace_from_messages(self.tok, shown["messages"], shown.get("tools"))
        ids, text, pos = trace.input_ids, "", None
        for i, token in enumerate(ids[:-1]):
            text += self.tok.decode([token])
            # the agent's own value (generated), not the tool list's description of it
            if text.endswith('"address2": "') and trace.loss_mask[i + 1]:
                pos = i
        if pos is None or self.close is None:
            return None
        with torch.no_grad():
            dist = torch.softmax(self.model(torch.tensor([ids[: pos + 1]])).logits[0, -1].float(), -1)
        return float(dist[ids[pos + 1]]), float(dist[self.close])


def teacher_forced(m: _Model, limit: int) -> dict[str, dict[str, float]]:
    """Mean probability of the teacher's first `address2` token and of an empty value on up to
    `limit` cold-start conversations, by whether the address has a second line."""
    read: dict[str, list[tuple[float, float]]] = {"with a second line": [], "without": []}
    for r in m.records:
        calls = _calls(r["messages"])
        got = m.at_address2(r["messages"]) if calls else None
        if got is not None:
            read["with a second line" if calls[-1].get("address2") else "without"].append(got)
        if sum(len(v) for v in read.values()) >= limit:
            break
    nan = float("nan")
    return {k: {"n": len(v), "p_teacher_token": sum(p for p, _ in v) / len(v) if v else nan,
                "p_empty": sum(e for _, e in v) / len(v) if v else nan} for k, v in read.items()}


def _routing_prefix(messages: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
    """`messages` up to the result of the first order lookup (None if there is none)."""
    for k, x in enumerate(messages):
        if x.get("role") == "tool" and k and any(c["function"]["name"] == "get_order_details"
                                                 for c in messages[k - 1].get("tool_calls") or []):
            return messages[: k + 1]
    return None


def routing(m: _Model, episodes: dict[str, Path], gold: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """At the agent's first text after the first order lookup: mean probability of the first token
    of the teacher's address question and of its reason question, on the cold-start conversations
    that ask for a new address and on the greedy `modify_address` episodes of each customer."""
    import torch

    from rl.coldstart.augment import sft_training_records
    from rl.coldstart.teacher import QUESTIONS
    from rl.grpo.trace import trace_from_messages

    address_q, reason_q = QUESTIONS["address"], QUESTIONS["reason"]
    first = [m.tok.encode(q, add_special_tokens=False)[0] for q in (address_q, reason_q)]

    def read(prefix: list[dict[str, Any]]) -> tuple[float, float]:
        shown = m.view.record({"messages": [*prefix, {"role": "assistant", "content": address_q}], "tools": m.tools})
        trace = trace_from_messages(m.tok, shown["messages"], shown.get("tools"))
        at = max(i for i in range(1, len(trace.input_ids)) if trace.loss_mask[i] and not trace.loss_mask[i - 1])
        with torch.no_grad():
            dist = torch.softmax(m.model(torch.tensor([trace.input_ids[:at]])).logits[0, -1].float(), -1)
        return float(dist[first[0]]), float(dist[first[1]])

    def mean(read_: list[tuple[float, float]]) -> dict[str, float]:
        n = len(read_)
        return {"n": n, "p_address_question": sum(a for a, _ in read_) / n if n else float("nan"),
                "p_reason_question": sum(b for _, b in read_) / n if n else float("nan")}

    def asked_at(r: dict[str, Any], q: str) -> int | None:
        """Where the agent of record `r` first asks `q` (None: it never does)."""
        return next((i for i, x in enumerate(r["messages"])
                     if x.get("role") == "assistant" and (x.get("content") or "") == q), None)

    trained = sft_training_records(m.records, counterfactuals=m.recipe.sft_reason_counterfactuals)
    n_address = sum(asked_at(r, address_q) is not None for r in trained)
    n_reason = sum(asked_at(r, reason_q) is not None for r in trained)
    out: dict[str, Any] = {"sft_address_share": n_address / max(1, n_address + n_reason)}
    out["training"] = mean([read(r["messages"][:k]) for r in m.records if (k := asked_at(r, address_q)) is not None])
    for customer, path in episodes.items():
        got = []
        for line in path.read_text().splitlines():
            e = json.loads(line)
            if e["task_id"] in gold and (prefix := _routing_prefix(e["messages"])) is not None:
                got.append(read(prefix))
        out[customer] = mean(got)
    return out


def replayed(m: _Model, path: Path, gold: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """For each greedy episode of `path` whose call on the right order had to write a second address
    line: the probability of an empty `address2` at that call as the episode was played, and with the
    agent's last confirmation before it replaced by the teacher's (rl/policies/wording.py: the new
    address in full) and the customer's answer by a plain yes."""
    from rl.tasks.phrasing import address_text, order_ref

    played: list[float] = []
    corrected: list[float] = []
    for line in path.read_text().splitlines():
        e = json.loads(line)
        want = gold.get(e["task_id"])
        if want is None or not want.get("address2"):
            continue
        msgs = e["messages"]
        at = next((k for k in range(len(msgs) - 1, -1, -1)
                   if any(c.get("order_id") == want["order_id"] for c in _calls([msgs[k]]))), None)
        if at is None:
            continue
        prefix = msgs[: at + 1]
        asked = next((k for k in range(at - 1, -1, -1) if prefix[k]["role"] == "assistant"
                      and "confirm" in (prefix[k].get("content") or "").lower()), None)
        if asked is None or asked + 1 >= at or prefix[asked + 1]["role"] != "user":
            continue
        fixed = [dict(x) for x in prefix]
        fixed[asked]["content"] = (f"To confirm, I will change the shipping address of order "
                                   f"{order_ref(want['order_id'])} to {address_text(want)}. Do you confirm (yes/no)?")
        fixed[asked + 1]["content"] = "Yes, please go ahead."
        p, q = m.at_address2(prefix), m.at_address2(fixed)
        if p is not None and q is not None:
            played.append(p[1])
            corrected.append(q[1])
    n = len(played)
    return {"n": n, "p_empty_as_played": sum(played) / n if n else float("nan"),
            "p_empty_confirmation_corrected": sum(corrected) / n if n else float("nan")}


def main() -> None:
    from rl.experiment.recipe import ExperimentRecipe
    from rl.grpo.batches import task_kind
    from rl.tasks.schema import load_tasks

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True, help="a paper-table folder with its episodes")
    ap.add_argument("--models", default="cold_start,mua_rl_s0,mua_rl_s1")
    ap.add_argument("--teacher-forced", type=int, default=0, metavar="N")
    ap.add_argument("--replay", action="store_true",
                    help="re-read each failed call's address2 as played and after a corrected confirmation")
    ap.add_argument("--routing", action="store_true",
                    help="read where each model decides between asking for an address and for a reason")
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
    if a.teacher_forced or a.replay or a.routing:
        loaded = {m: _Model(a.out, m) for m in models if (a.out / "models" / m).is_dir()}  # each read once
        if a.teacher_forced:
            res["teacher_forced"] = {m: teacher_forced(x, a.teacher_forced) for m, x in loaded.items()}
        if a.replay:
            res["replay"] = {c: {m: replayed(x, episodes_path(a.out, m, c), gold) for m, x in loaded.items()}
                             for c in recipe.eval_customers}
        if a.routing:
            res["routing"] = {m: routing(x, {c: p for c in recipe.eval_customers
                                             if (p := episodes_path(a.out, m, c)).exists()}, gold)
                              for m, x in loaded.items()}
    if a.json:
        print(json.dumps(res, indent=1))
        return
    print(f"{len(gold)} modify_address tasks of the {recipe.eval_set} set, greedy episodes\n")
    cols = ("episodes", "passed", "right_order", "other_fields_right", "address2_dropped", "confirmed_address1")
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
    for m, r in res.get("routing", {}).items():
        cells = "; ".join(f"{k} (n={v['n']}): address question {v['p_address_question']:.3f}, reason question "
                          f"{v['p_reason_question']:.3f}" for k, v in r.items() if isinstance(v, dict))
        print(f"routing {m} (address share of SFT's records {r['sft_address_share']:.3f}): {cells}")
    for c, per_model in res.get("replay", {}).items():
        for m, r in per_model.items():
            print(f"replayed {m} with the {c} customer, calls that needed a second line (n={r['n']}): empty value "
                  f"{r['p_empty_as_played']:.3f} as played, {r['p_empty_confirmation_corrected']:.3f} with the "
                  "confirmation corrected")


if __name__ == "__main__":
    main()
