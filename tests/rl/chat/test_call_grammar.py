"""The tool-call grammar accepts exactly the calls the store can run, and constrained generation
writes only such calls while keeping the unmasked log-probs."""

import asyncio
import json
import re

import pytest
import torch

from rl.chat.call_grammar import DEAD, END, CallConstraint, ToolCallGrammar
from rl.chat.call_states import CopiedString, Reference
from rl.chat.format import TOOL_CALL_OPEN, parse_reply, render_conversation, render_tool_call
from rl.chat.views import ChatView
from rl.grpo.logprobs import micro_batches, token_logprobs
from rl.models.generation import generate_continuing
from rl.models.tiny import TinyQwen3Recipe, build_tiny_model
from rl.models.tokenizer import encode, train_bpe
from rl.policies.local import LocalPolicy

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
        "type": "object", "required": ["x"], "properties": {"x": {"type": "number"}, "exact": {"type": "boolean"}}}}},
    {"type": "function", "function": {"name": "list_all_product_types", "parameters": {
        "type": "object", "properties": {}}}},
]
REFS = ("<order_1>", "<order_2>")


@pytest.fixture(scope="module")
def tok():
    texts = []
    for i in range(120):
        texts.append(render_conversation([
            {"role": "user", "content": f"Please cancel order <order_1>, number {i}."},
            {"role": "assistant", "content": "Sure.", "tool_calls": [{"function": {
                "name": "cancel_pending_order",
                "arguments": {"order_id": "<order_1>", "reason": "no longer needed"}}}]},
            {"role": "tool", "content": '{"status": "cancelled"}'},
            {"role": "assistant", "content": "Done. Anything else?"}]))
    return train_bpe(texts, vocab_size=400, extra_tokens=REFS)


@pytest.fixture(scope="module")
def grammar(tok):
    return ToolCallGrammar(TOOLS, tok, text_tokens=REFS)


def body(name, args):
    """What follows <tool_call> in a rendered call, up to (not including) </tool_call>."""
    return render_tool_call(name, args).removeprefix(TOOL_CALL_OPEN).removesuffix("</tool_call>")


@pytest.mark.parametrize(("name", "args"), [
    ("cancel_pending_order", {"order_id": "<order_1>", "reason": "ordered by mistake"}),
    ("cancel_pending_order", {"reason": "no longer needed", "order_id": "#W123"}),
    ("return_delivered_order_items", {"order_id": "#W1", "item_ids": ["1", "22"], "payment_method_id": "gc_1"}),
    ("return_delivered_order_items", {"order_id": "#W1", "item_ids": []}),
    ("calculate", {"x": -12.5, "exact": True}),
    ("list_all_product_types", {}),
])
def test_rendered_calls_are_accepted(grammar, name, args):
    assert grammar.consume(grammar.start(), body(name, args)) == END


@pytest.mark.parametrize(("name", "args"), [
    ("cancel_order", {"order_id": "#W1", "reason": "no longer needed"}),          # unknown tool
    ("cancel_pending_order", {"order_id": "#W1"}),                                # required reason missing
    ("cancel_pending_order", {"order_id": "#W1", "reason": "changed my mind"}),   # not in the enum
    ("cancel_pending_order", {"order_id": "#W1", "reason": "no longer needed", "user_id": "x"}),  # unknown key
    ("cancel_pending_order", {"order_id": 'say "hi"', "reason": "no longer needed"}),  # quote in a string
    ("return_delivered_order_items", {"order_id": "#W1", "item_ids": "1"}),        # array expected
    ("calculate", {"x": "1"}),                                                     # number expected
])
def test_calls_the_store_cannot_run_are_rejected(grammar, name, args):
    assert grammar.consume(grammar.start(), body(name, args)) != END


def test_a_key_cannot_repeat_and_nothing_follows_the_end(grammar):
    twice = '\n{"name": "cancel_pending_order", "arguments": {"order_id": "a", "order_id": "b"'
    assert grammar.consume(grammar.start(), twice) == DEAD
    done = grammar.consume(grammar.start(), body("list_all_product_types", {}))
    assert done == END and grammar.step(done, " ") == DEAD
    assert grammar.allowed(done).nonzero().flatten().tolist() == [grammar.close_id]


