"""The proposal templates: what the teacher says after "To confirm, I will" is in them, a broken
proposal is not, the fixed words are forced token by token, a reference is one whole token, and a
new address is held piece by piece to what the customer said."""

import pytest
import torch

from rl.chat.call_grammar import CallConstraint, ToolCallGrammar
from rl.chat.format import render_conversation
from rl.chat.proposal_template import TRIGGER
from rl.chat.views import ChatView
from rl.models.tokenizer import encode, train_bpe

TOOLS = [{"type": "function", "function": {"name": "get_order_details", "parameters": {
    "type": "object", "required": ["order_id"], "properties": {"order_id": {"type": "string"}}}}}]
CANCEL = " cancel order <order_1> with the reason 'no longer needed'; the refund goes to the original payment" \
         ". Do you confirm (yes/no)?"
ADDRESS = " change the shipping address of order <order_2> to <num_3> Sunset Boulevard, Suite <num_4>, Austin, " \
          "TX <num_5>, USA. Do you confirm (yes/no)?"
RETURN = " return the Water Bottle, the LED Light Bulb and the T-Shirt from order <order_1>, with the refund " \
         "going to your <payment_1>. Do you confirm (yes/no)?"
EXCHANGE = " exchange the Water Bottle (color: blue) from order <order_1> for the Water Bottle (color: red, " \
           "capacity: 1000ml), settling any price difference with your <payment_2>. Do you confirm (yes/no)?"
USER_ADDRESS = " update your default address to <num_3> Elm Street, Springfield, IL <num_5>, USA. Do you " \
               "confirm (yes/no)?"
PAYMENT = " change the payment method of order <order_1> to your <payment_2>. Do you confirm (yes/no)?"
SWAP = " modify order <order_1>: swap the Desk Lamp for the Desk Lamp (color: black), settling any price " \
       "difference with your <payment_1>. Do you confirm (yes/no)?"


@pytest.fixture(scope="module")
def grammar():
    texts = [render_conversation([{"role": "user", "content": "my new address is <num_3> Elm Street, Springfield"},
                                  {"role": "assistant", "content": TRIGGER + p}])
             for p in (CANCEL, ADDRESS, RETURN, EXCHANGE, USER_ADDRESS, PAYMENT, SWAP)] * 5
    tok = train_bpe(texts, vocab_size=600, extra_tokens=ChatView(refs=True).extra_tokens)
    return ToolCallGrammar(TOOLS, tok, text_tokens=ChatView(refs=True).extra_tokens)


@pytest.mark.parametrize("proposal", [CANCEL, ADDRESS, RETURN, EXCHANGE, USER_ADDRESS, PAYMENT, SWAP])
def test_every_form_the_teacher_words_is_a_complete_proposal(grammar, proposal):
    t = grammar.proposal_template(payment_refs=True, item_options=True)
    state = t.consume(t.start(), proposal)
    assert state and t.done(state)
    assert not t.done(t.consume(t.start(), proposal[:-1]))  # not before its last character


@pytest.mark.parametrize("broken", [
    " return the refund going to the refund going to",  # the loop sampled returns fell into
    " cancel order <order_1> with the reason 'lost it'",  # a reason the store does not take
    " return the water bottle from order",  # a product is named by its capitalised name
    " change the shipping address of order <order_1> to , Austin",  # an empty address piece
    " return the Water Bottle from order <order_1>, with the refund going to your Visa card",  # by reference
    "cancel order <order_1>",  # the space after the trigger
    " return the 798794 Sunset from order",  # a name is capitalised words
    " return the Desk Lamp Sunset Street Road from order",  # of at most three
    " return the <num_3> from order",  # an item by reference only with `item_refs`
    " return the Desk Lamp (color: black) from order",  # options only where the view shows them
])
def test_a_broken_proposal_leaves_every_template(grammar, broken):
    t = grammar.proposal_template(payment_refs=True)
    assert not t.consume(t.start(), broken)


def test_items_by_reference_and_with_options_where_the_view_has_them(grammar):
    said = " return the <num_3> and the Desk Lamp (color: black) from order <order_1>, with the refund going to " \
           "your <payment_1>. Do you confirm (yes/no)?"
    assert not grammar.proposal_template(payment_refs=True).consume(grammar.proposal_template(True).start(), said)
    t = grammar.proposal_template(payment_refs=True, item_refs=True, item_options=True)
    assert t.done(t.consume(t.start(), said))


def test_without_payment_refs_a_method_is_named_in_words(grammar):
    t = grammar.proposal_template(payment_refs=False)
    said = " return the Water Bottle from order <order_1>, with the refund going to your Visa card ending in 1234" \
           ". Do you confirm (yes/no)?"
    assert t.done(t.consume(t.start(), said))
    assert grammar.proposal_template(payment_refs=False) is t  # built once per grammar


