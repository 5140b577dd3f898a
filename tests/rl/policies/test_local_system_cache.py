"""New conversations that open with the same system turn (a service's prompt and tool list) reuse its
key/value cache instead of processing it again, and answer exactly as without the cache."""

import asyncio

from rl.chat.format import render_conversation
from rl.models.tiny import TinyQwen3Recipe, build_tiny_model
from rl.models.tokenizer import train_bpe
from rl.policies.local import LocalPolicy

SYSTEM = {"role": "system", "content": "You are the store's agent. Be brief, check identity first. " * 8}
TOOLS = [{"type": "function", "function": {"name": "get_order_details", "parameters": {
    "type": "object", "properties": {"order_id": {"type": "string"}}}}}]


def test_the_system_turn_is_processed_once_for_every_new_conversation():
    tok = train_bpe([render_conversation([SYSTEM, {"role": "user", "content": "where is #W1234?"}], TOOLS)] * 3,
                    vocab_size=300)
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64)).eval()

    async def replies(reuse: bool) -> tuple[list[str], LocalPolicy]:
        policy = LocalPolicy(model, tok, greedy=True, max_new_tokens=8, reuse_cache=reuse)
        out = []
        for i in range(3):  # one after the other: the first one's system turn serves the next two
            msg = await policy.act(f"c{i}", [SYSTEM, {"role": "user", "content": f"where is #W12{i}4?"}], TOOLS)
            out.append(msg["raw"])
        return out, policy

    cached, with_cache = asyncio.run(replies(True))
    plain, without = asyncio.run(replies(False))
    assert cached == plain
    system_len = with_cache._episodes["c1"].system_len
    assert system_len > 50 and with_cache.stats.cached_tokens == 2 * system_len
    assert without.stats.cached_tokens == 0