def test_masks_allow_reference_tokens_in_strings_but_no_chat_markup(grammar, tok):
    in_string = grammar.consume(grammar.start(), '\n{"name": "cancel_pending_order", "arguments": {"order_id": "')
    mask = grammar.allowed(in_string)
    assert mask[tok.convert_tokens_to_ids("<order_1>")]
    for special in ("<|im_end|>", "<tool_call>", "</tool_call>", "<|im_start|>"):
        assert not mask[tok.convert_tokens_to_ids(special)], special
    assert grammar.allowed(in_string) is mask  # cached per state


def _model(tok, seed):
    torch.manual_seed(seed)
    return build_tiny_model(tok, TinyQwen3Recipe(hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                                 num_key_value_heads=1, head_dim=16, intermediate_size=64)).eval()


@pytest.mark.parametrize("greedy", [False, True])
def test_constrained_generation_writes_only_runnable_calls(tok, grammar, greedy):
    model = _model(tok, 0)
    prompt = encode(tok, render_conversation([{"role": "user", "content": "cancel <order_1>"}],
                                             add_generation_prompt=True) + TOOL_CALL_OPEN)
    rows = 12
    constraint = CallConstraint([grammar] * rows)
    constraint.states = [grammar.start()] * rows  # every row is already inside a call
    gens, _ = generate_continuing(model, [prompt] * rows, [None] * rows, max_new_tokens=400,
                                  eos_id=tok.eos_token_id, pad_id=tok.pad_token_id, greedy=greedy,
                                  generator=torch.Generator().manual_seed(3), constraint=constraint,
                                  return_caches=False)
    closed = 0
    for g in gens:
        if grammar.close_id not in g.ids:
            assert not g.finished  # only the token budget can stop a call before it closes
            continue
        first_call = g.ids[: g.ids.index(grammar.close_id) + 1]
        text = TOOL_CALL_OPEN + tok.decode(first_call, skip_special_tokens=False)
        closed += 1
        reply = parse_reply(text)
        assert reply.errors == [] and len(reply.tool_calls) == 1, text
        call = reply.tool_calls[0]
        assert call.name in grammar.schemas and set(call.arguments) <= set(grammar.schemas[call.name].kinds)
        assert grammar.schemas[call.name].required <= set(call.arguments)
    assert closed >= (1 if greedy else rows // 2)


def test_constrained_policy_records_the_unmasked_logprobs(tok):
    """A fresh constrained rollout's recorded log-probs are what the trainer recomputes (ratio 1)."""
    model = _model(tok, 1)
    policy = LocalPolicy(model, tok, max_new_tokens=120, constrain_calls=True, seed=5)
    forced = [tok.convert_tokens_to_ids(TOOL_CALL_OPEN)]

    async def run():
        msgs = [{"role": "system", "content": "agent"}, {"role": "user", "content": "cancel <order_1> please"}]
        for _ in range(3):
            msgs.append(await policy.act("e", msgs, TOOLS))
            msgs.append({"role": "user", "content": "ok"})

    # make every turn open a call at once, so the grammar is exercised on most tokens
    bias = torch.zeros(len(tok))
    bias[forced] = 50.0
    head = model.get_output_embeddings()
    with torch.no_grad():
        head.bias = torch.nn.Parameter(bias) if head.bias is None else head.bias
    asyncio.run(run())
    trace = policy.pop_trace("e")
    assert trace.n_generated > 20
    mb = next(iter(micro_batches([trace], 100_000, tok.pad_token_id)))
    lp, _ = token_logprobs(model, mb)
    got = lp[0][mb.loss_mask[0].bool()]
    want = torch.tensor(trace.logprobs)[torch.tensor(trace.loss_mask).bool()]
    assert torch.allclose(got, want, atol=1e-4)
    assert json.dumps(trace.loss_mask)  # the trace is complete


def test_the_view_decides_whether_calls_are_constrained(tok):
    model = _model(tok, 2)
    assert LocalPolicy(model, tok, view=ChatView(constrain_calls=True)).constrain_calls
    assert not LocalPolicy(model, tok, view=ChatView()).constrain_calls
    assert not LocalPolicy(model, tok, view=ChatView(constrain_calls=True), constrain_calls=False).constrain_calls
    held = LocalPolicy(model, tok, view=ChatView(tools=("cancel_pending_order",), constrain_calls=True))
    g = held._grammar(TOOLS)
    assert set(g.schemas) == {"cancel_pending_order"} and held._grammar(TOOLS) is g  # built once, shared
    assert LocalPolicy(model, tok)._grammar(TOOLS) is None


def test_reference_parameters_take_one_reference_and_free_strings_are_bounded(tok):
    g = ToolCallGrammar(TOOLS, tok, text_tokens=REFS, ref_params={"order_id": "order", "item_ids": "num"},
                        max_string=10)
    ok = body("return_delivered_order_items", {"order_id": "<order_2>", "item_ids": ["<num_1>", "<num_12>"]})
    assert g.consume(g.start(), ok) == END
    for bad in ({"order_id": "#W123", "item_ids": []}, {"order_id": "<order_1> x", "item_ids": []},
                {"order_id": "<num_1>", "item_ids": []}, {"order_id": "<order_1>", "item_ids": ["1234"]}):
        assert g.consume(g.start(), body("return_delivered_order_items", bad)) != END, bad
    in_ref = g.consume(g.start(), '\n{"name": "cancel_pending_order", "arguments": {"order_id": "')
    assert g.allowed(in_ref)[tok.convert_tokens_to_ids("<order_1>")]
    assert not g.allowed(in_ref)[tok.convert_tokens_to_ids("<|im_end|>")]
    long = {"order_id": "<order_1>", "item_ids": [], "payment_method_id": "x" * 11}
    assert g.consume(g.start(), body("return_delivered_order_items", long)) == DEAD
    assert g.consume(g.start(), body("return_delivered_order_items", {**long, "payment_method_id": "x" * 10})) == END


def test_spaced_values_start_free_strings_and_enums_with_one_space(tok):
    g = ToolCallGrammar(TOOLS, tok, text_tokens=REFS, ref_params={"order_id": "order", "item_ids": "num"},
                        spaced_values=True)
    assert g.consume(g.start(), body("cancel_pending_order", {"order_id": "<order_1>",
                                                              "reason": " no longer needed"})) == END
    for bad in ("no longer needed", "  no longer needed", " nope"):
        assert g.consume(g.start(), body("cancel_pending_order", {"order_id": "<order_1>", "reason": bad})) != END
    ok = {"order_id": "<order_1>", "item_ids": ["<num_1>"], "payment_method_id": " gc"}
    assert g.consume(g.start(), body("return_delivered_order_items", ok)) == END
    assert g.consume(g.start(), body("return_delivered_order_items", {**ok, "payment_method_id": "gc"})) != END


def test_a_conversation_can_call_only_with_the_references_it_has_shown(tok):
    g = ToolCallGrammar(TOOLS, tok, text_tokens=REFS, ref_params={"order_id": "order", "item_ids": "num"})
    assert g.needs("cancel_pending_order") == {"order"} and g.needs("return_delivered_order_items") == {"order", "num"}
    assert g.for_shown(None) is g
    nothing = g.for_shown(frozenset())  # no order named yet: no call that needs one
    assert set(nothing.schemas) == {"calculate", "list_all_product_types"}
    assert g.for_shown(frozenset()) is nothing  # cached per set of callable tools
    assert nothing.consume(nothing.start(), body("cancel_pending_order", {"order_id": "<order_1>",
                                                                          "reason": "no longer needed"})) == DEAD
    assert nothing.consume(nothing.start(), body("list_all_product_types", {})) == END
    one = g.for_shown(frozenset({"<order_2>"}))
    assert set(one.schemas) == {"cancel_pending_order", "calculate", "list_all_product_types"}
    # in the identifier slot only the shown reference may be written
    constraint = CallConstraint([g], [frozenset({"<order_2>"})])
    constraint.states = [constraint.grammars[0].consume(
        constraint.grammars[0].start(), '\n{"name": "cancel_pending_order", "arguments": {"order_id": "')]
    masked = constraint.mask_logits(torch.zeros(1, len(tok)))
    assert torch.isfinite(masked[0]).nonzero().flatten().tolist() == [tok.convert_tokens_to_ids("<order_2>")]
    # without shown references the slot takes any reference of its kind
    free = CallConstraint([g])
    free.states = list(constraint.states)
    allowed = torch.isfinite(free.mask_logits(torch.zeros(1, len(tok)))[0])
    assert allowed[tok.convert_tokens_to_ids("<order_1>")] and allowed[tok.convert_tokens_to_ids("<order_2>")]
    with pytest.raises(ValueError, match="one set of shown references and one of customer messages per row"):
        CallConstraint([g, g], [None])


def test_no_call_that_needs_a_customer_before_one_is_identified(tok):
    from rl.tasks.tools_meta import NEEDS_CUSTOMER

    g = ToolCallGrammar(TOOLS, tok, text_tokens=REFS, ref_params={"order_id": "order", "item_ids": "num"},
                        needs_customer=NEEDS_CUSTOMER)
    cancel = body("cancel_pending_order", {"order_id": "<order_1>", "reason": "no longer needed"})
    # the customer named an order, but no identity tool has found them: the tool layer would refuse
    before = g.for_shown(frozenset({"<order_1>"}))
    assert "cancel_pending_order" not in before.schemas and before.consume(before.start(), cancel) == DEAD
    assert before.consume(before.start(), body("list_all_product_types", {})) == END  # no customer data
    after = g.for_shown(frozenset({"<order_1>", "<user_1>"}))  # an identity tool showed a customer id
    assert "cancel_pending_order" in after.schemas and after.consume(after.start(), cancel) == END
    # without the setting (a model trained before it) the call stays writable
    plain = ToolCallGrammar(TOOLS, tok, text_tokens=REFS, ref_params={"order_id": "order", "item_ids": "num"})
    assert "cancel_pending_order" in plain.for_shown(frozenset({"<order_1>"})).schemas


def test_a_policy_with_references_writes_only_identifiers_the_conversation_showed():
    from rl.chat.views import REF_TOKENS

    texts = [render_conversation([
        {"role": "user", "content": f"Cancel <order_{1 + i % 3}> please, number {i}."},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {
            "name": "cancel_pending_order", "arguments": {"order_id": f"<order_{1 + i % 3}>",
                                                          "reason": "no longer needed"}}}]}]) for i in range(60)]
    rtok = train_bpe(texts, vocab_size=400, extra_tokens=REF_TOKENS)
    model = _model(rtok, 4)
    bias = torch.zeros(len(rtok))
    bias[rtok.convert_tokens_to_ids(TOOL_CALL_OPEN)] = 50.0  # every turn opens a call at once
    bias[[rtok.convert_tokens_to_ids(f"<order_{n}>") for n in range(3, 25)]] = 30.0  # and would name an unseen order
    head = model.get_output_embeddings()
    with torch.no_grad():
        head.bias = torch.nn.Parameter(bias)
    def policy(budget, *tools):
        return LocalPolicy(model, rtok, max_new_tokens=budget, seed=2,
                           view=ChatView(refs=True, constrain_calls=True, tools=tools))

    both, cancel_only = policy(40, "cancel_pending_order", "list_all_product_types"), policy(90, "cancel_pending_order")
    hello = [{"role": "system", "content": "agent"}, {"role": "user", "content": "hello"}]
    named = [hello[0], {"role": "user", "content": "It is order #W1234567, and also #W7654321."}]

    async def run():
        first = [await both.act(f"a{k}", hello, TOOLS) for k in range(2)]  # no order shown: no cancelling
        return first, [await cancel_only.act(f"b{k}", named, TOOLS) for k in range(3)]

    first, later = asyncio.run(run())
    assert all("cancel_pending_order" not in m["raw"] for m in first), first
    assert any("list_all_product_types" in m["raw"] for m in first), first
    written = [ref for m in later for ref in re.findall(r'"order_id": "([^"]*)"', m["raw"])]  # before expansion
    assert written and set(written) <= {"<order_1>", "<order_2>"}, later
    expanded = [json.loads(c["function"]["arguments"])["order_id"] for m in later for c in m.get("tool_calls") or []
                if c["function"]["name"] == "cancel_pending_order"]  # (a call cut off by the budget is malformed)
    assert set(expanded) <= {"#W1234567", "#W7654321"}


