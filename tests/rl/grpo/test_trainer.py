"""A few GRPO steps on a toy two-turn task raise its reward; checkpoints save, load and resume."""

import asyncio
import json

import pytest
import torch

from rl.grpo.trace import Trace
from rl.grpo.trainer import GRPOConfig, GRPOTrainer, rollout_metrics
from rl.policies.local import LocalPolicy


def toy_rollout_fn(tok, max_new_tokens=1):
    """Toy episodes: the customer speaks, the agent replies, the customer speaks again, the agent
    replies. Reward 1 iff both replies start with a token from the lower half of the vocabulary."""
    half = len(tok) // 2

    def rollout(model, tasks, group_size, step):
        policy = LocalPolicy(model, tok, max_new_tokens=max_new_tokens, seed=step)

        async def episode(task, k):
            eid = f"{task}-{k}"
            msgs = [{"role": "system", "content": "toy"}, {"role": "user", "content": f"hello {task}"}]
            for _ in range(2):
                msgs.append(await policy.act(eid, msgs))
                msgs.append({"role": "user", "content": "again"})
            trace = policy.pop_trace(eid)
            gen_starts = [i for i in range(len(trace.loss_mask))
                          if trace.loss_mask[i] and not trace.loss_mask[i - 1]]
            trace.reward = float(all(trace.input_ids[i] < half for i in gen_starts))
            trace.task_id, trace.group = str(task), str(task)
            trace.info = {"turns": 2, "tool_calls": {}}
            return trace

        async def main():
            return await asyncio.gather(*(episode(t, k) for t in tasks for k in range(group_size)))

        return list(asyncio.run(main()))

    return rollout


@pytest.mark.parametrize("loss_agg", ["token-mean", "seq-mean-token-mean"])
def test_grpo_steps_raise_toy_reward(tiny_tok, tiny_model, tmp_path, loss_agg):
    torch.manual_seed(0)
    rollout = toy_rollout_fn(tiny_tok)
    cfg = GRPOConfig(steps=8, tasks_per_step=4, group_size=8, lr=1e-2, kl_coef=0.001, save_every=4,
                     loss_agg=loss_agg)
    trainer = GRPOTrainer(tiny_model, tiny_tok, list(range(16)), rollout, cfg, tmp_path / "run")
    before = sum(t.reward for t in rollout(tiny_model, list(range(8)), 8, 1000)) / 64
    history = trainer.run()
    after = sum(t.reward for t in rollout(tiny_model, list(range(8)), 8, 1000)) / 64
    assert after > before + 0.2, (before, after)
    first = history[0]
    for key in ("reward_mean", "frac_all_correct", "frac_all_wrong", "turns_mean", "response_length", "kl",
                "entropy", "clip_frac", "tool_calls_per_rollout", "update_tokens_per_s"):
        assert key in first
    assert history[-1]["kl"] > 0.0
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == list(range(1, 9))