def test_fixed_words_are_forced_and_references_are_whole_tokens(grammar):
    t = grammar.proposal_template(payment_refs=True)
    texts = grammar.texts
    state = t.consume(t.start(), " cancel order")
    allowed = [texts[i] for i in t.mask(state).nonzero().flatten().tolist()]
    assert allowed and all(" <order_".startswith(x) or x.startswith("<order_") for x in allowed), allowed
    state = t.consume(state, " ")
    allowed = [texts[i] for i in t.mask(state).nonzero().flatten().tolist()]
    assert allowed and all(x.startswith("<order_") and x.endswith(">") for x in allowed), allowed
    assert "<" not in allowed and "<order_1>" in allowed
    state = t.consume(state, "<order_1> with the reason '")
    first = {texts[i][0] for i in t.mask(state).nonzero().flatten().tolist()}
    assert first == {"n", "o"}  # "no longer needed" or "ordered by mistake"
    # no special token inside a proposal: it is not cut by an end of turn or a tool call
    assert not t.mask(state)[grammar.open_id] and not t.mask(state)[grammar.tokenizer.eos_token_id]


def test_an_address_is_held_to_the_customers_words_piece_by_piece(grammar):
    t = grammar.proposal_template(payment_refs=True)
    said = ("My new address is <num_3> Elm Street, Springfield, IL <num_5>, USA.",)
    # a token that enters the address from before it is held too (" to", then " Sunset")
    before, _ = t.follow(t.start(), "", " change the shipping address of order <order_1> to")
    assert not t.in_address(before)
    entering = {grammar.texts[i] for i in t.address_mask(before, "", said).nonzero().flatten().tolist()}
    assert " " in entering and " Elm" in entering and not any(x.startswith((" Sun", " t", " O")) for x in entering)
    state, piece = t.follow(t.start(), "", " change the shipping address of order <order_1> to <num_3>")
    assert piece == "<num_3>" and t.in_address(state)
    mask = t.address_mask(state, piece, said)
    assert mask is not None
    allowed = {grammar.texts[i] for i in mask.nonzero().flatten().tolist()}
    assert " Elm" in allowed or " E" in allowed
    assert not any(x.startswith(" Sun") or x.startswith(" Oak") for x in allowed)  # not what the customer said
    state, piece = t.follow(state, piece, " Elm Street, Spring")
    assert piece == "Spring"
    allowed = {grammar.texts[i] for i in t.address_mask(state, piece, said).nonzero().flatten().tolist()}
    assert allowed and all("field".startswith(x) or x.startswith("field") for x in allowed), allowed
    # the customer has not said an address: the template alone holds the text
    assert t.address_mask(state, piece, ("I want to change my address.",)) is None
    # past the address the pieces no longer matter
    state, piece = t.follow(state, piece, "field, IL <num_5>, USA.")
    assert piece == "" and not t.in_address(state)


@pytest.mark.parametrize("proposal", [CANCEL, ADDRESS, RETURN, EXCHANGE, USER_ADDRESS, PAYMENT, SWAP])
def test_where_no_address_is_ahead_the_customers_words_leave_the_templates_mask(grammar, proposal):
    """`reaches_address` only skips work: wherever it says no address is ahead, `address_mask` is
    the template's own mask, at every token boundary of every form."""
    t = grammar.proposal_template(payment_refs=True, item_options=True)
    said = ("My new address is <num_3> Elm Street, Springfield, IL <num_5>, USA.",)
    state, piece, skipped = t.start(), "", 0
    assert t.reaches_address(state)
    for i in encode(grammar.tokenizer, proposal):
        if not t.reaches_address(state):
            skipped += 1
            assert torch.equal(t.address_mask(state, piece, said), t.mask(state))
        state, piece = t.follow(state, piece, grammar.texts[i])
    has_address = proposal in (ADDRESS, USER_ADDRESS)
    assert skipped > 0 and t.reaches_address(t.consume(t.start(), proposal[:20])) == has_address


def test_tokens_follow_the_template_as_characters_do(grammar):
    t = grammar.proposal_template(payment_refs=True)
    state = t.start()
    for i in encode(grammar.tokenizer, RETURN):
        assert t.mask(state)[i], grammar.texts[i]
        state, _ = t.follow(state, "", grammar.texts[i])
    assert t.done(state)


