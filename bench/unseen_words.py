"""Words the model never saw in training, in what each evaluation customer says: per customer and
task category of a paper-table folder's greedy evaluation episodes, the customer's sentences that
hold a word absent from every cold-start conversation (system prompt, customer, agent and tool text
of `coldstart/filtered.jsonl`, and what MUA-RL's GRPO rollouts showed the model where the run kept
them: the only text the tiny model is ever taught).

Why: the `cpu-tiny` model is trained from random weights on our own conversations, so a word those
conversations never hold has an embedding no gradient ever shaped; a sentence that carries its
meaning only in such words ("I bought it by accident.") cannot be read by any recipe, while a
pretrained model (the paper's Qwen3) reads it from its pretraining. The held-out customer keeps its
sentences apart from the training wordings (rl/simulator/heldout.py); this counts how much of that
difference is new vocabulary, per category, so a kind at 0 can be told apart as out of reach or as
a skill to learn.

A word is a run of ASCII letters, lowercased; order ids, numbers and the customer's own values
(names, streets, cities, products) are letters too, so sentences are reported with digits masked
and the unseen words listed, and values the agent copies rather than reads count like any other
word. Per category: customer sentences, those with an unseen word, the distinct sentence shapes
with one (most frequent first), and the unseen words with their counts.

Usage: .venv/bin/python bench/unseen_words.py --out DIR [--model cold_start] [--top 8] [--json]
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

WORD = re.compile(r"[a-z]+")
SENTENCE = re.compile(r"[^.!?]+[.!?]?")
DIGITS = re.compile(r"\d+")


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def training_vocabulary(folder: Path) -> set[str]:
    """Every word of the cold-start conversations (each message's text and each call's arguments) and
    of what MUA-RL's GRPO rollouts showed the model (`grpo/mua_rl_*/rollouts.jsonl.gz`, where the
    run kept them: the system prompt, the customer's messages and the tool results)."""
    vocab: set[str] = set()
    for line in (folder / "coldstart" / "filtered.jsonl").read_text().splitlines():
        for m in json.loads(line)["messages"]:
            vocab.update(words(str(m.get("content") or "")))
            for call in m.get("tool_calls") or []:
                vocab.update(words(json.dumps(call.get("function", call))))
    for path in sorted(folder.glob("grpo/mua_rl_*/rollouts.jsonl.gz")):
        with gzip.open(path, "rt") as f:
            for line in f:
                # what the rollout showed the model (system prompt, customer, tool results), not what
                # the sampled policy wrote: a word the model made up was never taught to it
                for turn in json.loads(line)["text"].split("<|im_start|>"):
                    if turn.startswith(("system", "user")):
                        vocab.update(words(turn))
    return vocab


def count(episodes: Path, vocab: set[str]) -> dict[str, dict[str, Any]]:
    per: dict[str, dict[str, Any]] = defaultdict(lambda: {"episodes": 0, "passed": 0, "sentences": 0,
                                                          "unseen_sentences": 0, "shapes": Counter(),
                                                          "words": Counter()})
    for line in episodes.read_text().splitlines():
        e = json.loads(line)
        if e.get("excluded"):
            continue
        category = next((t.split(":", 1)[1] for t in e.get("tags") or [] if t.startswith("category:")), "other")
        c = per[category]
        c["episodes"] += 1
        c["passed"] += e.get("reward") == 1.0
        for m in e["messages"]:
            if m.get("role") != "user":
                continue
            for s in SENTENCE.findall(str(m.get("content") or "")):
                s = s.strip()
                if not s:
                    continue
                c["sentences"] += 1
                new = [w for w in words(s) if w not in vocab]
                if new:
                    c["unseen_sentences"] += 1
                    c["shapes"][DIGITS.sub("N", s)] += 1
                    c["words"].update(new)
    return per


def report(folder: Path, model: str, top: int, vocab: set[str]) -> dict[str, dict[str, dict[str, Any]]]:
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for customer_dir in sorted((folder / "eval" / model).iterdir()):
        episodes = customer_dir / "greedy" / "episodes.jsonl"
        if not episodes.is_file():
            continue
        per = count(episodes, vocab)
        out[customer_dir.name] = {
            cat: {**{k: v for k, v in c.items() if k not in ("shapes", "words")},
                  "shapes": c["shapes"].most_common(top), "words": c["words"].most_common(3 * top)}
            for cat, c in sorted(per.items())}
    return out


def markdown(res: dict[str, dict[str, dict[str, Any]]], model: str, vocab_size: int) -> str:
    lines = [f"# Words the model never trained on, in the customer's sentences ({model}'s greedy episodes)", "",
             f"Training vocabulary: {vocab_size} words (every cold-start conversation and what the kept "
             "MUA-RL rollouts showed).", ""]
    for customer, per in res.items():
        lines += [f"## Customer `{customer}`", "",
                  "| category | episodes | passed | customer sentences | with an unseen word | % |",
                  "|---|---|---|---|---|---|"]
        for cat, c in per.items():
            share = 100 * c["unseen_sentences"] / c["sentences"] if c["sentences"] else 0.0
            lines.append(f"| {cat} | {c['episodes']} | {c['passed']} | {c['sentences']} | "
                         f"{c['unseen_sentences']} | {share:.0f} |")
        lines.append("")
        for cat, c in per.items():
            if not c["shapes"]:
                continue
            lines += [f"**{cat}**: unseen words " + ", ".join(f"{w} ({n})" for w, n in c["words"]), ""]
            lines += [f"- {n} x \"{s}\"" for s, n in c["shapes"]]
            lines.append("")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="a paper-table run folder")
    ap.add_argument("--model", default="cold_start")
    ap.add_argument("--top", type=int, default=8, help="sentence shapes listed per category")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    vocab = training_vocabulary(a.out)
    res = report(a.out, a.model, a.top, vocab)
    if a.json:
        print(json.dumps(res, indent=1))
    else:
        print(markdown(res, a.model, len(vocab)))


if __name__ == "__main__":
    main()