def test_checkpoint_resume(tiny_tok, tiny_model, tiny_manifest, tmp_path):
    from rl.grpo.trainer import GRPOTrainer as T
    from rl.models.tiny import TinyQwen3Recipe, build_tiny_model
    rollout = toy_rollout_fn(tiny_tok, max_new_tokens=3)
    cfg = GRPOConfig(steps=2, tasks_per_step=2, group_size=4, lr=1e-3, save_every=1)
    t1 = T(tiny_model, tiny_tok, list(range(4)), rollout, cfg, tmp_path / "r", manifest=tiny_manifest)
    t1.run()
    assert (tmp_path / "r" / "checkpoints" / "latest").read_text() == "step_00002"
    manifest = json.loads((tmp_path / "r" / "checkpoints" / "step_00002" / "manifest.json").read_text())
    assert manifest["training"]["step"] == 2 and manifest["training"]["method"] == "grpo"
    # an interrupted run: a fresh process builds a fresh model and resumes from the checkpoint
    cfg3 = cfg.model_copy(update={"steps": 3})
    fresh = build_tiny_model(tiny_tok, TinyQwen3Recipe.model_validate(
        {**json.loads((tmp_path / "r" / "checkpoints" / "step_00002" / "manifest.json").read_text())["recipe"],
         "seed": 7}))
    t2 = T(fresh, tiny_tok, list(range(4)), rollout, cfg3, tmp_path / "r")
    assert t2.step == 2
    for a, b in zip(fresh.state_dict().values(), tiny_model.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert t2.opt.state_dict()["state"]  # optimizer moments restored
    t2.run()
    lines = (tmp_path / "r" / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1, 2, 3]


def test_kept_rollouts_hold_every_rollout_of_each_step_and_follow_a_resume(tiny_tok, tiny_model, tmp_path):
    import gzip

    from rl.grpo.trainer import GRPOTrainer as T
    rollout = toy_rollout_fn(tiny_tok)
    cfg = GRPOConfig(steps=3, tasks_per_step=2, group_size=4, lr=1e-3, save_every=2, keep_rollouts=True)
    T(tiny_model, tiny_tok, list(range(4)), rollout, cfg, tmp_path / "r").run()

    def kept():
        with gzip.open(tmp_path / "r" / "rollouts.jsonl.gz", "rt") as f:
            return [json.loads(line) for line in f]

    rows = kept()
    assert [r["step"] for r in rows] == [1] * 8 + [2] * 8 + [3] * 8
    assert {r["task_id"] for r in rows if r["step"] == 1} <= {"0", "1", "2", "3"}
    assert all("hello" in r["text"] and "again" in r["text"] and r["reward"] in (0.0, 1.0) for r in rows)
    # interrupted after step 3's rollouts but with step 2 the last checkpoint: step 3 is played again
    (tmp_path / "r" / "checkpoints" / "latest").write_text("step_00002")
    resumed = T(tiny_model, tiny_tok, list(range(4)), rollout, cfg, tmp_path / "r")
    assert resumed.step == 2 and [r["step"] for r in kept()] == [1] * 8 + [2] * 8
    resumed.run()
    assert [r["step"] for r in kept()] == [1] * 8 + [2] * 8 + [3] * 8
    # off by default
    T(tiny_model, tiny_tok, list(range(4)), rollout, cfg.model_copy(update={"keep_rollouts": False, "steps": 1}),
      tmp_path / "off").run()
    assert not (tmp_path / "off" / "rollouts.jsonl.gz").exists()


def test_mini_batches_make_several_optimizer_steps_on_one_rollout_batch(tiny_tok, tiny_model, tmp_path):
    torch.manual_seed(1)
    rollout = toy_rollout_fn(tiny_tok)
    cfg = GRPOConfig(steps=1, tasks_per_step=4, group_size=8, lr=1e-2, mini_batches=4, clip=0.2)
    trainer = GRPOTrainer(tiny_model, tiny_tok, list(range(4)), rollout, cfg, tmp_path / "run")
    traces = rollout(tiny_model, list(range(4)), 8, 0)
    for i, t in enumerate(traces):  # every group informative: half right, half wrong
        t.reward = float(i % 2)
    m = trainer.update(traces)
    assert m["optimizer_steps"] == 4 and m["update_rollouts"] == 32
    # later mini-batches see a policy that already moved: some of their tokens are clipped
    assert m["clip_frac"] > 0.0
    one = GRPOTrainer(tiny_model, tiny_tok, list(range(4)), rollout, cfg.model_copy(update={"mini_batches": 1}),
                      tmp_path / "run1").update(traces)
    assert one["optimizer_steps"] == 1


def test_ppo_epochs_pass_over_the_batch_again_with_the_rollouts_advantages(tiny_tok, tiny_model, tmp_path):
    torch.manual_seed(1)
    rollout = toy_rollout_fn(tiny_tok)
    cfg = GRPOConfig(steps=1, tasks_per_step=4, group_size=8, lr=1e-2, mini_batches=2, ppo_epochs=3, clip=0.2)
    trainer = GRPOTrainer(tiny_model, tiny_tok, list(range(4)), rollout, cfg, tmp_path / "run")
    traces = rollout(tiny_model, list(range(4)), 8, 0)
    for i, t in enumerate(traces):
        t.reward = float(i % 2)
    m = trainer.update(traces)
    # 3 passes x 2 mini-batches, each rollout's tokens processed once per pass
    assert m["optimizer_steps"] == 6 and m["update_rollouts"] == 32
    assert m["update_tokens"] == 3 * sum(len(t) for t in traces)
    assert m["clip_frac"] > 0.0  # later passes see a policy that already moved
    with pytest.raises(ValueError):
        GRPOConfig(ppo_epochs=0)


def test_unknown_loss_aggregation_is_refused():
    with pytest.raises(ValueError, match="loss_agg must be one of"):
        GRPOConfig(loss_agg="seq-sum")


def test_rollout_metrics_report_reward_per_task_category():
    def trace(group, reward, category=None, excluded=False):
        t = Trace(task_id=group, group=group, reward=reward, excluded=excluded)
        t.info = {"turns": 3, "tool_calls": {}, **({"category": category} if category else {})}
        return t

    traces = [trace("a", 1.0, "cancel"), trace("a", 0.0, "cancel"), trace("b", 1.0, "shift"),
              trace("b", 1.0, "shift"), trace("b", 0.0, "shift", excluded=True), trace("c", 0.0)]
    m = rollout_metrics(traces)
    assert m["reward_by_category"] == {"cancel": {"rollouts": 2, "reward": 0.5},
                                       "shift": {"rollouts": 2, "reward": 1.0}}  # excluded ones left out
    assert m["frac_all_correct"] == pytest.approx(1 / 3) and m["frac_all_wrong"] == pytest.approx(1 / 3)


def test_rollout_metrics_report_tool_kinds_and_generic_tool_use():
    def trace(group, reward, calls, excluded=False):
        t = Trace(task_id=group, group=group, reward=reward, excluded=excluded)
        t.info = {"turns": 4, "tool_calls": calls, "category": "cancel"}
        return t

    traces = [trace("a", 1.0, {"think": 2, "get_order_details": 1}),
              trace("a", 0.0, {"transfer_to_human_agents": 1, "cancel_pending_order": 1, "malformed_tool_call": 1}),
              trace("b", 0.0, {"calculate": 1}), trace("b", 0.0, {}),
              trace("b", 1.0, {"think": 9}, excluded=True)]  # a failed episode counts nowhere
    m = rollout_metrics(traces)
    assert m["calls_by_kind_per_rollout"] == {"generic": 0.75, "other": 0.25, "read": 0.25, "terminal": 0.25,
                                              "write": 0.25}
    assert m["generic_calls_per_rollout"] == 1.0  # think x2, calculate, transfer over 4 rollouts
    assert m["informative_groups"] == 1 and m["frac_all_wrong"] == 0.5 and m["turns_mean"] == 4
    assert m["tasks_by_category"] == {"cancel": 2}


def test_the_kl_coefficient_follows_its_target_and_survives_a_resume(tiny_tok, tiny_model, tmp_path):
    torch.manual_seed(0)
    rollout = toy_rollout_fn(tiny_tok)
    cfg = GRPOConfig(steps=3, tasks_per_step=4, group_size=8, lr=1e-2, kl_coef=0.01, kl_target=1e-7)
    history = GRPOTrainer(tiny_model, tiny_tok, list(range(4)), rollout, cfg, tmp_path / "r").run()
    updated = [m for m in history if m["optimizer_steps"]]
    assert len(updated) >= 2
    # each step's coefficient is the one before, doubled when that step's KL was above 1.5 x target
    coef = 0.01
    for m in history:
        assert m["kl_coef"] == pytest.approx(coef)
        if m["optimizer_steps"] and m["kl"] > 0:
            coef = coef * 2 if m["kl"] > 1.5e-7 else max(coef / 2, 0.01) if m["kl"] < 1e-7 / 1.5 else coef
    # the first step's policy is the reference (KL 0: kept); a moved one exceeds so small a target
    assert history[0]["kl"] == 0.0 and history[1]["kl_coef"] == 0.01 and history[2]["kl_coef"] == 0.02
    resumed = GRPOTrainer(tiny_model, tiny_tok, list(range(4)), rollout, cfg.model_copy(update={"steps": 4}),
                          tmp_path / "r")
    assert resumed.kl_coef == pytest.approx(coef)


def _weights(model):
    return torch.cat([p.detach().flatten().clone() for p in model.parameters()])


def _anchor_traces(tok):
    from rl.grpo.trace import trace_from_messages

    return [trace_from_messages(tok, [{"role": "user", "content": f"Please look up order #W{1000 + i}."},
                                      {"role": "assistant", "content": "It is pending. Anything else?"}])
            for i in range(6)]


def test_the_anchor_pulls_the_policy_toward_the_cold_start_data_when_no_group_is_informative(
        tiny_tok, tiny_model, tmp_path):
    from rl.grpo.logprobs import nll_loss

    def no_reward(model, tasks, group_size, step):  # every group all wrong: no policy gradient at all
        traces = toy_rollout_fn(tiny_tok)(model, tasks, group_size, step)
        for t in traces:
            t.reward = 0.0
        return traces

    anchor = _anchor_traces(tiny_tok)
    cfg = GRPOConfig(steps=3, tasks_per_step=2, group_size=2, lr=1e-2, save_every=3)
    before = _weights(tiny_model)
    plain = GRPOTrainer(tiny_model, tiny_tok, list(range(4)), no_reward, cfg, tmp_path / "plain", anchor=anchor)
    history = plain.run()
    assert torch.equal(_weights(tiny_model), before)  # nothing to learn from: the policy stays put
    assert history[0]["anchor_nll"] is None and history[0]["anchor_tokens"] == 0

    start, _, _ = nll_loss(tiny_model, anchor, 4096, tiny_tok.pad_token_id, backward=False)
    anchored = GRPOTrainer(tiny_model, tiny_tok, list(range(4)), no_reward,
                           cfg.model_copy(update={"anchor_coef": 1.0, "anchor_batch": 4}), tmp_path / "anchored",
                           anchor=anchor)
    history = anchored.run()
    end, _, _ = nll_loss(tiny_model, anchor, 4096, tiny_tok.pad_token_id, backward=False)
    assert end < start - 0.5, (start, end)
    assert [m["anchor_nll"] > 0 and m["anchor_tokens"] > 0 for m in history] == [True] * 3
    assert history[0]["anchor_nll"] == pytest.approx(start, rel=0.2)  # 4 of the 6 conversations


def test_an_anchor_coefficient_without_anchor_conversations_is_refused(tiny_tok, tiny_model, tmp_path):
    with pytest.raises(ValueError, match="anchor conversations"):
        GRPOTrainer(tiny_model, tiny_tok, [0], toy_rollout_fn(tiny_tok), GRPOConfig(anchor_coef=0.5), tmp_path)


@pytest.mark.parametrize(("mini_batches", "share"), [(1, 8 / 32), (2, 8 / 16)])
def test_dropping_uninformative_groups_keeps_verls_scale_when_asked(tiny_tok, tiny_model, tmp_path,
                                                                   mini_batches, share):
    import copy

    torch.manual_seed(2)
    rollout = toy_rollout_fn(tiny_tok)
    traces = rollout(tiny_model, list(range(4)), 8, 0)
    for i, t in enumerate(traces):  # group "0" informative (half right), the other three all wrong
        t.reward = float(t.group == "0" and i % 2)
    cfg = GRPOConfig(steps=1, tasks_per_step=4, group_size=8, lr=1e-3, kl_coef=0.0, grad_clip=1e9,
                     loss_agg="seq-mean-token-mean", drop_uninformative_groups=True, mini_batches=mini_batches)

    def gradient(keeps_scale, name):
        model = copy.deepcopy(tiny_model)
        m = GRPOTrainer(model, tiny_tok, list(range(4)), rollout,
                        cfg.model_copy(update={"drop_keeps_scale": keeps_scale}), tmp_path / name).update(traces)
        assert m["optimizer_steps"] == 1 and m["update_rollouts"] == 8
        return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])

    alone, scaled = gradient(False, "alone"), gradient(True, "scaled")
    assert alone.abs().sum() > 0
    # one group's mean over its 8 rollouts, against the mean over every rollout of its mini-batch
    torch.testing.assert_close(scaled, share * alone, rtol=1e-4, atol=1e-8)


