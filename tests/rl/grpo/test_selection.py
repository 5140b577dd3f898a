"""Checkpoint selection: the best validated model ships (the later one on a tie), the starting model
is a candidate, and a resumed run keeps its recorded scores and scores a due step it had missed."""

import json

import pytest
import torch

from rl.grpo.selection import CheckpointSelector


def _scores(values):
    calls = iter(values)
    return lambda model: {"reward": next(calls), "n": 4}


def _train_a_little(model):
    with torch.no_grad():
        next(model.parameters()).add_(0.5)
    return {k: v.clone() for k, v in model.state_dict().items()}


def _same(model, state):
    return all(torch.equal(v, state[k]) for k, v in model.state_dict().items())


def test_the_best_validated_model_ships_and_a_tie_goes_to_the_later_step(tiny_tok, tiny_model, tmp_path):
    sel = CheckpointSelector(_scores([0.5, 0.25, 0.5, 0.125]), tmp_path, every=2, last_step=5)
    states = {}
    for step in range(6):
        if step:
            states[step] = _train_a_little(tiny_model)
        else:
            states[0] = {k: v.clone() for k, v in tiny_model.state_dict().items()}
        record = sel.observe(tiny_model, tiny_tok, step, {"kind": "test"})
        assert (record is not None) == (step in (0, 2, 4, 5))
    assert [r["step"] for r in sel.records()] == [0, 2, 4, 5]
    assert not _same(tiny_model, states[4])
    best = sel.restore_best(tiny_model)
    assert best["step"] == 4 and best["reward"] == 0.5
    assert _same(tiny_model, states[4])
    manifest = json.loads((tmp_path / "best" / "manifest.json").read_text())
    assert manifest["kind"] == "test" and manifest["selection"]["step"] == 4


def test_a_run_that_only_got_worse_ships_its_starting_model(tiny_tok, tiny_model, tmp_path):
    start = {k: v.clone() for k, v in tiny_model.state_dict().items()}
    sel = CheckpointSelector(_scores([0.5, 0.25, 0.0]), tmp_path, every=1, last_step=2)
    sel.observe(tiny_model, tiny_tok, 0, {})
    for step in (1, 2):
        _train_a_little(tiny_model)
        sel.observe(tiny_model, tiny_tok, step, {})
    assert sel.restore_best(tiny_model)["step"] == 0 and _same(tiny_model, start)


def test_scoring_leaves_the_model_in_the_mode_it_found(tiny_tok, tiny_model, tmp_path):
    seen = []
    sel = CheckpointSelector(lambda m: seen.append(m.training) or {"reward": 0.0, "n": 1}, tmp_path,
                             every=1, last_step=1)
    tiny_model.train()
    sel.observe(tiny_model, tiny_tok, 0, {})
    assert seen == [False] and tiny_model.training


def test_a_resumed_run_keeps_its_scores_and_scores_a_missed_due_step(tiny_tok, tiny_model, tmp_path):
    first = CheckpointSelector(_scores([0.25, 0.5]), tmp_path, every=2, last_step=6)
    first.observe(tiny_model, tiny_tok, 0, {})
    best_state = _train_a_little(tiny_model)
    _train_a_little(tiny_model)
    first.observe(tiny_model, tiny_tok, 2, {})  # interrupted after this; its checkpoint is at step 2
    tiny_model.load_state_dict(best_state)
    again = CheckpointSelector(_scores([0.375]), tmp_path, every=2, last_step=6)
    assert again.observe(tiny_model, tiny_tok, 2, {}) is None  # already scored: not scored twice
    _train_a_little(tiny_model)
    assert again.observe(tiny_model, tiny_tok, 3, {}) is None  # not due
    assert again.observe(tiny_model, tiny_tok, 4, {})["reward"] == 0.375
    assert [r["step"] for r in again.records()] == [0, 2, 4]
    assert again.best()["step"] == 2


def test_restoring_refuses_a_best_folder_that_does_not_match_the_scores(tiny_tok, tiny_model, tmp_path):
    sel = CheckpointSelector(_scores([0.5]), tmp_path, every=1, last_step=1)
    sel.observe(tiny_model, tiny_tok, 0, {})
    with (tmp_path / "validation.jsonl").open("a") as f:
        f.write(json.dumps({"step": 1, "reward": 0.75, "n": 4}) + "\n")
    with pytest.raises(RuntimeError, match="holds step 0"):
        sel.restore_best(tiny_model)
    assert CheckpointSelector(_scores([]), tmp_path / "none", every=1, last_step=1).restore_best(tiny_model) is None
    with pytest.raises(ValueError):
        CheckpointSelector(_scores([]), tmp_path, every=0, last_step=1)
