"""What a small local model is shown of a conversation, as part of its training recipe (recorded in
the model folder's manifest and applied the same way in SFT, GRPO rollouts and evaluation, so the
model always reads the layout it was trained on; every conversation is given the one store policy,
backend/agent/policy.py, and the view may show it another system message). The full view passes
everything through. The tiny recipe's view lists only the tools its task mix needs, as compact
schemas, and shows tool results as compact JSON with the fields an agent acts on, so a small model's
context goes to the conversation. With `refs`, identifiers (emails, order, payment-method and user
ids, zip codes, other words of four or more digits) and known person names are shown as typed
reference tokens numbered per kind in order of appearance (`<order_2>`), expanded back before
anything else sees what the model wrote (a `RefTable` per conversation): a tiny model can learn to
name a token, not to copy a 10-digit id digit by digit (the entity anonymisation of
reading-comprehension models; tools and customers still see real ids). With `places`, known street
and city names ("Hillcrest Road", "Salt Lake City") are references too, so a confirmation that names
a new address copies the street the customer gave instead of spelling one from its prior (free text
is held to shown references). With `item_refs`, an item an order or product lookup showed is named in
the agent's free text by its reference alone: the view shows "the Electric Kettle (item 1234567890)"
as "the <num_3>" and expands the model's `<num_3>` into it, so naming the item a customer means is
the same choice of reference the call makes, not a product name spelled from the model's prior.
With `payment_refs`, a user record shows each payment method with its description ("Visa card
ending in 1234") and free text names a payment method by its reference alone: the view shows "your
Visa card ending in 1234 (credit_card_4421486)" as "your <payment_1>" and expands the model's
`<payment_1>` into it, so the refund a proposal names is the reference its call writes, and the
customer reads the card's last four digits.
With `spaced_values`,
free-text call arguments are shown with one leading space, so a byte-level BPE gives the customer's
words and the agent's argument the same tokens and writing a reason is a copy, not a translation.
How each choice was measured is in bench/results/README.md."""

from __future__ import annotations

import functools
import hashlib
import json
import random
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rl.chat.format import compact_tools
from rl.tasks.phrasing import payment_description

# Reference kinds, in the order they are tried on a word, with how many references of each kind a
# conversation can hold (a value beyond that is shown as it is).
REF_KINDS: dict[str, int] = {"email": 4, "order": 24, "payment": 8, "user": 4, "zip": 8, "num": 48, "name": 8,
                             "place": 8}
# The tokens of every kind but places (a view shows places only with a place list, and a tokenizer
# holds their tokens only then: a view without places keeps the vocabulary it had before they existed).
REF_TOKENS = tuple(f"<{kind}_{i}>" for kind, n in REF_KINDS.items() if kind != "place" for i in range(1, n + 1))
PLACE_TOKENS = tuple(f"<place_{i}>" for i in range(1, REF_KINDS["place"] + 1))
# Tool parameters whose values are always identifiers of one reference kind (constrained decoding
# holds them to a reference of that kind: rl/chat/call_grammar.py). Names are left out: a name the
# view does not know is shown as it is.
REF_PARAMS: dict[str, str] = {"order_id": "order", "user_id": "user", "payment_method_id": "payment",
                              "email": "email", "zip": "zip", "item_ids": "num", "new_item_ids": "num",
                              "product_id": "num"}
# Free-text parameters whose values only the customer knows (a new address, a name to look the
# customer up by): with the view's `copied_params`, constrained decoding holds them to a span of
# what the customer said (rl/chat/call_grammar.py).
SAID_PARAMS: tuple[str, ...] = ("address1", "address2", "city", "state", "country", "first_name", "last_name")
NAME_PARAMS: tuple[str, ...] = ("first_name", "last_name")  # of which a person's name (`whole_names`)
REF_PATTERN = re.compile(r"<(" + "|".join(REF_KINDS) + r")_(\d+)>")  # a reference token: kind, number
# an item as free text names it under `item_refs` (the teacher writes it, the view collapses it)
ITEM_MENTION = "{name} (item {item_id})"
_CALL_BLOCK = re.compile(r"<tool_call>.*?(?:</tool_call>|$)", re.DOTALL)  # a call: its ids stay bare


