"""Batched generation that continues conversations from their cached prefix gives the same tokens and
log-probs as processing the whole conversation again, for rows of different lengths and with
rows finishing at different times."""

import random

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM
from transformers.cache_utils import DynamicLayer

from rl.models.generation import ReservedLayer, generate_batch, generate_continuing

VOCAB, EOS, PAD = 120, 1, 0


def _model():
    torch.manual_seed(0)
    cfg = Qwen3Config(vocab_size=VOCAB, hidden_size=64, num_hidden_layers=2, num_attention_heads=2,
                      num_key_value_heads=1, head_dim=32, intermediate_size=128, eos_token_id=EOS,
                      pad_token_id=PAD, bos_token_id=None)
    return Qwen3ForCausalLM(cfg).eval()


def test_continuing_from_cached_prefixes_matches_full_prompts():
    model = _model()
    rng = random.Random(1)
    prompts = [[rng.randrange(2, VOCAB) for _ in range(n)] for n in (5, 17, 9)]
    kw = dict(max_new_tokens=6, eos_id=EOS, pad_id=PAD, greedy=True)
    gens, caches = generate_continuing(model, prompts, [None] * 3, **kw)
    plain = generate_batch(model, prompts, **kw)
    assert [g.ids for g in gens] == [g.ids for g in plain]
    for turn in range(2):  # two more turns: append the generation and a new "customer message"
        prompts = [p + g.ids + [rng.randrange(2, VOCAB) for _ in range(rng.randint(1, 9))]
                   for p, g in zip(prompts, gens, strict=True)]
        assert all(c.length < len(p) for c, p in zip(caches, prompts, strict=True))
        gens, caches = generate_continuing(model, prompts, caches, **kw)
        fresh, _ = generate_continuing(model, prompts, [None] * 3, **kw)
        assert [g.ids for g in gens] == [g.ids for g in fresh], turn
        for a, b in zip(gens, fresh, strict=True):
            assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-4)


def test_rows_that_finish_early_keep_exact_caches():
    model = _model()
    # make EOS likely after a few tokens for some rows by sampling; caches must cover exactly the
    # tokens fed for each row (prompt + generated ones except the last sampled token)
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        model.lm_head.weight[EOS] += 0.5 * model.lm_head.weight.norm(dim=-1).mean()
    prompts = [[5, 6, 7], [8, 9, 10, 11, 12, 13]]
    gens, caches = generate_continuing(model, prompts, [None, None], max_new_tokens=12, eos_id=EOS, pad_id=PAD,
                                       generator=g)
    for p, gen, c in zip(prompts, gens, caches, strict=True):
        assert c.length in (len(p) + len(gen.ids) - 1, len(p) + len(gen.ids))
        full = p + gen.ids
        ref = model(input_ids=torch.tensor([full[: c.length]]), use_cache=True).cache
        assert torch.allclose(ref.layers[0].keys[0], c.layers[0][0], atol=1e-4)
        assert torch.allclose(ref.layers[-1].values[0], c.layers[-1][1], atol=1e-4)


def test_reserved_layer_holds_what_concatenation_would_and_grows_past_its_headroom():
    torch.manual_seed(0)
    reserved, plain = ReservedLayer(headroom=3), DynamicLayer()
    for n in (5, 1, 1, 1, 4, 1):  # prefill, three steps within the headroom, then past it twice
        k, v = torch.randn(2, 1, n, 8), torch.randn(2, 1, n, 8)
        got, want = reserved.update(k, v), plain.update(k, v)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
        assert reserved.get_seq_length() == plain.get_seq_length()
    assert reserved.keys.shape == (2, 1, 13, 8)


def test_generation_matches_a_plain_forward_of_the_whole_sequence():
    model = _model()
    rng = random.Random(5)
    prompts = [[rng.randrange(2, VOCAB) for _ in range(n)] for n in (7, 12)]
    gens = generate_batch(model, prompts, max_new_tokens=8, eos_id=EOS, pad_id=PAD, greedy=True)
    for p, gen in zip(prompts, gens, strict=True):
        full = torch.tensor([p + gen.ids])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=full).logits[0].float(), -1)
        want = [int(logp[len(p) - 1 + i].argmax()) for i in range(len(gen.ids))]
        assert gen.ids == want
        got = [float(logp[len(p) - 1 + i, t]) for i, t in enumerate(gen.ids)]
        assert torch.allclose(torch.tensor(got), torch.tensor(gen.logprobs), atol=1e-4)


def _eos_biased_model(bias: float = 2.5):
    model = _model()

    def raise_eos(module, inputs, out):
        out[..., EOS] += bias
        return out

    model.lm_head.register_forward_hook(raise_eos)
    return model