def test_free_text_names_only_references_the_conversation_showed():
    from rl.chat.views import REF_TOKENS

    texts = [render_conversation([
        {"role": "user", "content": f"Where is <order_{1 + i % 3}>, number {i}?"},
        {"role": "assistant", "content": f"Order <order_{1 + i % 3}> is pending."}]) for i in range(60)]
    rtok = train_bpe(texts, vocab_size=400, extra_tokens=REF_TOKENS)
    model = _model(rtok, 4)
    bias = torch.zeros(len(rtok))
    bias[[rtok.convert_tokens_to_ids(f"<order_{n}>") for n in range(1, 25)]] = 20.0  # names orders,
    bias[[rtok.convert_tokens_to_ids(f"<order_{n}>") for n in range(3, 25)]] = 30.0  # an unseen one first
    with torch.no_grad():
        model.get_output_embeddings().bias = torch.nn.Parameter(bias)
    named = [{"role": "system", "content": "agent"},
             {"role": "user", "content": "It is order #W1234567, and also #W7654321."}]

    def written(text_refs: bool) -> list[str]:
        policy = LocalPolicy(model, rtok, max_new_tokens=12, seed=3, view=ChatView(
            refs=True, constrain_calls=True, tools=("cancel_pending_order",), shown_refs_in_text=text_refs))

        async def run():
            return [await policy.act(f"t{k}", named, TOOLS) for k in range(3)]

        return [r for m in asyncio.run(run()) for r in re.findall(r"<order_\d+>", m["raw"])]

    free, held = written(False), written(True)
    assert set(free) - {"<order_1>", "<order_2>"}, free  # unconstrained, the model names unseen orders
    assert held and set(held) <= {"<order_1>", "<order_2>"}, held
    # the mask itself: outside a call, exactly the references not shown are ruled out
    constraint = CallConstraint([ToolCallGrammar(TOOLS, rtok, text_tokens=REF_TOKENS)], [frozenset({"<order_1>"})],
                                text_refs=True)
    masked = constraint.mask_logits(torch.zeros(1, len(rtok)))
    assert masked[0, rtok.convert_tokens_to_ids("<order_1>")] == 0
    assert masked[0, rtok.convert_tokens_to_ids("<order_2>")] == float("-inf")
    assert torch.isfinite(masked).sum() == len(rtok) - len(REF_TOKENS) + 1


