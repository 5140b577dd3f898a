"""Training-curve plots of a paper-table run: SFT loss, and per GRPO run the reward mean (with the
greedy validation reward of its scored checkpoints, dashed), KL, entropy and response length per
step, and the sampled reward per task category (PNG files under DIR/plots). Steps whose groups all
had equal rewards make no update and have no KL or entropy point. A step samples only a few tasks of
each category, so the per-category curves are means over a trailing window of `CATEGORY_WINDOW`
steps (weighted by rollouts)."""

from __future__ import annotations

import json
from pathlib import Path

GRPO_PANELS = [("reward_mean", "reward mean"), ("kl", "KL to reference (k3)"), ("entropy", "entropy (nats/token)"),
               ("response_length", "generated tokens per rollout")]
UPDATE_ONLY = {"kl", "entropy"}
CATEGORY_WINDOW = 4


def category_curves(metrics: list[dict], window: int = CATEGORY_WINDOW) -> dict[str, list[tuple[int, float]]]:
    """Per task category: (step, sampled reward mean over the trailing `window` steps)."""
    cats = sorted({c for m in metrics for c in m.get("reward_by_category", {})})
    out: dict[str, list[tuple[int, float]]] = {}
    for c in cats:
        pts = []
        for i, m in enumerate(metrics):
            recent = [x["reward_by_category"][c] for x in metrics[max(0, i - window + 1): i + 1]
                      if c in x.get("reward_by_category", {})]
            n = sum(r["rollouts"] for r in recent)
            if n:
                pts.append((m["step"], sum(r["reward"] * r["rollouts"] for r in recent) / n))
        out[c] = pts
    return out


def _read(path: Path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def plot_curves(out: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder = out / "plots"
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    sft = _read(out / "sft_metrics.jsonl")
    if sft:
        fig, ax = plt.subplots(figsize=(5, 3.2))
        ax.plot([m["step"] for m in sft], [m["loss"] for m in sft])
        ax.set_xlabel("SFT step")
        ax.set_ylabel("loss (nats / assistant token)")
        ax.set_title("cold-start SFT")
        fig.tight_layout()
        fig.savefig(folder / "sft_loss.png", dpi=110)
        plt.close(fig)
        written.append(folder / "sft_loss.png")
    runs = {p.name: _read(p / "metrics.jsonl") for p in sorted((out / "grpo").glob("*")) if p.is_dir()}
    runs = {k: v for k, v in runs.items() if v}
    if runs:
        fig, axes = plt.subplots(2, 2, figsize=(9, 6))
        for ax, (key, label) in zip(axes.flat, GRPO_PANELS, strict=True):
            for name, ms in runs.items():
                # KL and entropy are measured on the rollouts an update used; steps without one have none
                pts = [(m["step"], m.get(key, float("nan"))) for m in ms
                       if key not in UPDATE_ONLY or m.get("update_rollouts", 1) > 0]
                line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=name)
                val = _read(out / "grpo" / name / "validation.jsonl")
                if key == "reward_mean" and val:  # held-out validation (greedy) of the scored checkpoints
                    ax.plot([v["step"] for v in val], [v["reward"] for v in val], marker="o", linestyle="--",
                            color=line.get_color(), label=f"{name} (validation)")
            ax.set_xlabel("GRPO step")
            ax.set_title(label)
        axes.flat[0].legend()
        fig.tight_layout()
        fig.savefig(folder / "grpo_curves.png", dpi=110)
        plt.close(fig)
        written.append(folder / "grpo_curves.png")
    by_cat = {name: category_curves(ms) for name, ms in runs.items()}
    by_cat = {k: v for k, v in by_cat.items() if v}
    if by_cat:
        fig, axes = plt.subplots(1, len(by_cat), figsize=(4.5 * len(by_cat), 3.4), squeeze=False, sharey=True)
        for ax, (name, curves) in zip(axes.flat, by_cat.items(), strict=True):
            for cat, pts in curves.items():
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=cat)
            ax.set_xlabel("GRPO step")
            ax.set_title(f"{name}: sampled reward by category")
        axes.flat[0].set_ylabel(f"reward (mean of last {CATEGORY_WINDOW} steps)")
        axes.flat[0].legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(folder / "grpo_reward_by_category.png", dpi=110)
        plt.close(fig)
        written.append(folder / "grpo_reward_by_category.png")
    return written
