"""Each GRPO step's tasks are drawn stratified over task kinds, in proportion to the pool's mix."""

import random
from collections import Counter
from dataclasses import dataclass

from rl.grpo.batches import stratified_sample, task_kind
from rl.grpo.trainer import GRPOConfig, GRPOTrainer


@dataclass(frozen=True)
class _Task:
    id: str
    tags: tuple[str, ...]


# an RL mix's shares, 1 1 1 2 4 1 of 10 (cpu-tiny's until session 31)
MIX = {"cancel": 1, "info_status": 1, "modify_address": 1, "shift_cancel_cancel": 2,
       "shift_modify_address_cancel": 4, "haggle_cancel": 1}
POOL = [_Task(f"{kind}-{i}", ("retail", f"category:{kind}")) for kind, share in MIX.items() for i in range(14 * share)]


def test_every_step_sees_several_kinds_in_proportion_to_the_pool():
    draws = [stratified_sample(POOL, 8, random.Random(s)) for s in range(400)]
    seen = Counter()
    for d in draws:
        assert len(d) == 8 and len(set(d)) == 8
        kinds = Counter(task_kind(t) for t in d)
        # each kind gets the whole part of its quota for sure, and at most one more
        for kind, share in MIX.items():
            quota = 8 * share / 10
            assert int(quota) <= kinds[kind] <= int(quota) + 1, (kind, kinds)
        assert len(kinds) >= 4  # (a plain random draw of 8 sometimes holds a single kind)
        seen.update(kinds)
    for kind, share in MIX.items():  # over many steps every kind is drawn at its share
        assert abs(seen[kind] / (8 * 400) - share / 10) < 0.02, (kind, seen)


def test_a_plain_random_draw_misses_kinds_the_stratified_one_keeps():
    rng = random.Random(0)
    plain = [len({task_kind(t) for t in rng.sample(POOL, 8)}) for _ in range(400)]
    strat = [len({task_kind(t) for t in stratified_sample(POOL, 8, random.Random(s))}) for s in range(400)]
    assert min(strat) > min(plain) and sum(strat) > sum(plain)


def test_a_pool_of_one_kind_is_a_plain_draw():
    tasks = list(range(20))  # untagged
    assert stratified_sample(tasks, 5, random.Random(3)) == random.Random(3).sample(tasks, 5)
    assert sorted(stratified_sample(tasks[:3], 5, random.Random(1))) == tasks[:3]


def test_the_trainer_draws_its_steps_stratified(tiny_tok, tiny_model, tmp_path):
    cfg = GRPOConfig(tasks_per_step=8)
    trainer = GRPOTrainer(tiny_model, tiny_tok, POOL, lambda *a: [], cfg, tmp_path / "a")
    for step in range(20):
        assert len({task_kind(t) for t in trainer.step_tasks(step)}) >= 4
    plain = GRPOTrainer(tiny_model, tiny_tok, POOL, lambda *a: [], cfg.model_copy(update={"stratify": False}),
                        tmp_path / "b")
    assert min(len({task_kind(t) for t in plain.step_tasks(step)}) for step in range(20)) < 4