ADDRESS_TOOL = {"type": "function", "function": {"name": "modify_pending_order_address", "parameters": {
    "type": "object", "required": ["order_id", "address1", "address2", "city", "state", "country", "zip"],
    "properties": {k: {"type": "string"} for k in ("order_id", "address1", "address2", "city", "state",
                                                    "country", "zip")}}}}
SAID = ("Hi, I want to change an address.", "My new address is 12 Oak Street, Apt 4, Austin, TX <zip_1>, USA.")
ADDRESS_FIELDS = ("address1", "address2", "city", "state", "country")


@pytest.fixture(scope="module")
def atok():
    from rl.chat.views import REF_TOKENS

    texts = [render_conversation([
        {"role": "user", "content": SAID[1] + f" Order <order_{1 + i % 2}>, number {i}."},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {
            "name": "modify_pending_order_address", "arguments": {
                "order_id": "<order_1>", "address1": " 12 Oak Street", "address2": " Apt 4", "city": " Austin",
                "state": " TX", "country": " USA", "zip": "<zip_1>"}}}]}]) for i in range(80)]
    return train_bpe(texts, vocab_size=500, extra_tokens=REF_TOKENS)


def _address_grammar(atok):
    from rl.chat.views import REF_PARAMS, REF_TOKENS, SAID_PARAMS

    return ToolCallGrammar([ADDRESS_TOOL], atok, text_tokens=REF_TOKENS, ref_params=REF_PARAMS,
                           spaced_values=True, copy_params=SAID_PARAMS)


