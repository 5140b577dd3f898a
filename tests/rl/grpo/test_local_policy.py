"""The local policy when a conversation outgrows its context: empty turns, no crash, and the
conversation can go on (the runner ends it at the turn limit)."""

import asyncio

from rl.policies.local import LocalPolicy


def test_over_budget_turns_are_empty_and_the_conversation_goes_on(tiny_tok, tiny_model):
    policy = LocalPolicy(tiny_model, tiny_tok, max_new_tokens=4, max_context=200, seed=0)

    async def main():
        msgs = [{"role": "system", "content": "s"}]
        replies = []
        for i in range(6):
            msgs.append({"role": "user", "content": f"order #W{i}000000 " * 4})
            reply = await policy.act("e", msgs)
            replies.append(reply)
            msgs.append(reply)
        return replies

    replies = asyncio.run(main())
    assert replies[-1].get("truncated") and replies[-1]["content"] == ""
    trace = policy.pop_trace("e")
    assert len(trace.input_ids) == len(trace.loss_mask) == len(trace.logprobs)
    assert policy.stats.cached_tokens > 0  # later turns continued from the cached prefix
