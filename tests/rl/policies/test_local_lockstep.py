"""Lockstep batching: with episodes on the policy's roster, a batch waits until every one of them has
asked for its turn and holds them in key order, so which turns share a batch (and so the float
rounding of their logits) follows from the episodes, whatever their timing; without it, batches are
whoever arrived during the last generation."""

import asyncio
import random

from rl.chat.format import render_conversation
from rl.models.tiny import TinyQwen3Recipe, build_tiny_model
from rl.models.tokenizer import train_bpe
from rl.policies.local import LocalPolicy

SYSTEM = {"role": "system", "content": "You are the store's agent. Be brief."}
TURNS = {"a": 3, "b": 1, "c": 2, "d": 3}  # episodes that end at different turns leave the roster


def _model():
    tok = train_bpe([render_conversation([SYSTEM, {"role": "user", "content": "where is my order #W1234?"}])] * 3,
                    vocab_size=300)
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64)).eval()
    return tok, model


def _play(tok, model, *, lockstep: bool, delays: dict[str, list[float]]) -> tuple[LocalPolicy, dict[str, list[int]]]:
    policy = LocalPolicy(model, tok, max_new_tokens=6, lockstep=lockstep, seed=3)

    async def episode(key: str) -> list[int]:
        policy.open_episode(key, key)
        policy.join(key)
        messages = [SYSTEM, {"role": "user", "content": f"where is order #W12{ord(key)}?"}]
        try:
            for turn in range(TURNS[key]):
                await asyncio.sleep(delays[key][turn])  # tools, the database, the customer: any timing
                messages += [await policy.act(key, messages), {"role": "user", "content": "and then?"}]
        finally:
            policy.leave(key)
        return policy.pop_trace(key).input_ids

    async def main() -> dict[str, list[int]]:
        keys = list(TURNS)
        return dict(zip(keys, await asyncio.gather(*(episode(k) for k in keys)), strict=True))

    return policy, asyncio.run(main())


def _delays(seed: int) -> dict[str, list[float]]:
    rng = random.Random(seed)
    return {k: [rng.choice([0.0, 0.0, 0.05, 0.15]) for _ in range(3)] for k in TURNS}


def test_lockstep_batches_follow_the_episodes_not_their_timing():
    tok, model = _model()
    expected = [tuple(k for k in sorted(TURNS) if TURNS[k] > t) for t in range(3)]
    first, traces_1 = _play(tok, model, lockstep=True, delays=_delays(1))
    second, traces_2 = _play(tok, model, lockstep=True, delays=_delays(2))
    assert first.rounds == second.rounds == expected
    assert first.stats.calls == 3 and traces_1 == traces_2
    # without the roster, an episode held up by its tools misses the batch the others form
    free, _ = _play(tok, model, lockstep=False, delays={k: [0.3 if k == "d" else 0.0] * 3 for k in TURNS})
    assert free.rounds == [] and free.stats.calls > 3


def test_a_round_larger_than_a_batch_runs_in_key_order():
    tok, model = _model()
    policy = LocalPolicy(model, tok, max_new_tokens=4, lockstep=True, max_batch=3)

    async def main() -> None:
        async def episode(key: str, delay: float) -> None:
            policy.open_episode(key, key)
            policy.join(key)
            await asyncio.sleep(delay)
            await policy.act(key, [SYSTEM, {"role": "user", "content": "hello"}])
            policy.leave(key)

        await asyncio.gather(*(episode(k, d) for k, d in zip("edcba", [0.0, 0.1, 0.0, 0.05, 0.0], strict=True)))

    asyncio.run(main())
    assert policy.rounds == [("a", "b", "c"), ("d", "e")]


def test_leaving_without_a_turn_lets_the_others_go():
    """An episode that ends before it asks (a customer who leaves at once) never holds a batch up."""
    tok, model = _model()
    policy = LocalPolicy(model, tok, max_new_tokens=4, lockstep=True)

    async def main() -> None:
        for k in "xy":
            policy.open_episode(k, k)
            policy.join(k)

        async def quits() -> None:
            await asyncio.sleep(0.1)
            policy.leave("y")

        await asyncio.wait_for(asyncio.gather(policy.act("x", [SYSTEM, {"role": "user", "content": "hi"}]),
                                              quits()), 30)

    asyncio.run(main())
    assert policy.rounds == [("x",)]
