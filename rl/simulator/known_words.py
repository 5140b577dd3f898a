"""The held-out evaluation customer in known words: held-out sentences made only of words the
training customer uses.

`heldout` (rl/simulator/heldout.py) keeps every sentence apart from the training wordings, and
about half of its sentences carry a word no training conversation holds ("I bought it by
accident.", "Can order #W... be delivered somewhere else?", "Yep, do it."; bench/unseen_words.py).
A model trained from random weights on our own conversations, as `cpu-tiny`'s is, has never been
shown what such a word means, so where a sentence's meaning rests on one, no recipe can read it; a
pretrained model (the paper's) reads it from pretraining. `KnownWordsCustomer` (`--user
heldout-known`) is the same held-out test in the language the model was taught: the training
customer's decisions (the very session of rl/simulator/scripted.py), new sentences, none equal to
or containing a training sentence or phrase, and every word one the training customers say (their
vocabulary) or a value of the task (ids, names, addresses, products), which the agent copies rather
than reads. tests/rl/simulator/test_known_words_customer.py checks both, against the training
customers as they are played.
"""

from __future__ import annotations

from rl.simulator import heldout as H
from rl.simulator.heldout import HeldOutBank, HeldOutCustomer

# 1: first version
KNOWN_WORDS_VERSION = "heldout-known-1"

GREETINGS = ["Hello there.", "Good morning to you.", "Hi there, I need some help today."]
YES = ["Correct, go ahead.", "Sure thing, please do.", "Okay, go ahead and do it."]
THANKS = ["Great, thank you very much.", "Perfect, that is all, thank you.", "That is great, thanks a lot."]
SHIFTS = ["Actually, stop - I do not want that after all.", "No wait, let me stop you there; forget about that one."]
DEMANDS = ["Is there really no way? {what}", "Can you really not do it for me? {what}",
           "I'm not okay with this. {what}"]
REASON_WORDS = {"no longer needed": "I have no more need for it.",
                "ordered by mistake": "It was a mistake to order it."}
REASON_SENTENCES = {"I no longer need it.": REASON_WORDS["no longer needed"],
                    "I ordered it by mistake.": REASON_WORDS["ordered by mistake"],
                    "They no longer need it.": "My friend has no more need for it."}
# the held-out bank's sentences (rl/simulator/heldout.py `WORDS`) in known words; those it keeps
# ("The order number is ...", "Hmm, that's not it.") use known words already
WORDS = {
    **H.WORDS,
    "closing": "That is everything I needed from you.",
    "an_order": "an order I placed",
    "next_request": "Then, ",
    "friend_cancel": "My friend's order {ref} - can you cancel that one also?",
    "refused_refund": "I have some items from {o} to return, and the refund should go to {pay}.",
    "cancel": "Can you cancel {o} for me?",
    "modify_address": "Can {o} be shipped to another address?",
    "modify_payment": "Can the payment on {o} change to another method?",
    "modify_items": "Can one of the items in {o} change to a different type?",
    "exchange": "Something I got in {o} should be changed for a different type.",
    "return": "There is something from {o} I would like to return.",
    "user_address": "I moved, so the default address on my account should change.",
    "status": "What is the status of order {ref} today? I'd also need its tracking number.",
    "count": "For the {p}, how many options are there in stock now?",
    "free_reason": "Use {v} for my reason.",
    "refund_original": "For the refund, the original payment is fine.",
    "pay_instead": "Charge it to {pay} instead.",
    "pay_difference": "Any price difference can go on {pay}.",
    "pay_refund": "The refund should go to {pay}.",
    "ship_to": "It should go to {addr} instead.",
    "returns": "It's {v} that I want to return.",
    "product": "It is the {v}.",
    "late_swaps": "Wait, I forgot one: {v} also.",
    "late_returns": "Wait, I forgot: {v} is part of the return also.",
    "demand_other": "I need you to do this.",
    "return_instead": "Okay, fine, a return is okay with me then. ",
    "refund_original_instead": "Okay then, the refund can go to the original payment.",
    "name_zip_no_email": "I don't know my email. The account is under the name {first} {last}, zip code {zip}.",
    "name_zip": "This is {first} {last}; my zip is {zip}.",
    "corrected_asked": "Sorry, that was not right. It is {email}.",
    "corrected": "Wait, that was not right - the right one is {email}.",
    "go_ahead": "Yes, you can go ahead with that.",
    "cannot_be_done": "Oh, okay, if you can't, then that is that.",
    "give_up": "No, let's just stop here then.",
    "accept_refusal": "Okay, I understand.",
    "are_you_sure": "Hmm, that is not right for me. {restate}",
    "wrong_reason": "That is not my reason, actually. {reason}",
    "dont_know": "I can't tell you that, sorry. {restate}",
    "card": "the {brand} card with the number ending {four}",
    "gift_card": "the gift card on my account",
    "swap": "{old} changed to the type with {new}",
}


class KnownWordsBank(HeldOutBank):
    """`HeldOutBank`'s structure (values taken out of the script's sentences, identity sometimes
    volunteered, facts in reverse order) with sentences in the training customers' words."""

    GREETINGS, YES, THANKS, SHIFTS, DEMANDS = GREETINGS, YES, THANKS, SHIFTS, DEMANDS
    REASON_WORDS, REASON_SENTENCES, WORDS = REASON_WORDS, REASON_SENTENCES, WORDS
    stream = "heldout-known"  # its own draws of greeting, shift and yes; the held-out stream's volunteers


class KnownWordsCustomer(HeldOutCustomer):
    """Factory of held-out sessions in known words (the `UserSimulator` for `--user heldout-known`)."""

    name = "heldout-known"
    prompt_version = KNOWN_WORDS_VERSION
    bank = KnownWordsBank