def test_recomputed_behaviour_logprobs_make_the_update_independent_of_the_samplers_rounding(
        tiny_tok, tiny_model, tmp_path):
    """The sampler's log-probs carry float rounding that depends on which rollouts shared its batch;
    the trainer takes them again before the update, so rollouts that differ only there update the
    policy alike, to the bit; with the sampler's own they do not."""
    import copy

    torch.manual_seed(1)
    rollout = toy_rollout_fn(tiny_tok)
    traces = rollout(tiny_model, list(range(4)), 8, 0)
    for i, t in enumerate(traces):
        t.reward = float(i % 2)
    nudged = copy.deepcopy(traces)
    for t in nudged:  # what another batch composition leaves: a different last bit or so
        t.logprobs = [lp * (1 + 1e-6) for lp in t.logprobs]
        t.constrained = {p: (m, lp * (1 + 1e-6)) for p, (m, lp) in t.constrained.items()}

    def updated(batch, recompute, name):
        model = copy.deepcopy(tiny_model)
        cfg = GRPOConfig(steps=1, tasks_per_step=4, group_size=8, lr=1e-2, mini_batches=2,
                         recompute_behaviour=recompute)
        m = GRPOTrainer(model, tiny_tok, list(range(4)), rollout, cfg, tmp_path / name).update(batch)
        return _weights(model), m

    (a, ma), (b, _) = updated(traces, True, "a"), updated(nudged, True, "b")
    assert torch.equal(a, b)
    assert 0.0 < ma["behaviour_gap_max"] < 1e-3  # the sampler agreed with the trainer up to rounding
    (c, _), (d, _) = updated(traces, False, "c"), updated(nudged, False, "d")
    assert not torch.equal(c, d)


