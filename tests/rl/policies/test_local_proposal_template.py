"""With `proposal_template`, a local policy's proposal keeps the teacher's wording: a model that
would break its proposal (a cancellation reason the store does not take, sampled or greedy) still
writes a whole one, in the customer's reference, and the tokens chosen under the template are
recorded as constrained (what GRPO trains on). With `writes_follow_proposal`, the write after a
proposal names what the proposal named; with `reason_follows_proposal`, a cancellation writes the
reason it proposed."""

import asyncio
import json

import pytest
import torch

from rl.chat.format import render_conversation
from rl.chat.proposal_template import TRIGGER
from rl.chat.views import ChatView
from rl.models.tiny import TinyQwen3Recipe, build_tiny_model
from rl.models.tokenizer import encode, train_bpe
from rl.policies.local import LocalPolicy, RowLimits

TOOLS = [{"type": "function", "function": {"name": name, "parameters": {
    "type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"}}}}}
    for name in ("get_order_details", "cancel_pending_order")]
PROPOSAL = TRIGGER + " cancel order <order_1> with the reason 'no longer needed'; the refund goes to the original " \
                     "payment. Do you confirm (yes/no)?"
BROKEN = TRIGGER + " cancel order <order_1> with the reason 'lost it, lost it, lost it'"
VIEW = ChatView(refs=True, constrain_calls=True, shown_refs_in_text=True)


def _tok():
    texts = [render_conversation([{"role": "user", "content": f"cancel order <order_{i % 3 + 1}> please"},
                                  {"role": "assistant", "content": PROPOSAL.replace("no longer needed", r)},
                                  {"role": "assistant", "content": BROKEN}])
             for i, r in enumerate(["no longer needed", "ordered by mistake"] * 10)]
    return train_bpe(texts, vocab_size=500, extra_tokens=VIEW.extra_tokens)


def _steer(model, tok, text: str = BROKEN) -> None:
    """Make the model answer with `text` (by default the trigger and a reason the store does not
    take): a hook adds a large logit to the token of `text` at each position of the reply (a real
    model's forward, a preference it has for one text)."""
    reply = encode(tok, text) + [tok.eos_token_id]
    start = {}

    def hook(module, args, kwargs, out):
        pos = kwargs["position_ids"]
        if pos.shape[1] > 1:  # the prompt: the reply starts after it
            start["at"] = int(pos[0, -1]) + 1
        k = int(pos[0, -1]) + 1 - start["at"]
        out.logits[:, -1, reply[min(k, len(reply) - 1)]] += 12.0
        return out

    model.register_forward_hook(hook, with_kwargs=True)


@pytest.mark.parametrize("greedy", [True, False])
def test_a_model_that_breaks_its_proposal_writes_a_whole_one_under_the_template(greedy):
    tok = _tok()
    torch.manual_seed(3)
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64)).eval()
    msgs = [{"role": "system", "content": "agent"}, {"role": "user", "content": "Please cancel order #W1234567."}]
    _steer(model, tok)

    def reply(view):
        assert ChatView.from_manifest(view.describe()) == view
        policy = LocalPolicy(model, tok, max_new_tokens=120, view=view, greedy=greedy, seed=1)
        out = asyncio.run(policy.act("e", msgs, TOOLS))
        return out, policy.pop_trace("e")

    free, _ = reply(VIEW)
    assert free["content"].startswith(TRIGGER) and "(yes/no)" not in free["content"]
    held, trace = reply(ChatView(**{**VIEW.__dict__, "proposal_template": True}))
    said = held["content"]
    proposal = said[: said.index("(yes/no)?") + len("(yes/no)?")]  # what follows it is free text again
    assert proposal in (PROPOSAL.replace("<order_1>", "#W1234567"),
                        PROPOSAL.replace("<order_1>", "#W1234567").replace("no longer needed", "ordered by mistake"))
    assert len(trace.constrained) >= len(encode(tok, proposal[len(TRIGGER):])) - 2


def test_the_policy_builds_its_constraint_from_the_view():
    tok = _tok()
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64))
    view = ChatView(**{**VIEW.__dict__, "compact_results": True, "compact_schemas": True, "copy_product_names": True,
                       "proposal_template": True, "proposal_said_items": True})
    assert ChatView.from_manifest(view.describe()) == view
    policy = LocalPolicy(model, tok, view=view)
    grammar = policy._grammar(TOOLS)
    c = policy._constraint([RowLimits(grammar, frozenset(), ("hi",), ("Desk Lamp",))])
    assert c.said_items and c.proposal is grammar.proposal_template(False, item_options=False)
    plain = LocalPolicy(model, tok, view=VIEW)._constraint([RowLimits(grammar, frozenset(), ("hi",))])
    assert plain.proposal is None and not plain.said_items
    # whole names: the policy's grammar holds its copied names (and the view's manifest keeps it)
    from rl.chat.views import SAID_PARAMS

    named = ChatView(**{**view.__dict__, "copied_params": SAID_PARAMS, "whole_names": True})
    assert ChatView.from_manifest(named.describe()) == named
    assert LocalPolicy(model, tok, view=named)._grammar(TOOLS).automaton.name_params == {"first_name", "last_name"}
    assert policy._grammar(TOOLS).automaton.name_params == frozenset()