def _spans(said):
    """Every word-aligned piece of the messages within one phrase: what a copied value may be."""
    out = {""}
    for msg in (phrase for m in said for phrase in re.split(r"[,.;:!?\n]", m)):
        starts = [m.start() for m in re.finditer(r"(?<![\w>])(?:<\w+_\d+>|\w)", msg)]
        ends = [m.end() for m in re.finditer(r"(?:<\w+_\d+>|\w)(?![\w<>])", msg)]
        out |= {msg[a:b] for a in starts for b in ends if b > a}
    return out


def test_copied_values_continue_and_close_only_on_word_aligned_spans_of_what_the_customer_said(atok):
    g = _address_grammar(atok)
    texts = {i: t for i, t in enumerate(g.texts) if t}
    head = '\n{"name": "modify_pending_order_address", "arguments": {"order_id": "<order_1>", "address1": " '
    at = g.consume(g.start(), head)
    assert at == CopiedString(0, at.after)

    def copy_mask(value):
        return g.copy_mask(g.consume(at, value), value, SAID)

    mask = copy_mask("Aus")
    assert mask is not None
    allowed = {texts[i] for i in mask.nonzero().flatten().tolist()}
    assert allowed and all(("Aus" + t.split('"')[0]) in "Austin" for t in allowed), allowed
    assert not any(t.startswith('"') for t in allowed)  # "Aus" ends no word: the value cannot close
    closing = copy_mask("Austin")  # a whole word at the end of its phrase: the value closes
    assert closing is not None
    after = {texts[i] for i in closing.nonzero().flatten().tolist()}
    assert after and all(t.startswith('"') for t in after), after
    assert copy_mask("Austin,") is None  # "Austin, TX" crosses a comma: never a value
    oak = {texts[i] for i in copy_mask("12 Oak").nonzero().flatten().tolist()}  # may close or go on
    assert any(t.startswith('"') for t in oak) and any(t.startswith(" ") for t in oak), oak
    start = copy_mask("")  # the first character of a value: a word start, or an empty value
    firsts = {texts[i][0] for i in start.nonzero().flatten().tolist()}
    words = re.findall(r"<\w+_\d+>|\w+", " ".join(SAID))
    assert firsts == {w[0] for w in words} | {'"'}, firsts
    assert copy_mask("Paris") is None  # nothing the customer said: the syntax alone applies
    assert copy_mask("tin") is None  # a span starts at the start of a word
    # a token that enters the value from before it (` {"` after `"address1": "`) is held to the same spans
    before = g.consume(g.start(), head[:-1])  # the value's leading space is still to be written
    entering = g.copy_mask(before, "", SAID)
    assert entering is not None
    ok = {texts[i] for i in entering.nonzero().flatten().tolist()}
    spans = _spans(SAID)
    assert " " in ok and ' {"' in texts.values() and ' {"' not in ok, ok
    assert all(t.startswith(" ") and any(x.startswith(t[1:].split('"')[0]) for x in spans) for t in ok), ok
    assert g.copy_mask(g.start(), "", SAID) is None  # the tool's name: nothing copied here


