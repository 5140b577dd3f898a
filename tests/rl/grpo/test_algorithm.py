"""GRPO math against hand-computed values."""

import math

import pytest
import torch

from rl.grpo.algorithm import (
    KL_COEF_RANGE,
    adapt_kl_coef,
    clipped_policy_loss,
    group_advantages,
    grpo_token_loss,
    k2_kl,
    k3_kl,
    loss_weights,
    token_mean,
)


def test_group_advantages_hand_computed():
    # group a: rewards 1, 0, 0, 1 -> mean 0.5, sample std sqrt(1/3)=0.57735
    adv = group_advantages([1, 0, 0, 1], ["a"] * 4)
    s = math.sqrt(1 / 3)
    assert adv == pytest.approx([0.5 / (s + 1e-6), -0.5 / (s + 1e-6), -0.5 / (s + 1e-6), 0.5 / (s + 1e-6)])
    assert adv[0] == pytest.approx(0.866024, abs=1e-5)


def test_all_equal_groups_get_zero_and_single_member_uses_mean0_std1():
    adv = group_advantages([1, 1, 1, 0, 0, 1], ["a", "a", "a", "b", "b", "c"])
    assert adv[:5] == [0.0] * 5
    assert adv[5] == pytest.approx(1 / (1 + 1e-6))


def test_excluded_rollouts_leave_the_group_statistics():
    # without the excluded one the group is 1, 0 -> mean .5, std sqrt(.5)
    adv = group_advantages([1, 0, 1], ["a", "a", "a"], excluded=[False, False, True])
    s = math.sqrt(0.5)
    assert adv == pytest.approx([0.5 / (s + 1e-6), -0.5 / (s + 1e-6), 0.0])
    # an excluded failure does not make an otherwise all-equal group informative
    assert group_advantages([0, 0, 1], ["a"] * 3, excluded=[False, False, True]) == [0.0, 0.0, 0.0]


def test_k3_kl_values_and_clamp():
    logp = torch.tensor([-1.0, -2.0, -0.5, 0.0])
    ref = torch.tensor([-1.0, -1.0, -1.5, -30.0])
    kl = k3_kl(logp, ref)
    d = ref - logp
    expected = torch.exp(d) - d - 1
    assert kl[0].item() == 0.0
    assert kl[1].item() == pytest.approx(math.e - 2)      # d = 1
    assert kl[2].item() == pytest.approx(math.exp(-1))    # d = -1 -> e^-1 + 1 - 1
    assert kl[3].item() == 10.0 and expected[3].item() > 10  # clamped
    assert (kl >= 0).all()


def test_clip_hand_computed():
    old = torch.zeros(4)
    logp = torch.log(torch.tensor([1.5, 0.5, 1.5, 0.5]))
    adv = torch.tensor([1.0, 1.0, -1.0, -1.0])
    loss, clipped = clipped_policy_loss(logp, old, adv, clip=0.2)
    # A>0, ratio 1.5 -> max(-1.5, -1.2) = -1.2 (clipped); A>0, ratio .5 -> max(-.5, -.8) = -.5
    # A<0, ratio 1.5 -> max(1.5, 1.2) = 1.5; A<0, ratio .5 -> max(.5, .8) = .8 (clipped)
    assert loss.tolist() == pytest.approx([-1.2, -0.5, 1.5, 0.8])
    assert clipped.tolist() == [1.0, 0.0, 0.0, 1.0]


def test_token_mean_loss_ignores_masked_tokens_and_adds_kl():
    logp = torch.tensor([[-1.0, -2.0, -3.0]], requires_grad=True)
    old = logp.detach().clone()
    ref = torch.tensor([[-2.0, -2.0, -99.0]])
    adv = torch.full((1, 3), 2.0)
    mask = torch.tensor([[1, 1, 0]])
    total, stats = grpo_token_loss(logp, old, ref, adv, mask, kl_coef=0.001)
    # ratio 1 on both kept tokens: pg = -2 each; kl token0: d=-1 -> e^-1; token1: 0
    assert total.item() == pytest.approx(-4.0 + 0.001 * math.exp(-1))
    assert stats["tokens"].item() == 2 and stats["clipped"].item() == 0
    (total / stats["tokens"]).backward()
    assert logp.grad[0, 2].item() == 0.0  # the masked token gets no gradient
    assert token_mean(torch.tensor([1.0, 3.0, 100.0]), torch.tensor([1, 1, 0])).item() == 2.0


def test_loss_weights_token_mean_and_seq_mean_token_mean():
    # rollouts of 2, 6 and 0 generated tokens
    assert loss_weights([2, 6, 0], "token-mean") == pytest.approx([1 / 8, 1 / 8, 0.0])
    assert loss_weights([2, 6, 0], "seq-mean-token-mean") == pytest.approx([1 / 4, 1 / 12, 0.0])
    assert loss_weights([0, 0], "seq-mean-token-mean") == [0.0, 0.0]
    with pytest.raises(ValueError, match="unknown loss aggregation"):
        loss_weights([1], "seq-sum")


def test_seq_mean_token_mean_balances_a_long_failure_against_a_short_success():
    # group of two: success (2 tokens, A=+1) and failure (6 tokens, A=-1), ratio 1, no KL
    logp = torch.zeros((2, 6))
    mask = torch.tensor([[1, 1, 0, 0, 0, 0], [1, 1, 1, 1, 1, 1]])
    adv = torch.tensor([[1.0], [-1.0]]).expand(2, 6)
    for mode, expected in [("token-mean", (-2 + 6) / 8), ("seq-mean-token-mean", (-1 + 1) / 2)]:
        w = torch.tensor(loss_weights([2, 6], mode))[:, None].expand(2, 6)
        total, stats = grpo_token_loss(logp, logp, None, adv, mask, kl_coef=0.0, weights=w)
        assert total.item() == pytest.approx(expected, abs=1e-6)
        assert stats["tokens"].item() == 8  # statistics stay unweighted


def test_k2_kl_values():
    logp = torch.tensor([-1.0, -2.0, 0.0])
    ref = torch.tensor([-1.0, -1.0, -30.0])
    assert k2_kl(logp, ref).tolist() == pytest.approx([0.0, 0.5, 10.0])  # d = 1 -> 1/2; clamped at 10


def test_adaptive_kl_coefficient_doubles_above_and_halves_below_its_band():
    assert adapt_kl_coef(0.01, kl=0.2, target=0.1) == 0.02  # > 1.5 x target
    assert adapt_kl_coef(0.01, kl=0.05, target=0.1) == 0.005  # < target / 1.5
    assert adapt_kl_coef(0.01, kl=0.1, target=0.1) == 0.01  # within the band: kept
    assert adapt_kl_coef(0.01, kl=0.149, target=0.1) == 0.01 and adapt_kl_coef(0.01, kl=0.067, target=0.1) == 0.01
    assert adapt_kl_coef(8.0, kl=1.0, target=0.1) == KL_COEF_RANGE[1]
    assert adapt_kl_coef(1.5e-4, kl=0.0, target=0.1) == KL_COEF_RANGE[0]
    assert adapt_kl_coef(0.1, kl=0.0, target=0.1, floor=0.1) == 0.1  # never below the floor
    assert adapt_kl_coef(0.4, kl=0.01, target=0.1, floor=0.1) == 0.2