def test_a_row_is_held_from_the_trigger_to_the_question_and_names_end_where_shown_ones_do(grammar):
    tok = grammar.tokenizer
    template = grammar.proposal_template(payment_refs=True)
    c = CallConstraint([grammar], shown=[frozenset({"<order_1>", "<payment_1>"})], text_refs=True,
                       products=[("Desk Lamp", "Water Bottle")], proposal=template)
    for i in encode(tok, "Sure. " + TRIGGER + " return the Desk Lamp"):
        c.update(0, i)
    assert c.proposing[0] is not None
    allowed = {grammar.texts[i] for i in torch.isfinite(c.mask_logits(torch.zeros(1, len(tok)))[0])
               .nonzero().flatten().tolist() if i < len(grammar.texts)}
    assert allowed and not any(a.startswith(" S") or a.startswith(" W") for a in allowed), allowed
    assert " from" in allowed or " " in allowed
    assert c.masked == [0]  # recorded as constrained
    for i in encode(tok, " from order <order_1>, with the refund going to your <payment_1>. Do you confirm (yes/no)?"):
        c.update(0, i)
    assert c.proposing[0] is None  # complete: free text again
    assert torch.isfinite(c.mask_logits(torch.zeros(1, len(tok)))[0, tok.eos_token_id])  # the turn may end


def _allowed(c, tok, grammar):
    logits = c.mask_logits(torch.zeros(1, len(tok)))[0]
    return {grammar.texts[i] for i in torch.isfinite(logits).nonzero().flatten().tolist() if i < len(grammar.texts)}


def _row(grammar, said, text, said_items=True):
    c = CallConstraint([grammar], shown=[frozenset({"<order_1>", "<payment_1>"})], said=[said],
                       products=[("Desk Lamp", "Water Bottle", "Tea Kettle")],
                       proposal=grammar.proposal_template(payment_refs=True), said_items=said_items)
    for i in encode(grammar.tokenizer, text):
        c.update(0, i)
    return c


def test_with_said_items_a_list_names_the_products_the_customer_named_each_once(grammar):
    tok = grammar.tokenizer
    t = grammar.proposal_template(payment_refs=True)
    after = t.consume(t.start(), " return the Desk Lamp")
    more = {grammar.texts[i] for i in t.more_items(after).nonzero().flatten().tolist()}
    assert more and all(x.startswith(",") or " and the".startswith(x) or x.startswith(" a") for x in more), more
    one = ("I'd like to return the desk lamp, please.",)
    c = _row(grammar, one, TRIGGER + " return the ")
    assert all(x.startswith("D") or "Desk Lamp".startswith(x) for x in _allowed(c, tok, grammar))
    c = _row(grammar, one, TRIGGER + " return the Desk Lamp")
    allowed = _allowed(c, tok, grammar)
    assert " from" in allowed or " " in allowed
    assert not any(x.startswith(",") or x.startswith(" a") for x in allowed), allowed  # nothing else to list
    both = ("Return the Desk Lamp and the Tea Kettle.",)
    c = _row(grammar, both, TRIGGER + " return the Desk Lamp and the ")
    assert all(x.startswith("T") or "Tea Kettle".startswith(x) for x in _allowed(c, tok, grammar))  # once each
    # without the setting, or when the customer named none of them, any shown product
    c = _row(grammar, one, TRIGGER + " return the Desk Lamp and the ", said_items=False)
    assert any(x.startswith("W") for x in _allowed(c, tok, grammar))
    c = _row(grammar, ("Return my order.",), TRIGGER + " return the ")
    assert any(x.startswith("W") for x in _allowed(c, tok, grammar))
    # a swap's new variants are a list of their own: the same product again
    c = _row(grammar, one, TRIGGER + " exchange the Desk Lamp from order <order_1> for the ")
    assert any(x.startswith("D") for x in _allowed(c, tok, grammar))


