"""Which model a GRPO run ships: the best of its checkpoints on held-out validation tasks.

GRPO on a small policy is noisy: a few steps' updates can unlearn a kind of task that the run's
sampled groups seldom reward, and the last step is not always the best one. `CheckpointSelector`
scores the starting model and the model after every `every`-th step (and after the last one) on
validation tasks - tasks of their own, on customers that neither RL nor the test set uses, played
greedily against the evaluation's customers - and keeps the best: the one with the highest reward
mean, the later one on a tie. The starting model is a candidate too, so a run that only made its
model worse ships the model it started from, as a promotion gate would.

Each score is a line of `DIR/validation.jsonl`; the best model so far is a model folder in
`DIR/best/` (its manifest says its step and score). Validation steps must be checkpoint steps, so a
run resumed from its last checkpoint finds every score it had recorded still valid, and scores the
resumed model at once when its step was due but not yet scored.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog
from transformers import PreTrainedModel, PreTrainedTokenizerBase

from rl.models.tiny import load_model_folder, save_model_folder

if TYPE_CHECKING:
    from rl.grpo.rollout import EpisodeRollout
    from rl.tasks.schema import Task

log = structlog.get_logger(__name__)

# model -> {"reward": mean over scored episodes, "n": episodes scored, ...anything else to record}
ScoreFn = Callable[[PreTrainedModel], dict[str, Any]]


class CheckpointSelector:
    def __init__(self, score: ScoreFn, out_dir: str | Path, *, every: int, last_step: int) -> None:
        if every < 1:
            raise ValueError("validation interval must be at least 1 step")
        self.score, self.every, self.last_step = score, every, last_step
        self.out = Path(out_dir)
        self.out.mkdir(parents=True, exist_ok=True)

    @property
    def log_path(self) -> Path:
        return self.out / "validation.jsonl"

    @property
    def best_dir(self) -> Path:
        return self.out / "best"

    def records(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(ln) for ln in self.log_path.read_text().splitlines() if ln.strip()]

    def best(self) -> dict[str, Any] | None:
        """The best record so far: highest reward, the later step on a tie."""
        return _best(self.records())

    def due(self, step: int) -> bool:
        return step == 0 or step % self.every == 0 or step == self.last_step

    def observe(self, model: PreTrainedModel, tok: PreTrainedTokenizerBase, step: int,
                manifest: dict[str, Any]) -> dict[str, Any] | None:
        """Score `model` (the run's model after `step` steps) when that step is due and not yet
        scored; keep it in `best/` when it beats the best so far. Returns the new record, or None."""
        if not self.due(step):
            return None
        records = self.records()
        if any(r["step"] == step for r in records):
            return None
        before = _best(records)
        was_training = model.training
        model.eval()
        try:
            result = self.score(model)
        finally:
            model.train(was_training)
        record = {"step": step, **result}
        with self.log_path.open("a") as f:
            f.write(json.dumps(record) + "\n")
        if before is None or (record["reward"], step) >= (before["reward"], before["step"]):
            save_model_folder(model, tok, self.best_dir,
                              {**manifest, "selection": {"step": step, "validation": record}})
        log.info("grpo.validation", step=step, reward=record["reward"], n=record.get("n"),
                 best_step=(_best([*records, record]) or {}).get("step"))
        return record

    def restore_best(self, model: PreTrainedModel) -> dict[str, Any] | None:
        """Load the best scored weights into `model`; returns their record (None: nothing scored)."""
        best = self.best()
        if best is None:
            return None
        saved = json.loads((self.best_dir / "manifest.json").read_text())["selection"]["step"]
        if saved != best["step"]:
            raise RuntimeError(f"{self.best_dir} holds step {saved}, but the best validation score is step "
                               f"{best['step']}'s")
        best_model, _, _ = load_model_folder(self.best_dir)
        model.load_state_dict(best_model.state_dict())
        return best


def _best(records: list[dict[str, Any]]) -> dict[str, Any] | None:
    return max(records, key=lambda r: (r["reward"], r["step"]), default=None)


def validation_score(rollout: EpisodeRollout, tasks: list[Task]) -> ScoreFn:
    """A `ScoreFn` that plays each of `tasks` once with `rollout` (an `EpisodeRollout`, greedy, with
    the evaluation's customers): reward mean over the episodes that were not excluded, and per
    task category."""

    def score(model: PreTrainedModel) -> dict[str, Any]:
        _, traces = rollout.play(model, tasks, 1)
        valid = [t for t in traces if not t.excluded]
        by: dict[str, list[float]] = {}
        for t in valid:
            by.setdefault(str(t.info.get("category")), []).append(t.reward)
        return {"reward": sum(t.reward for t in valid) / max(len(valid), 1), "n": len(valid),
                "excluded": len(traces) - len(valid),
                "by_category": {c: sum(r) / len(r) for c, r in sorted(by.items())}}

    return score
