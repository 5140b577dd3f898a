"""Training-curve plots of a paper-table run: SFT loss, and per GRPO run the reward mean (with the
greedy validation reward of its scored checkpoints, dashed), KL, entropy and response length per
step, the KL to the reference with the coefficient it was weighed with (and its target, when the
coefficient adapts), the paper's training dynamics (all-correct and all-wrong groups, turns and
generic-tool calls per rollout), and the sampled reward per task category (PNG files under
DIR/plots). Steps whose groups all had equal rewards make no update and have no KL or entropy
point; metrics an older run did not record are left out. A step samples only a few tasks of each
category, so the per-category curves are means over a trailing window of `CATEGORY_WINDOW` steps
(weighted by rollouts)."""

from __future__ import annotations

import json
from pathlib import Path

GRPO_PANELS = [("reward_mean", "reward mean"), ("kl", "KL to reference (k3)"), ("entropy", "entropy (nats/token)"),
               ("response_length", "generated tokens per rollout")]
UPDATE_ONLY = {"kl", "entropy", "kl_coef"}
# (panel title, [(metric, line style)]) of the training-dynamics figure
DYNAMICS_PANELS = [("groups: all correct (solid), all wrong (dashed)", [("frac_all_correct", "-"),
                                                                        ("frac_all_wrong", "--")]),
                   ("informative groups per step", [("informative_groups", "-")]),
                   ("turns per rollout", [("turns_mean", "-")]),
                   ("generic-tool calls per rollout", [("generic_calls_per_rollout", "-")])]
CATEGORY_WINDOW = 4


def series(metrics: list[dict], key: str) -> list[tuple[int, float]]:
    """(step, value) of `key` over the steps that recorded it (KL, entropy and the KL coefficient
    only on steps that made an update)."""
    return [(m["step"], float(m[key])) for m in metrics
            if m.get(key) is not None and (key not in UPDATE_ONLY or m.get("update_rollouts", 1) > 0)]


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
                pts = series(ms, key)
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
    if runs and any(series(ms, "kl") for ms in runs.values()):
        written.append(_plot_kl(runs, folder / "grpo_kl.png"))
    if runs and any(series(ms, "frac_all_correct") for ms in runs.values()):
        written.append(_plot_dynamics(runs, folder / "grpo_dynamics.png"))
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


def _plot_kl(runs: dict[str, list[dict]], path: Path) -> Path:
    """KL to the reference per step (left) and the coefficient it was weighed with (right, log
    scale), a dotted line at each run's target when its coefficient adapts."""
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    for name, ms in runs.items():
        pts = series(ms, "kl")
        line, = left.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", label=name)
        targets = {m["kl_target"] for m in ms if m.get("kl_target")}
        for target in targets:
            left.axhline(target, linestyle=":", color=line.get_color())
        coef = series(ms, "kl_coef")
        if coef:
            right.plot([p[0] for p in coef], [p[1] for p in coef], marker=".", color=line.get_color(), label=name)
    left.set_xlabel("GRPO step")
    left.set_title("KL to reference (per token)")
    left.legend(fontsize=7)
    right.set_xlabel("GRPO step")
    right.set_title("KL coefficient")
    right.set_yscale("log")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plot_dynamics(runs: dict[str, list[dict]], path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(9, 6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (title, keys) in zip(axes.flat, DYNAMICS_PANELS, strict=True):
        for i, (name, ms) in enumerate(runs.items()):
            for key, style in keys:
                pts = series(ms, key)
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", linestyle=style,
                        color=colors[i % len(colors)], label=name if style == "-" else None)
        ax.set_xlabel("GRPO step")
        ax.set_title(title, fontsize=9)
    axes.flat[0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