def test_a_group_that_earned_nothing_takes_its_tasks_guide_and_learns_from_it(tiny_tok, tiny_model, tmp_path):
    """Guidance (GRPOConfig.guide_failed_groups): a group whose rollouts all earned 0 takes its task's
    guide as one more member with reward 1, so GRPO learns where it had no signal; a group with a
    success, or a task without a guide, is left alone, and the step's reward is the rollouts' own."""
    import copy

    from rl.grpo.logprobs import nll_loss

    torch.manual_seed(3)
    rollout = toy_rollout_fn(tiny_tok)
    traces = rollout(tiny_model, list(range(3)), 4, 0)
    for i, t in enumerate(traces):  # task 0: all wrong; task 1: one success; task 2: all wrong, no guide
        t.reward = float(t.group == "1" and i % 4 == 0)
        t.info["category"] = f"kind{t.group}"
    guide = _anchor_traces(tiny_tok)[0]
    cfg = GRPOConfig(steps=1, tasks_per_step=3, group_size=4, lr=1e-2, drop_uninformative_groups=True,
                     guide_failed_groups=True)
    model = copy.deepcopy(tiny_model)
    start, _, _ = nll_loss(model, [guide], 4096, tiny_tok.pad_token_id, backward=False)
    trainer = GRPOTrainer(model, tiny_tok, list(range(3)), rollout, cfg, tmp_path / "guided", guides={"0": guide})
    m = trainer.update(traces)
    assert m["guided_groups"] == 1 and m["guided_by_category"] == {"kind0": 1}
    assert m["reward_mean"] == pytest.approx(1 / 12)  # the guide is not a rollout
    assert m["update_rollouts"] == 4 + 1 + 4  # group 1, and group 0 with its guide; group 2 is dropped
    assert m["behaviour_gap_max"] < 1e-4  # the guide has no sampling log-probs to compare
    end, _, _ = nll_loss(model, [guide], 4096, tiny_tok.pad_token_id, backward=False)
    assert end < start, (start, end)
    trainer.guides["1"] = guide
    assert trainer._guides_for(traces[4:8]) == []  # a group with a success takes no guide


def test_guidance_without_guides_or_recomputed_behaviour_is_refused(tiny_tok, tiny_model, tmp_path):
    with pytest.raises(ValueError, match="needs guides"):
        GRPOTrainer(tiny_model, tiny_tok, [0], toy_rollout_fn(tiny_tok), GRPOConfig(guide_failed_groups=True),
                    tmp_path)
    with pytest.raises(ValueError, match="recompute_behaviour"):
        GRPOConfig(guide_failed_groups=True, recompute_behaviour=False)