@pytest.mark.parametrize("seed", [0, 2])
def test_constrained_sampling_copies_every_address_field_from_the_customers_words(atok, seed):
    g = _address_grammar(atok)
    model = _model(atok, seed)
    prompt = encode(atok, render_conversation([{"role": "user", "content": m} for m in SAID],
                                              add_generation_prompt=True) + TOOL_CALL_OPEN)
    rows = 6
    shown = frozenset({"<order_1>", "<zip_1>"})

    def sample(said):
        """Six calls written under the constraint, with or without the customer's words."""
        constraint = CallConstraint([g] * rows, [shown] * rows, said)
        for r in range(rows):
            constraint.update(r, g.open_id)
        gens, _ = generate_continuing(model, [prompt] * rows, [None] * rows, max_new_tokens=200,
                                      eos_id=atok.eos_token_id, pad_id=atok.pad_token_id,
                                      generator=torch.Generator().manual_seed(seed), constraint=constraint,
                                      return_caches=False)
        return gens

    gens = sample([SAID] * rows)
    spans, closed = _spans(SAID), 0
    for gen in gens:
        if g.close_id not in gen.ids:
            continue
        closed += 1
        text = TOOL_CALL_OPEN + atok.decode(gen.ids[: gen.ids.index(g.close_id) + 1], skip_special_tokens=False)
        reply = parse_reply(text)
        assert reply.errors == [], text
        args = reply.tool_calls[0].arguments
        for key in ADDRESS_FIELDS:
            assert args[key].startswith(" ") and args[key][1:] in spans, (key, args[key])
    assert closed >= rows // 2
    # without the customer's words the same values are free text
    gens = sample(None)
    values = [re.findall(r'"(?:address1|city)": " ([^"]*)"', atok.decode(x.ids, skip_special_tokens=False))
              for x in gens]
    assert any(v not in spans for vs in values for v in vs), values