def test_rows_leaving_the_batch_change_no_token_log_prob_or_cache():
    model = _eos_biased_model()  # turns end after a few tokens, at different times per row
    rng = random.Random(7)
    prompts = [[rng.randrange(2, VOCAB) for _ in range(rng.randint(3, 30))] for _ in range(12)]
    kw = dict(max_new_tokens=16, eos_id=EOS, pad_id=PAD)
    caches: list = [None] * len(prompts)
    left_early, rows = 0, []
    model.lm_head.register_forward_hook(lambda module, inputs, out: rows.append(out.shape[0]))
    for turn in range(3):
        rows.clear()
        a, ca = generate_continuing(model, prompts, caches, generator=torch.Generator().manual_seed(turn), **kw)
        left_early += min(rows) < len(prompts)  # the decoding batch shrank
        b, cb = generate_continuing(model, prompts, caches, generator=torch.Generator().manual_seed(turn),
                                    compact=False, **kw)
        assert [g.ids for g in a] == [g.ids for g in b] and [g.finished for g in a] == [g.finished for g in b]
        for x, y in zip(ca, cb, strict=True):
            assert x.length == y.length
            for (xk, xv), (yk, yv) in zip(x.layers, y.layers, strict=True):
                assert torch.allclose(xk, yk, atol=1e-5) and torch.allclose(xv, yv, atol=1e-5)
        for x, y in zip(a, b, strict=True):
            assert torch.allclose(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=1e-5)
        prompts = [p + g.ids + [rng.randrange(2, VOCAB) for _ in range(rng.randint(1, 9))]
                   for p, g in zip(prompts, a, strict=True)]
        caches = ca
    assert left_early == 3  # rows really left the batch in every turn


def test_compaction_keeps_a_constrained_rows_masks():
    """Rows that leave keep their place in the constraint: the rows still decoding are masked as before."""
    model = _eos_biased_model()

    class EvenOnly:  # a stand-in constraint: rows 1, 3, 5 ... may write only even tokens (or EOS)
        def __init__(self, n):
            self.states, self.masked = [None] * n, []

        def mask_logits(self, logits):
            out = logits.clone()
            rows = list(range(1, logits.shape[0], 2))
            odd = torch.arange(logits.shape[1]) % 2 == 1
            odd[EOS] = False
            out[1::2, odd] = float("-inf")
            self.masked = rows
            return out

        def update(self, row, token):
            pass

    prompts = [[3 + i, 4, 5 + i] for i in range(8)]
    gens, _ = generate_continuing(model, prompts, [None] * 8, max_new_tokens=20, eos_id=EOS, pad_id=PAD,
                                  generator=torch.Generator().manual_seed(0), constraint=EvenOnly(8))
    for i, g in enumerate(gens):
        if i % 2:
            assert all(t % 2 == 0 or t == EOS for t in g.ids)
            assert set(g.constrained) == set(range(len(g.ids)))
    assert len({len(g.ids) for g in gens}) > 1


def test_a_rows_own_stream_samples_the_same_tokens_whatever_shares_its_batch():
    model = _eos_biased_model(1.0)  # rows end at different times, so the batch compacts differently
    rng = random.Random(11)
    prompts = [[rng.randrange(2, VOCAB) for _ in range(rng.randint(3, 20))] for _ in range(6)]
    kw = dict(max_new_tokens=24, eos_id=EOS, pad_id=PAD)

    def play(rows: list[int]) -> dict[int, list[int]]:
        gens, _ = generate_continuing(model, [prompts[i] for i in rows], [None] * len(rows),
                                      streams=[random.Random(f"row{i}") for i in rows], **kw)
        return {i: g.ids for i, g in zip(rows, gens, strict=True)}

    together, reversed_, alone = play(list(range(6))), play([5, 3, 1, 4, 2, 0]), play([2])
    assert together == reversed_
    assert alone[2] == together[2]
    assert len({tuple(ids) for ids in together.values()}) == 6  # really sampled, not one fixed reply
    # a shared generator gives row 2 other tokens once other rows draw from it first
    shared = {i: generate_continuing(model, [prompts[j] for j in rows], [None] * len(rows),
                                     generator=torch.Generator().manual_seed(0), **kw)[0][rows.index(2)].ids
              for i, rows in enumerate(([2], [0, 1, 2, 3, 4, 5]))}
    assert shared[0] != shared[1]


def test_inverse_cdf_draws_follow_the_distribution_and_skip_impossible_tokens():
    from rl.models.generation import _inverse_cdf

    probs = torch.tensor([[0.0, 0.5, 0.0, 0.3, 0.2, 0.0]]).repeat(20_000, 1)
    rng = random.Random(0)
    u = torch.tensor([rng.random() for _ in range(20_000)], dtype=torch.float64)
    tok = _inverse_cdf(probs, u)
    counts = torch.bincount(tok, minlength=6).double() / 20_000
    assert counts[[0, 2, 5]].sum() == 0
    assert torch.allclose(counts[[1, 3, 4]], torch.tensor([0.5, 0.3, 0.2], dtype=torch.float64), atol=0.015)
    edge = _inverse_cdf(probs[:3], torch.tensor([0.0, 1.0 - 1e-17, 0.9999999999], dtype=torch.float64))
    assert edge.tolist() == [1, 4, 4]  # the ends of [0, 1) land on the first and last possible tokens
