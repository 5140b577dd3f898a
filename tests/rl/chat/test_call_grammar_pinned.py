"""Constrained greedy decoding is pinned: the tokens chosen under `CallConstraint` (calls with
enums, arrays, numbers, booleans, references, copied values; free text with unshown references
hidden) are those the grammar chose when these digests were recorded, so a rewrite of the grammar
that changes any mask changes a digest. Logits come from a seeded generator, not a model, so the
pins hold on any machine."""

import hashlib
import json

import pytest
import torch

from rl.chat.call_grammar import CallConstraint, ToolCallGrammar
from rl.chat.format import render_conversation
from rl.chat.views import REF_PARAMS, REF_TOKENS, SAID_PARAMS
from rl.models.tokenizer import train_bpe

TOOLS = [
    {"type": "function", "function": {"name": "cancel_pending_order", "parameters": {
        "type": "object", "required": ["order_id", "reason"], "properties": {
            "order_id": {"type": "string"},
            "reason": {"type": "string", "enum": ["no longer needed", "ordered by mistake"]}}}}},
    {"type": "function", "function": {"name": "return_delivered_order_items", "parameters": {
        "type": "object", "required": ["order_id", "item_ids"], "properties": {
            "order_id": {"type": "string"}, "item_ids": {"type": "array", "items": {"type": "string"}},
            "payment_method_id": {"type": "string"}}}}},
    {"type": "function", "function": {"name": "calculate", "parameters": {
        "type": "object", "required": ["x"], "properties": {"x": {"type": "number"}, "exact": {"type": "boolean"},
                                                           "n": {"type": "integer"}}}}},
    {"type": "function", "function": {"name": "modify_pending_order_address", "parameters": {
        "type": "object", "required": ["order_id", "address1", "address2", "city", "state", "country", "zip"],
        "properties": {k: {"type": "string"} for k in ("order_id", "address1", "address2", "city", "state",
                                                        "country", "zip")}}}},
]
SAID = ("Hi, I want to change an address.", "My new address is 12 Oak Street, Apt 4, Austin, TX <zip_1>, USA.")
SHOWN = [None, frozenset(), frozenset({"<order_1>"}), frozenset({"<order_2>", "<zip_1>", "<item_1>"}),
         frozenset({"<order_1>", "<zip_1>"})]


@pytest.fixture(scope="module")
def tok():
    texts = [render_conversation([
        {"role": "user", "content": SAID[1] + f" Order <order_{1 + i % 2}>, number {i}, item <item_{1 + i % 3}>."},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {
            "name": "modify_pending_order_address", "arguments": {
                "order_id": "<order_1>", "address1": " 12 Oak Street", "address2": " Apt 4", "city": " Austin",
                "state": " TX", "country": " USA", "zip": "<zip_1>"}}}]},
        {"role": "tool", "content": '{"status": "pending", "total": 12.5}'},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {
            "name": "calculate", "arguments": {"x": -12.5e3, "exact": True, "n": 7}}}]}]) for i in range(80)]
    return train_bpe(texts, vocab_size=500, extra_tokens=REF_TOKENS)


def _decode(tok, grammar, *, rows, in_call, said, text_refs, seed, steps=160):
    """Greedy choices (argmax of masked seeded logits) of `rows` rows, as token ids per row."""
    shown = [SHOWN[r % len(SHOWN)] for r in range(rows)]
    constraint = CallConstraint([grammar] * rows, shown, [said] * rows if said else None, text_refs=text_refs)
    if in_call:
        for r in range(rows):
            constraint.update(r, grammar.open_id)
    gen = torch.Generator().manual_seed(seed)
    ids: list[list[int]] = [[] for _ in range(rows)]
    done = [False] * rows
    for _ in range(steps):
        logits = torch.randn(rows, len(tok), generator=gen)
        choice = constraint.mask_logits(logits).argmax(dim=-1).tolist()
        for r, t in enumerate(choice):
            if done[r]:
                continue
            ids[r].append(t)
            constraint.update(r, t)
            done[r] = in_call and t == grammar.close_id
        if all(done):
            break
    return ids


def _digest(ids) -> str:
    return hashlib.sha256(json.dumps(ids).encode()).hexdigest()[:16]


# recorded with the grammar before it was split into modules (rl/chat/call_grammar.py at d8e4eaa)
PINNED = {"plain": "c59ffe8181cd96c9", "refs": "adfeba1469058e34", "refs_copy": "d655a95b9f34aa46",
          "text_refs": "c855ecc6188da10c"}


@pytest.mark.parametrize("case", ["plain", "refs", "refs_copy", "text_refs"])
def test_constrained_greedy_decoding_is_pinned(tok, case):
    refs = case != "plain"
    grammar = ToolCallGrammar(TOOLS, tok, text_tokens=REF_TOKENS if refs else (),
                              ref_params=REF_PARAMS if refs else None, spaced_values=refs,
                              copy_params=SAID_PARAMS if case == "refs_copy" else ())
    ids = _decode(tok, grammar, rows=10, in_call=case != "text_refs", said=SAID if case == "refs_copy" else (),
                  text_refs=case == "text_refs", seed=len(case))
    calls = [tok.decode(r, skip_special_tokens=False) for r in ids]
    if case != "text_refs":
        assert all(c.endswith("</tool_call>") or len(r) == 160 for c, r in zip(calls, ids, strict=True)), calls
    assert _digest(ids) == PINNED[case]