def test_by_status_a_proposal_offers_only_what_the_orders_status_allows(grammar):
    t = grammar.proposal_template(payment_refs=True)
    assert t.order_status(t.consume(t.start(), " cancel order ")) == "pending"
    assert t.order_status(t.consume(t.start(), " return the Desk Lamp from order ")) == "delivered"
    delivered = t.start(frozenset({"delivered"}))
    assert not t.consume(delivered, " cancel") and not t.consume(delivered, " change the shipping")
    assert t.consume(delivered, " return") and t.consume(delivered, " update your default address")
    assert t.consume(t.start(frozenset({"pending"})), " cancel") and not t.consume(t.start(frozenset()), " cancel")
    tok = grammar.tokenizer
    c = CallConstraint([grammar], shown=[frozenset({"<order_1>", "<order_2>", "<payment_1>"})], text_refs=True,
                       proposal=t, orders=[{"<order_1>": "delivered", "<order_2>": "pending"}])
    for i in encode(tok, TRIGGER + " cancel order "):
        c.update(0, i)
    allowed = _allowed(c, tok, grammar)
    assert "<order_2>" in allowed and "<order_1>" not in allowed  # only the pending one is cancelled
    c = CallConstraint([grammar], shown=[frozenset({"<order_1>"})], text_refs=True, proposal=t,
                       orders=[{"<order_1>": "delivered"}])
    for i in encode(tok, TRIGGER):
        c.update(0, i)
    first = _allowed(c, tok, grammar)
    assert " re" in first and not any(x.startswith((" c", " m")) for x in first), first
    # an order the conversation has not looked up is never named (shown, but its status unknown)
    c = CallConstraint([grammar], shown=[frozenset({"<order_1>", "<order_2>", "<payment_1>"})], text_refs=True,
                       proposal=t, orders=[{"<order_2>": "pending"}])
    for i in encode(tok, TRIGGER + " cancel order "):
        c.update(0, i)
    allowed = _allowed(c, tok, grammar)
    assert "<order_2>" in allowed and "<order_1>" not in allowed
    # nothing looked up yet: every template, as without the setting (one held to the default
    # address's update wrote nonsense addresses: bench/results/README.md, `dev-lookups`)
    c = CallConstraint([grammar], shown=[frozenset({"<order_1>"})], text_refs=True, proposal=t, orders=[{}])
    for i in encode(tok, TRIGGER):
        c.update(0, i)
    first = _allowed(c, tok, grammar)
    assert any(x.startswith(" c") for x in first) and any(x.startswith(" re") for x in first), first


def _writes_trigger(c, grammar, text: str) -> bool:
    """Whether some token the row may write next makes its free text (`text` so far) begin the
    trigger at the start of the turn or contain it."""
    lead = text.lstrip()
    for x in _allowed(c, grammar.tokenizer, grammar) - {None}:
        after = (lead + x).lstrip()
        if TRIGGER in text + x or not lead and after and TRIGGER.startswith(after):
            return True
    return False


@pytest.mark.parametrize("may_propose", [True, False])
def test_a_row_that_may_not_propose_yet_begins_no_proposal(grammar, may_propose):
    tok = grammar.tokenizer
    t = grammar.proposal_template(payment_refs=True)
    for text in ("", " ", TRIGGER[:-5], "Sure. " + TRIGGER[:-5]):
        c = CallConstraint([grammar], shown=[frozenset({"<order_1>"})], proposal=t, may_propose=[may_propose])
        for i in encode(tok, text):
            c.update(0, i)
        assert _writes_trigger(c, grammar, text) == may_propose, text
        assert (c.masked == [0]) != may_propose  # the tokens chosen under it are recorded as constrained
    # the rest of the turn is free: other words, a tool call, the end of the turn
    c = CallConstraint([grammar], shown=[frozenset({"<order_1>"})], proposal=t, may_propose=[False])
    allowed = _allowed(c, tok, grammar) - {None}
    assert any(x.startswith("I") for x in allowed)
    logits = c.mask_logits(torch.zeros(1, len(tok)))[0]
    assert torch.isfinite(logits[grammar.open_id]) and torch.isfinite(logits[tok.eos_token_id])
    for i in encode(tok, "Sure. "):
        c.update(0, i)
    # mid-turn only the token that would complete the trigger is held
    assert any(x and x.startswith("To") for x in _allowed(c, tok, grammar))
    # the held tokens are cached per point of the trigger, the same for every row
    assert t.no_trigger("") is t.no_trigger(" ") is not None
    assert t.no_trigger("Sure. " + TRIGGER[:-5]) is t.no_trigger(TRIGGER[:-5]) is not None
    # a row without a grammar (no tools offered) keeps no free text: it is never held
    c = CallConstraint([None], proposal=t, may_propose=[False])
    assert c._held_back(0) is None and c.mask_logits(torch.zeros(1, len(tok))) is not None and c.masked == []


def test_a_copy_that_leaves_only_the_trigger_wins_over_the_rule(grammar):
    tok = grammar.tokenizer
    t = grammar.proposal_template(payment_refs=True)
    c = CallConstraint([grammar], shown=[frozenset({"<order_1>"})], proposal=t, may_propose=[False])
    held = t.no_trigger("")
    opening = encode(tok, TRIGGER)[0]
    assert held is not None and not held[opening]
    logits = torch.full((1, len(tok)), float("-inf"))
    logits[0, opening] = 0.0  # as a copy mask that leaves only that token would
    out = c.mask_logits(logits)
    assert torch.isfinite(out[0, opening])  # never a row with no token left