RETURN_TOOLS = [{"type": "function", "function": {"name": "return_delivered_order_items", "parameters": {
    "type": "object", "required": ["order_id", "item_ids"], "properties": {
        "order_id": {"type": "string"}, "item_ids": {"type": "array", "items": {"type": "string"}}}}}}]
ORDER = {"order_id": "#W1234567", "status": "delivered",
         "items": [{"item_id": "1111111111", "name": "Desk Lamp"}, {"item_id": "2222222222", "name": "Jigsaw Puzzle"}]}


def test_after_a_proposal_the_write_names_what_it_proposed():
    tok = _tok()
    torch.manual_seed(3)
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64)).eval()
    wrong = '<tool_call>\n{"name": "return_delivered_order_items", "arguments": {"order_id": "<order_1>", ' \
            '"item_ids": ["<num_1>"]}}\n</tool_call>'
    _steer(model, tok, wrong)  # the model would return the Desk Lamp
    msgs = [{"role": "system", "content": "agent"},
            {"role": "user", "content": "I'd like to return the Jigsaw Puzzle from order #W1234567."},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "get_order_details", "arguments": '{"order_id": "#W1234567"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": json.dumps(ORDER)},
            {"role": "assistant", "content": TRIGGER + " return the Jigsaw Puzzle from order #W1234567, with the "
                                             "refund going to your gift card. Do you confirm (yes/no)?"},
            {"role": "user", "content": "Yes, please."}]

    def items(view):
        assert ChatView.from_manifest(view.describe()) == view
        policy = LocalPolicy(model, tok, max_new_tokens=60, view=view, adopt_history=True, greedy=True)
        reply = asyncio.run(policy.act("e", msgs, RETURN_TOOLS))
        return json.loads(reply["tool_calls"][0]["function"]["arguments"])["item_ids"]

    assert items(VIEW) == ["1111111111"]
    assert items(ChatView(**{**VIEW.__dict__, "writes_follow_proposal": True})) == ["2222222222"]


def test_by_status_a_delivered_order_is_not_offered_a_cancellation():
    tok = _tok()
    torch.manual_seed(3)
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64)).eval()
    _steer(model, tok)  # the model proposes to cancel order <order_1>
    msgs = [{"role": "system", "content": "agent"},
            {"role": "user", "content": "Please cancel order #W1234567."},
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
                "name": "get_order_details", "arguments": '{"order_id": "#W1234567"}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": json.dumps(ORDER)}]

    def said(view):
        assert ChatView.from_manifest(view.describe()) == view
        policy = LocalPolicy(model, tok, max_new_tokens=120, view=view, adopt_history=True, greedy=True)
        return asyncio.run(policy.act("e", msgs, TOOLS))["content"]

    held = ChatView(**{**VIEW.__dict__, "proposal_template": True})
    assert said(held).startswith(TRIGGER + " cancel order #W1234567")
    other = said(ChatView(**{**held.__dict__, "proposals_by_status": True}))
    assert other.startswith(TRIGGER) and not other.startswith(TRIGGER + " cancel"), other


def test_after_lookup_no_proposal_begins_before_a_lookup_has_shown_a_record():
    from rl.models.generation import unpack_allowed

    tok = _tok()
    torch.manual_seed(3)
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64)).eval()
    _steer(model, tok, PROPOSAL)  # the model proposes whatever it has seen
    start = [{"role": "system", "content": "agent"}, {"role": "user", "content": "Please cancel order #W1234567."}]

    def lookup(result, tool="get_order_details"):
        return [*start, {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": tool, "arguments": '{"order_id": "#W1234567"}'}}]},
                {"role": "tool", "tool_call_id": "c1", "content": result}]

    def said(view, msgs):
        assert ChatView.from_manifest(view.describe()) == view
        policy = LocalPolicy(model, tok, max_new_tokens=60, view=view, adopt_history=True, greedy=True)
        out = asyncio.run(policy.act("e", msgs, TOOLS))
        return out["content"] or "", policy.pop_trace("e")

    # a turn's first token is otherwise unconstrained here (the template holds only what follows the
    # trigger), so a constraint recorded there is the rule's
    held = ChatView(**{**VIEW.__dict__, "proposal_template": True, "shown_refs_in_text": False})
    first = ChatView(**{**held.__dict__, "propose_after_lookup": True})
    text, trace = said(held, start)
    assert text.startswith(TRIGGER) and trace.loss_mask.index(1) not in trace.constrained  # its first token: free
    opening = encode(tok, TRIGGER)[0]
    for msgs in (start, lookup("Error: order not found")):  # nothing looked up, or a lookup that failed
        text, trace = said(first, msgs)
        assert TRIGGER not in text and not TRIGGER.startswith(text.strip()[:2] or "-"), text
        at = trace.loss_mask.index(1)  # the turn's first token was drawn without the trigger's first token
        k, _ = trace.constrained[at]
        assert not unpack_allowed([trace.masks[k]], len(tok))[0, opening]
    assert said(first, lookup(json.dumps({**ORDER, "status": "pending"})))[0].startswith(TRIGGER + " cancel order #W")
    profile = {"name": {"first_name": "Mei", "last_name": "Kovacs"}, "payment_methods": {}, "orders": ["#W1234567"]}
    assert said(first, lookup(json.dumps(profile), "get_user_details"))[0].startswith(TRIGGER)


@pytest.mark.parametrize("result, record", [
    (json.dumps(ORDER), True),
    ('{"order_id":"<order_1>","status":"pending","items":[]}', True),  # compact, by reference
    ('{"name":"Mei Kovacs","payment_methods":["<payment_1>"],"orders":["<order_1>"]}', True),  # a profile
    ("Error: user not found", False),
    ("mei_kovacs_1234", False),  # an identified customer's id: nothing looked up yet
    ('{"name":"Desk Lamp","product_id":"1","available":[]}', False),  # a product
])
def test_a_record_is_an_orders_or_a_customers(result, record):
    from rl.policies.local import shows_record

    assert shows_record(result) == record


def test_refused_not_again_proposes_the_other_reason_after_a_refusal():
    tok = _tok()
    torch.manual_seed(3)
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64)).eval()
    _steer(model, tok, PROPOSAL)  # the model proposes 'no longer needed' whatever the customer said
    asked = PROPOSAL.replace("<order_1>", "#W1234567")
    start = [{"role": "system", "content": "agent"}, {"role": "user", "content": "Please cancel order #W1234567."},
             {"role": "assistant", "content": asked}]

    def said(view, reply):
        assert ChatView.from_manifest(view.describe()) == view
        policy = LocalPolicy(model, tok, max_new_tokens=120, view=view, adopt_history=True, greedy=True)
        out = asyncio.run(policy.act("e", [*start, {"role": "user", "content": reply}], TOOLS))
        return out["content"] or ""

    held = ChatView(**{**VIEW.__dict__, "proposal_template": True})
    refusing = ChatView(**{**held.__dict__, "refused_not_again": True})
    refusal = "That is not my reason, actually. It was a mistake to order it."
    assert said(held, refusal).startswith(asked)  # the refused reason again, as every model in `c12`
    assert said(refusing, refusal).startswith(asked.replace("no longer needed", "ordered by mistake"))
    # a reply with a yes refuses nothing: the template alone decides, as without the rule
    assert said(refusing, "Hmm, yes, but first tell me the refund.").startswith(asked)