def test_a_policy_copies_address_values_only_from_the_customers_messages(atok):
    from rl.chat.views import SAID_PARAMS

    model = _model(atok, 7)
    bias = torch.zeros(len(atok))
    bias[atok.convert_tokens_to_ids(TOOL_CALL_OPEN)] = 50.0  # every turn opens a call at once
    head = model.get_output_embeddings()
    with torch.no_grad():
        head.bias = torch.nn.Parameter(bias)
    view = ChatView(refs=True, constrain_calls=True, spaced_values=True, copied_params=SAID_PARAMS,
                    tools=("modify_pending_order_address",))
    assert ChatView.from_manifest(view.describe()) == view
    policy = LocalPolicy(model, atok, max_new_tokens=200, seed=4, view=view)
    msgs = [{"role": "system", "content": "agent"},
            {"role": "user", "content": "My order is #W1234567."},
            {"role": "assistant", "content": "Sure."},  # replaced below by the policy's own turn
            {"role": "user", "content": "My new address is 12 Oak Street, Apt 4, Austin, TX 78701, USA."}]

    async def run():
        first = await policy.act("e", msgs[:2], [ADDRESS_TOOL])
        return await policy.act("e", [*msgs[:2], first, msgs[3]], [ADDRESS_TOOL])

    reply = asyncio.run(run())
    ep = policy._episodes["e"]
    assert ep.said == ("My order is <order_1>.", "My new address is 12 Oak Street, Apt 4, Austin, TX <zip_1>, USA.")
    calls = [json.loads(c["function"]["arguments"]) for c in reply.get("tool_calls") or []
             if c["function"]["name"] == "modify_pending_order_address"]
    spans = _spans(ep.said)
    assert calls, reply
    for args in calls:
        assert args["zip"] == "78701" and args["order_id"] == "#W1234567"
        for key in ADDRESS_FIELDS:  # the view's leading space is gone; the value is the customer's words
            assert args[key] in spans, (key, args[key])


def test_a_call_still_open_when_the_turn_budget_runs_out_is_finished(tok, grammar):
    model = _model(tok, 0)
    prompt = encode(tok, render_conversation([{"role": "user", "content": "cancel <order_1>"}],
                                             add_generation_prompt=True) + TOOL_CALL_OPEN)
    rows, budget = 6, 5

    def run(overrun):
        constraint = CallConstraint([grammar] * rows)
        constraint.states = [grammar.start()] * rows  # every row is inside a call
        gens, _ = generate_continuing(model, [prompt] * rows, [None] * rows, max_new_tokens=budget,
                                      eos_id=tok.eos_token_id, pad_id=tok.pad_token_id,
                                      generator=torch.Generator().manual_seed(3), constraint=constraint,
                                      return_caches=False, call_overrun=overrun)
        return gens

    cut = run(0)  # without overrun the budget cuts every call
    assert all(len(g.ids) == budget and grammar.close_id not in g.ids for g in cut)
    done = run(400)
    closed = [g for g in done if g.ids[-1] == grammar.close_id]
    assert len(closed) >= rows // 2
    for g in done:  # a row stops when its call closes, or at the overrun's end
        assert g.ids[-1] == grammar.close_id or len(g.ids) == budget + 400
        assert g.ids.count(grammar.close_id) <= 1
    for g in closed:
        text = TOOL_CALL_OPEN + tok.decode(g.ids, skip_special_tokens=False)
        assert parse_reply(text).errors == [], text


NUMBERED = "Send it to 4441 Sunset Boulevard, Portland, OR 97217 instead."


@pytest.fixture(scope="module")
def ntok():
    texts = [render_conversation([
        {"role": "user", "content": NUMBERED + f" Order <order_1>, number {i}."},
        {"role": "assistant", "content": f"I will ship <order_1> to {40 + i} Lakeview Drive, Columbus. Proceed?"}])
        for i in range(80)]
    from rl.chat.views import REF_TOKENS

    return train_bpe(texts, vocab_size=500, extra_tokens=REF_TOKENS)