# a payment method as free text names it under `payment_refs` (the teacher writes it, the view collapses it)
PAYMENT_MENTION = "{description} ({pm_id})"


def payment_mention(description: str, pm_id: str) -> str:
    """How free text names a payment method under `payment_refs`: 'PayPal account (paypal_7732922)'."""
    return PAYMENT_MENTION.format(description=description, pm_id=pm_id)


def payment_descriptions(text: str) -> dict[str, str]:
    """payment method id -> description from a user record as a view shows it (the full record's
    `payment_methods` of records, or the compact one's of descriptions)."""
    try:
        rec = json.loads(text)
    except ValueError:
        return {}
    methods = rec.get("payment_methods") if isinstance(rec, dict) else None
    if not isinstance(methods, dict):
        return {}
    return {str(k): payment_description(v) if isinstance(v, dict) else str(v) for k, v in methods.items()
            if isinstance(v, (dict, str))}


def item_mention(name: str, item_id: str) -> str:
    """How free text names an item under `item_refs`: 'Electric Kettle (item 1234567890)'."""
    return ITEM_MENTION.format(name=name, item_id=item_id)


_WORD = re.compile(
    r"(?P<email>[\w.+-]+@[\w-]+(?:\.[\w-]+)+)"
    r"|(?P<order>#W\d{4,})"
    r"|(?P<payment>\b(?:credit_card|gift_card|paypal)_\d{4,})"
    r"|(?P<user>\b[a-z]+_[a-z]+_\d{4,})"
    r"|(?P<zip>\b\d{5}\b)"
    r"|(?P<num>#?\b[A-Za-z_]*\d{4,}\w*)"
    r"|(?P<name>\b[A-Z][a-z]+\b)")


@functools.lru_cache(maxsize=8)
def _words(places: frozenset[str]) -> re.Pattern[str]:
    """The word pattern of a view with these known places: a place is tried before anything else,
    longest first ("Salt Lake City" before "Salt Lake")."""
    if not places:
        return _WORD
    alternatives = "|".join(re.escape(p) for p in sorted(places, key=lambda p: (-len(p), p)))
    return re.compile(r"(?P<place>\b(?:" + alternatives + r")\b)|" + _WORD.pattern)