CANCEL_TOOLS = [{"type": "function", "function": {"name": "cancel_pending_order", "parameters": {
    "type": "object", "required": ["order_id", "reason"], "properties": {
        "order_id": {"type": "string"},
        "reason": {"type": "string", "enum": ["no longer needed", "ordered by mistake"]}}}}}]


@pytest.mark.parametrize("spaced", [False, True])  # cpu-tiny's view writes free values after a space
def test_after_a_proposal_the_cancellation_writes_the_reason_it_proposed(spaced):
    tok = _tok()
    torch.manual_seed(3)
    model = build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                  num_key_value_heads=1, head_dim=16, intermediate_size=64)).eval()
    wrong = '<tool_call>\n{"name": "cancel_pending_order", "arguments": {"order_id": "<order_1>", ' \
            f'"reason": "{" " if spaced else ""}no longer needed"}}}}\n</tool_call>'
    _steer(model, tok, wrong)  # the model writes the reason the customer refused, as in `dev-refused`
    asked = PROPOSAL.replace("<order_1>", "#W1234567")
    msgs = [{"role": "system", "content": "agent"}, {"role": "user", "content": "Please cancel order #W1234567."},
            {"role": "assistant", "content": asked},
            {"role": "user", "content": "That is not my reason, actually. It was a mistake to order it."},
            {"role": "assistant", "content": asked.replace("no longer needed", "ordered by mistake")},
            {"role": "user", "content": "Okay, go ahead and do it."}]

    def reason(view, messages=msgs):
        assert ChatView.from_manifest(view.describe()) == view
        policy = LocalPolicy(model, tok, max_new_tokens=60, view=view, adopt_history=True, greedy=True)
        reply = asyncio.run(policy.act("e", messages, CANCEL_TOOLS))
        return json.loads(reply["tool_calls"][0]["function"]["arguments"])["reason"]

    held = ChatView(**{**VIEW.__dict__, "proposal_template": True, "writes_follow_proposal": True,
                       "spaced_values": spaced})
    following = ChatView(**{**held.__dict__, "reason_follows_proposal": True})
    assert reason(held) == "no longer needed"  # what the customer said yes to is not what is written
    assert reason(following) == "ordered by mistake"
    # with no proposal just before the turn, nothing holds the reason
    assert reason(following, msgs[:2]) == "no longer needed"