def test_free_text_that_began_a_number_the_customer_said_copies_their_words(ntok):
    g = ToolCallGrammar(TOOLS, ntok, text_tokens=REFS)
    model = _model(ntok, 5)
    prompt = encode(ntok, render_conversation([{"role": "user", "content": NUMBERED}], add_generation_prompt=True))
    rows, began = 8, "I will ship it to 444"

    def sample(copy_numbers):
        constraint = CallConstraint([g] * rows, said=[(NUMBERED,)] * rows, copy_numbers=copy_numbers)
        constraint.free = [began] * rows  # every row has begun the customer's house number
        gens, _ = generate_continuing(model, [prompt] * rows, [None] * rows, max_new_tokens=30,
                                      eos_id=ntok.eos_token_id, pad_id=ntok.pad_token_id,
                                      generator=torch.Generator().manual_seed(1), constraint=constraint,
                                      return_caches=False)
        return gens

    copied = sample(True)
    for gen in copied:
        text = ntok.decode(gen.ids, skip_special_tokens=False)
        assert text.startswith("1 Sunset Boulevard"), text
        # the copied tokens are recorded as chosen under the constraint (what GRPO trains on)
        assert len(gen.constrained) >= len(encode(ntok, "1 Sunset Boulevard")), gen.constrained
    free = [ntok.decode(x.ids, skip_special_tokens=False) for x in sample(False)]
    assert not any(t.startswith("1 Sunset Boulevard") for t in free), free


def test_a_policy_copies_the_customers_street_after_their_house_number(ntok):
    # the view shows the house number as a reference token: "Send it to <num_1> Sunset Boulevard, ..."
    model = _model(ntok, 6)
    bias = torch.zeros(len(ntok))
    bias[ntok.convert_tokens_to_ids("<num_1>")] = 50.0  # the model writes nothing but the house number
    with torch.no_grad():
        model.get_output_embeddings().bias = torch.nn.Parameter(bias)
    msgs = [{"role": "system", "content": "agent"}, {"role": "user", "content": NUMBERED}]

    def reply(copy):
        view = ChatView(refs=True, constrain_calls=True, spaced_values=True, copy_said_numbers=copy)
        assert ChatView.from_manifest(view.describe()) == view
        policy = LocalPolicy(model, ntok, max_new_tokens=12, greedy=True, view=view)
        return asyncio.run(policy.act("e", msgs, TOOLS))["content"]

    assert reply(False) == "4441" * 12
    copied = reply(True)  # after the customer's house number, the rest of their street
    assert copied.startswith("4441 Sunset Boulevard4441"), copied
    assert set(copied.removeprefix("4441 Sunset Boulevard").split("4441")) == {""}


NAME_TOOL = {"type": "function", "function": {"name": "find_user_id_by_name_zip", "parameters": {
    "type": "object", "required": ["first_name", "last_name", "zip"],
    "properties": {k: {"type": "string"} for k in ("first_name", "last_name", "zip")}}}}
NAME_SAID = ("I don't know my email. The account is under the name <name_1> Muller, zip code <zip_1>.",)


@pytest.mark.parametrize("whole_names", [False, True])
def test_with_whole_names_a_copied_name_is_never_empty_and_each_word_is_capitalised(atok, whole_names):
    from rl.chat.views import NAME_PARAMS, REF_PARAMS, REF_TOKENS, SAID_PARAMS

    g = ToolCallGrammar([NAME_TOOL], atok, text_tokens=REF_TOKENS, ref_params=REF_PARAMS, copy_params=SAID_PARAMS,
                        name_params=NAME_PARAMS if whole_names else ())
    head = '\n{"name": "find_user_id_by_name_zip", "arguments": {"first_name": "'
    at = g.consume(g.start(), head)
    assert isinstance(at, CopiedString) and at.name == whole_names
    # the holes a GRPO model found with the held-out customer (bench/results/README.md, `dev-status`)
    for bad in ('"', 'email"', 'the"', 'Omar "', ' Omar"', 'Omar  Muller"', '<order_1>"', '<zip_1>"'):
        assert (g.consume(at, bad) is DEAD) == whole_names, bad
    for good in ('Muller"', '<name_1>"', '<name_1> Muller"', "O'Brien-Smith\""):
        assert g.consume(at, good) is not DEAD, good
    # with the customer's words: what may start the value is a capitalised word or a reference they said
    texts = {i: t for i, t in enumerate(g.texts) if t}
    firsts = {texts[i][0] for i in g.copy_mask(at, "", NAME_SAID).nonzero().flatten().tolist()}
    if whole_names:
        assert firsts and all(c.isupper() or c == "<" for c in firsts), firsts
    else:
        assert '"' in firsts and any(c.islower() for c in firsts), firsts
    # a value that is not a name (the zip) is as before
    zip_at = g.consume(g.start(), head + 'Muller", "last_name": "Muller", "zip": "')
    assert isinstance(zip_at, Reference)