class RefTable:
    """One conversation's identifiers and the reference tokens that stand for them, typed
    (`<email_1>`, `<order_2>`, `<name_1>`, ...). Numbered per kind in order of first appearance by
    default; with a `seed`, each new value takes a random free number of its kind instead (the same
    seed gives the same numbers), so that no reference number carries a meaning of its own
    ("the customer's order is `<order_1>`") and the model must copy the one in the conversation,
    as reading-comprehension models trained on anonymised entities permute the markers per example."""

    def __init__(self, names: frozenset[str], seed: str | None = None,
                 places: frozenset[str] = frozenset(), item_refs: bool = False, payment_refs: bool = False) -> None:
        self.names = names
        # item id -> product name, from the lookups shown so far (with `item_refs`; None without)
        self.items: dict[str, str] | None = {} if item_refs else None
        # payment method id -> description, from the user records shown so far (with `payment_refs`)
        self.payments: dict[str, str] | None = {} if payment_refs else None
        self.words = _words(places)
        self.values: dict[str, dict[int, str]] = {k: {} for k in REF_KINDS}
        self.index: dict[str, str] = {}
        self.rng = random.Random(seed) if seed is not None else None

    def _ref(self, kind: str, value: str) -> str:
        ref = self.index.get(value)
        if ref is None:
            values = self.values[kind]
            if len(values) >= REF_KINDS[kind]:
                return value  # out of references of this kind: shown as it is
            if self.rng is None:
                n = len(values) + 1
            else:
                n = self.rng.choice([i for i in range(1, REF_KINDS[kind] + 1) if i not in values])
            values[n] = value
            ref = self.index[value] = f"<{kind}_{n}>"
        return ref

    def show(self, text: str) -> str:
        """`text` as the model reads it: identifiers and known names replaced by references (and,
        with item names known, each item mention by its item's reference)."""
        if self.items is not None:
            text = self._items_shown(text)
        if self.payments is not None:
            text = self._payments_shown(text)

        def ref(m: re.Match[str]) -> str:
            kind, word = m.lastgroup or "", m.group(0)
            if kind == "name" and word not in self.names:
                return word
            return self._ref(kind, word)

        return self.words.sub(ref, text)

    def _items_shown(self, text: str) -> str:
        """`text` with the item names of a lookup it holds learned, and with every mention of a known
        item replaced by the item's reference."""
        assert self.items is not None
        if text.startswith("{"):
            self.items.update(item_names(text))
        if " (item " in text:
            for item_id, name in self.items.items():
                mention = item_mention(name, item_id)
                if mention in text:
                    text = text.replace(mention, self._ref("num", item_id))
        return text

    def _payments_shown(self, text: str) -> str:
        """`text` with the payment descriptions of a user record it holds learned, and with every
        mention of a known payment method replaced by its id (which the reference then stands for)."""
        assert self.payments is not None
        if text.startswith("{"):
            self.payments.update(payment_descriptions(text))
        if " (" in text:
            for pm_id, description in self.payments.items():
                text = text.replace(payment_mention(description, pm_id), pm_id)
        return text

    def shown(self) -> frozenset[str]:
        """The reference tokens this conversation has shown so far."""
        return frozenset(f"<{kind}_{n}>" for kind, values in self.values.items() for n in values)

    def expand(self, text: str) -> str:
        """What the model wrote, with each reference it was shown replaced by its value; with
        `item_refs`, a known item's reference in free text (outside tool calls) by its mention, and
        with `payment_refs` a known payment method's."""
        def value(m: re.Match[str]) -> str:
            return self.values[m.group(1)].get(int(m.group(2)), m.group(0))

        if not self.items and not self.payments:
            return REF_PATTERN.sub(value, text)
        items, payments = self.items or {}, self.payments or {}

        def mention(m: re.Match[str]) -> str:
            v = value(m)
            if m.group(1) == "num" and v in items:
                return item_mention(items[v], v)
            return payment_mention(payments[v], v) if m.group(1) == "payment" and v in payments else v

        out, at = [], 0
        for call in _CALL_BLOCK.finditer(text):
            out += [REF_PATTERN.sub(mention, text[at:call.start()]), REF_PATTERN.sub(value, call.group(0))]
            at = call.end()
        out.append(REF_PATTERN.sub(mention, text[at:]))
        return "".join(out)


@dataclass(frozen=True)
class ChatView:
    tools: tuple[str, ...] | None = None  # only these tools are listed (None: all)
    compact_schemas: bool = False
    compact_results: bool = False
    refs: bool = False  # identifiers and known names shown as reference tokens
    names: frozenset[str] = field(default_factory=frozenset)  # person names shown as references
    places: frozenset[str] = field(default_factory=frozenset)  # street and city names shown as references
    shuffle_refs: bool = False  # references numbered at random per conversation (RefTable's seed)
    constrain_calls: bool = False  # tool calls decoded under their grammar (rl/chat/call_grammar.py)
    spaced_values: bool = False  # free-text string arguments shown with a leading space
    # free-text parameters decoded as a span of the customer's messages (rl/chat/call_grammar.py)
    copied_params: tuple[str, ...] = ()
    # with constrain_calls and refs: free text names only references the conversation has shown
    shown_refs_in_text: bool = False
    # with shown_refs_in_text and without item_refs: free text names no reference a lookup showed as
    # an item id (the teacher names items by product; the one number its text writes is a tracking
    # number, and a tiny model wrote an item's reference there: rl/policies/local.py `text_shown`)
    no_item_refs_in_text: bool = False
    # with proposals_by_status: the word after "is currently" in free text is the status of an order
    # the conversation looked up (rl/chat/status_answer.py)
    status_answers: bool = False
    # with proposals_by_status: the word after "is already" in free text (the teacher's refusal) is
    # the named order's looked-up status, never "pending" (rl/chat/status_answer.py)
    refusals_by_status: bool = False
    # with constrain_calls: free text that writes a number the customer said (a house number) goes
    # on in the customer's words to the end of their phrase (rl/chat/copy_spans.py `held_copy`)
    copy_said_numbers: bool = False
    # with constrain_calls: a capitalised word after "the " in free text begins a product name the
    # conversation's lookups showed and runs to its end (rl/chat/product_names.py)
    copy_product_names: bool = False
    # with constrain_calls and refs: no call of a tool that needs an identified customer until an
    # identity tool has shown the customer's id (rl/chat/call_grammar.py `for_shown`)
    identified_calls: bool = False
    # with refs: an item a lookup showed is named in free text by its reference (`RefTable` above)
    item_refs: bool = False
    # with refs: user records show payment descriptions, and free text names a payment method by its
    # reference (`RefTable` above)
    payment_refs: bool = False
    # with constrain_calls: no call of a write tool unless the agent's last message in words asked
    # the customer to confirm a change (rl/policies/local.py `asked_to_confirm`), and none after a
    # write until it asks again: the store policy's "describe it and ask to confirm" as a grammar
    writes_after_proposal: bool = False
    # with constrain_calls: free text that writes "To confirm, I will" goes on in one of the
    # teacher's proposal templates, only its slots chosen (rl/chat/proposal_template.py)
    proposal_template: bool = False
    # with proposal_template and copy_product_names: a proposal's items are products the customer
    # named, each once, and its list ends when none is left (rl/chat/call_constraint.py `said_items`)
    proposal_said_items: bool = False
    # with constrain_calls and refs: in the turn after a proposal, a call's identifiers of each kind
    # the proposal named are those it named, its items those of the products it named
    # (rl/policies/local.py `held_to`): the write is the change the customer was asked about
    writes_follow_proposal: bool = False
    # with proposal_template and refs: a proposal offers only actions the status of an order the
    # conversation looked up allows (only pending orders are cancelled or changed, only delivered
    # ones returned or exchanged) and, once an order is looked up, names only such an order, never
    # one not looked up (rl/chat/proposal_template.py `start`; rl/chat/call_constraint.py)
    proposals_by_status: bool = False
    # with copied_params: a name copied into a call (NAME_PARAMS) is a whole name, not empty, each
    # word capitalised or a name reference (rl/chat/call_automaton.py `_name_step`)
    whole_names: bool = False
    # with proposal_template: a turn begins no proposal before a lookup has shown an order's or the
    # customer's record (every proposal of the teacher's follows one; rl/policies/local.py
    # `shows_record`, rl/chat/proposal_template.py `no_trigger`)
    propose_after_lookup: bool = False
    # with proposal_template and refs: a cancellation the customer said no to is not proposed again
    # for that order with the reason it named; the other reason is (rl/chat/refused_reasons.py)
    refused_not_again: bool = False
    # with proposal_template and refs: a cancellation call in the turn after a proposal writes the
    # reason the proposal named (rl/chat/proposed_reason.py)
    reason_follows_proposal: bool = False
    # the system message this model reads in place of the store policy every agent is given (the
    # tiny recipe's few rules; None: the store policy itself)
    system_prompt: str | None = None

    def system(self, content: str) -> str:
        """The system message as this model reads it."""
        return content if self.system_prompt is None else self.system_prompt

    def tool_list(self, tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
        if self.tools is not None:
            keep = set(self.tools)
            tools = [t for t in tools if t.get("function", t)["name"] in keep]
        return compact_tools(tools) if self.compact_schemas else tools

    def result(self, text: str) -> str:
        return compact_result(text, payment_names=self.payment_refs) if self.compact_results else text

    def conversation(self, key: str = "") -> RefTable | None:
        """The per-conversation state of this view (None when it has none); `key` names the
        conversation and seeds shuffled reference numbers."""
        if not self.refs:
            return None
        return RefTable(self.names, seed=key if self.shuffle_refs else None, places=self.places,
                        item_refs=self.item_refs, payment_refs=self.payment_refs)

    @property
    def ref_params(self) -> dict[str, str]:
        """Tool parameters whose values the model writes as one reference of a kind."""
        return dict(REF_PARAMS) if self.refs else {}

    def spaced_params(self, arguments: dict[str, Any]) -> list[str]:
        """The arguments of a call this view shows with a leading space: its free-text strings."""
        if not self.spaced_values:
            return []
        refs = self.ref_params
        return [k for k, v in arguments.items() if isinstance(v, str) and k not in refs]

    def show_call(self, call: dict[str, Any]) -> dict[str, Any]:
        """A recorded tool call as the model writes it under this view (free-text values spaced)."""
        def space(args: dict[str, Any]) -> dict[str, Any]:
            spaced = self.spaced_params(args)
            return {k: f" {v}" if k in spaced else v for k, v in args.items()}

        return _map_arguments(call, space)

    def read_call(self, call: dict[str, Any]) -> dict[str, Any]:
        """A tool call the model wrote, as the store takes it (the view's leading spaces removed)."""
        def unspace(args: dict[str, Any]) -> dict[str, Any]:
            spaced = self.spaced_params(args)
            return {k: v[1:] if k in spaced and v.startswith(" ") else v for k, v in args.items()}

        return _map_arguments(call, unspace)

    def record(self, record: dict[str, Any]) -> dict[str, Any]:
        """A cold-start record (`messages`, `tools`) as this view shows it to the model."""
        return {"messages": self.messages(record["messages"]), "tools": self.tool_list(record.get("tools") or [])}

    @property
    def extra_tokens(self) -> tuple[str, ...]:
        """Tokens a tokenizer for this view must hold whole."""
        if not self.refs:
            return ()
        return REF_TOKENS + PLACE_TOKENS if self.places else REF_TOKENS

    def messages(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """A recorded conversation as this view shows it (tool results shortened, references)."""
        refs = self.conversation(_conversation_key(messages) if self.shuffle_refs else "")
        if not self.compact_results and refs is None and not self.spaced_values and self.system_prompt is None:
            return messages
        out = []
        for m in messages:
            m = dict(m)
            if m.get("role") == "system":
                m["content"] = self.system(str(m.get("content") or ""))
            if m.get("role") == "tool":
                m["content"] = self.result(str(m.get("content") or ""))
            if refs is not None and m.get("role") != "system":
                if m.get("content") is not None:
                    m["content"] = refs.show(str(m["content"]))
                if m.get("tool_calls"):
                    m["tool_calls"] = [rewrite_call(c, refs.show) for c in m["tool_calls"]]
            if self.spaced_values and m.get("tool_calls"):
                m["tool_calls"] = [self.show_call(c) for c in m["tool_calls"]]
            out.append(m)
        return out

    def describe(self) -> dict[str, Any]:
        """The view as a model folder's manifest records it (`from_manifest` reads it back)."""
        return {"tools": list(self.tools) if self.tools is not None else None, "compact": self.compact_results,
                "refs": self.refs, "names": sorted(self.names), "places": sorted(self.places),
                "shuffle_refs": self.shuffle_refs,
                "constrain_calls": self.constrain_calls, "spaced_values": self.spaced_values,
                "copied_params": list(self.copied_params), "shown_refs_in_text": self.shown_refs_in_text,
                "no_item_refs_in_text": self.no_item_refs_in_text, "status_answers": self.status_answers,
                "refusals_by_status": self.refusals_by_status,
                "copy_said_numbers": self.copy_said_numbers, "copy_product_names": self.copy_product_names,
                "identified_calls": self.identified_calls,
                "item_refs": self.item_refs, "payment_refs": self.payment_refs,
                "writes_after_proposal": self.writes_after_proposal, "proposal_template": self.proposal_template,
                "proposal_said_items": self.proposal_said_items,
                "writes_follow_proposal": self.writes_follow_proposal,
                "proposals_by_status": self.proposals_by_status, "whole_names": self.whole_names,
                "propose_after_lookup": self.propose_after_lookup, "refused_not_again": self.refused_not_again,
                "reason_follows_proposal": self.reason_follows_proposal,
                "system_prompt": self.system_prompt}

    @classmethod
    def from_manifest(cls, view: dict[str, Any] | None) -> ChatView:
        """The view a model was trained with, from its manifest's `view` (the full view if none)."""
        if not view:
            return FULL_VIEW
        tools = view.get("tools")
        return cls(tools=tuple(tools) if tools else None, compact_schemas=bool(view.get("compact")),
                   compact_results=bool(view.get("compact")), refs=bool(view.get("refs")),
                   names=frozenset(view.get("names") or ()), places=frozenset(view.get("places") or ()),
                   shuffle_refs=bool(view.get("shuffle_refs")),
                   constrain_calls=bool(view.get("constrain_calls")),
                   spaced_values=bool(view.get("spaced_values")),
                   copied_params=tuple(view.get("copied_params") or ()),
                   shown_refs_in_text=bool(view.get("shown_refs_in_text")),
                   no_item_refs_in_text=bool(view.get("no_item_refs_in_text")),
                   status_answers=bool(view.get("status_answers")),
                   refusals_by_status=bool(view.get("refusals_by_status")),
                   copy_said_numbers=bool(view.get("copy_said_numbers")),
                   copy_product_names=bool(view.get("copy_product_names")),
                   identified_calls=bool(view.get("identified_calls")),
                   item_refs=bool(view.get("item_refs")), payment_refs=bool(view.get("payment_refs")),
                   writes_after_proposal=bool(view.get("writes_after_proposal")),
                   proposal_template=bool(view.get("proposal_template")),
                   proposal_said_items=bool(view.get("proposal_said_items")),
                   writes_follow_proposal=bool(view.get("writes_follow_proposal")),
                   proposals_by_status=bool(view.get("proposals_by_status")),
                   whole_names=bool(view.get("whole_names")),
                   propose_after_lookup=bool(view.get("propose_after_lookup")),
                   refused_not_again=bool(view.get("refused_not_again")),
                   reason_follows_proposal=bool(view.get("reason_follows_proposal")),
                   system_prompt=view.get("system_prompt"))


def item_names(text: str) -> dict[str, str]:
    """item id -> product name from a lookup's result as the model is shown it: an order's items
    (`item_id`, `name`), a product's variants (full view) or available items (compact view)."""
    try:
        rec = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(rec, dict):
        return {}
    found: dict[str, str] = {}
    for item in rec.get("items") if isinstance(rec.get("items"), list) else []:
        if isinstance(item, dict) and item.get("item_id") and item.get("name"):
            found[str(item["item_id"])] = str(item["name"])
    name = rec.get("name")
    if isinstance(name, str) and name and "product_id" in rec:
        variants = rec.get("variants") if isinstance(rec.get("variants"), dict) else {}
        available = rec.get("available") if isinstance(rec.get("available"), list) else []
        for item_id in [*variants, *available]:
            found[str(item_id)] = name
    return found


def _conversation_key(messages: list[dict[str, Any]]) -> str:
    """A stable name for a recorded conversation (its text), for seeding shuffled references."""
    return hashlib.sha256(json.dumps(messages, sort_keys=True, default=str).encode()).hexdigest()[:16]


def map_strings(value: Any, fn: Callable[[str], str]) -> Any:
    """`value` with `fn` applied to every string inside it (lists and dict values, recursively)."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, list):
        return [map_strings(x, fn) for x in value]
    if isinstance(value, dict):
        return {k: map_strings(x, fn) for k, x in value.items()}
    return value


def rewrite_call(call: dict[str, Any], fn: Callable[[str], str]) -> dict[str, Any]:
    """An OpenAI tool call with `fn` applied to every string in its arguments (kept as a JSON string
    when they were one; arguments that are not JSON are rewritten as text)."""
    fn_part = dict(call.get("function", {}))
    raw = fn_part.get("arguments")
    if isinstance(raw, str):
        try:
            fn_part["arguments"] = json.dumps(map_strings(json.loads(raw), fn))
        except ValueError:
            fn_part["arguments"] = fn(raw)
    else:
        fn_part["arguments"] = map_strings(raw, fn)
    return {**call, "function": fn_part}


def _map_arguments(call: dict[str, Any], fn: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """An OpenAI tool call with `fn` applied to its arguments object (kept as a JSON string when it
    was one); arguments that are not a JSON object are left as they are."""
    fn_part = dict(call.get("function", {}))
    raw = fn_part.get("arguments")
    args = raw
    if isinstance(raw, str):
        try:
            args = json.loads(raw)
        except ValueError:
            return call
    if not isinstance(args, dict):
        return call
    new = fn(args)
    fn_part["arguments"] = json.dumps(new, ensure_ascii=False) if isinstance(raw, str) else new
    return {**call, "function": fn_part}


FULL_VIEW = ChatView()


def compact_result(text: str, payment_names: bool = False) -> str:
    """A tool result with only the fields an agent acts on (non-JSON text is returned as is); with
    `payment_names`, a user's payment methods with their descriptions (`payment_description`)."""
    try:
        rec = json.loads(text)
    except ValueError:
        return text
    if not isinstance(rec, dict):
        return json.dumps(rec, separators=(",", ":"), ensure_ascii=False)
    if "order_id" in rec and "items" in rec:
        out: dict[str, Any] = {"order_id": rec["order_id"], "status": rec.get("status")}
        out["items"] = [{"item_id": i.get("item_id"), "name": i.get("name")} for i in rec.get("items", [])
                        if isinstance(i, dict)]
        out["paid_with"] = sorted({p.get("payment_method_id") for p in rec.get("payment_history", [])
                                   if isinstance(p, dict) and p.get("transaction_type") == "payment"})
        tracking = [str(t) for f in rec.get("fulfillments") or [] if isinstance(f, dict)
                    for t in f.get("tracking_id") or []]
        if tracking:
            out["tracking"] = tracking
        rec = out
    elif "payment_methods" in rec and "orders" in rec:
        name = rec.get("name") or {}
        methods = rec.get("payment_methods") or {}
        shown: Any = sorted(methods)
        if payment_names and isinstance(methods, dict):
            shown = {k: payment_description(v) if isinstance(v, dict) else str(v) for k, v in sorted(methods.items())}
        rec = {"name": f"{name.get('first_name', '')} {name.get('last_name', '')}".strip(),
               "payment_methods": shown, "orders": rec.get("orders")}
    elif "variants" in rec and isinstance(rec["variants"], dict):
        rec = {"name": rec.get("name"), "product_id": rec.get("product_id"),
               "available": sorted(k for k, v in rec["variants"].items() if isinstance(v, dict) and v.get("available"))}
    return json.dumps(rec, separators=(",", ":"), ensure_ascii=False)
