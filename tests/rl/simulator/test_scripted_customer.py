"""The scripted customer's semantics, conversation by conversation: reveal on ask, no invented
facts, confirmation by current goal, goal shifts, haggling, late information, identity mistakes and
the stop rules (never right after yes, only once the last goal is done or refused)."""

from __future__ import annotations

import json

import pytest

from rl.simulator.base import STOP, SimulatorError, make_user
from rl.simulator.scripted import ScriptedCustomer
from rl.tasks.build import assemble
from rl.tasks.schema import Action, Customer, Goal, GoalShift, Haggle
from tests.rl.simulator.test_proposal import ORDER, RETURN, RETURN_TEXT, USER

CUSTOMER = Customer(user_id="ann_lee_1", first_name="Ann", last_name="Lee", email="ann.lee@example.com",
                    zip="10001", identify_by="email")
CANCEL = Action(name="cancel_pending_order", arguments={"order_id": "#W100", "reason": "no longer needed"})
ADDRESS = Action(name="modify_pending_order_address", arguments={
    "order_id": "#W100", "address1": "1 Elm Street", "address2": "", "city": "Austin", "country": "USA",
    "state": "TX", "zip": "78701"})


def cancel_goal(**kw) -> Goal:
    base = dict(id="g0", kind="cancel", outcome="act", say="I'd like to cancel one of my orders.",
                details={"order_id": "It's order #W100.", "reason": "I no longer need it."}, action=CANCEL,
                order_id="#W100", confirm_terms=["#W100"])
    return Goal(**{**base, **kw})


def address_goal(**kw) -> Goal:
    base = dict(id="g1", kind="modify_address", outcome="act", say="Please change the address of order #W100.",
                upfront=["order_id"], details={"order_id": "It's order #W100.",
                                               "address": "Ship it to 1 Elm Street, Austin, TX 78701, USA."},
                action=ADDRESS, order_id="#W100", confirm_terms=["#W100", "1 Elm Street"])
    return Goal(**{**base, **kw})


def task_of(*goals: Goal, customer: Customer = CUSTOMER):
    return assemble(task_id="t1", snapshot="tau-retail", customer=customer, goals=list(goals), split="test", tags=[])


class Convo:
    """Builds an OpenAI-format conversation and asks the customer after each agent message."""

    def __init__(self, task, seed: int = 0, **options) -> None:
        self.session = ScriptedCustomer(**options).session(task, seed)
        self.messages: list[dict] = [{"role": "system", "content": "policy"}]
        self.n = 0

    def start(self) -> str:
        reply, done = self.session.reply(self.messages)
        assert not done
        self.messages.append({"role": "user", "content": reply})
        return reply

    def tool(self, name: str, args: dict, output: str) -> None:
        self.n += 1
        cid = f"c{self.n}"
        self.messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]})
        self.messages.append({"role": "tool", "tool_call_id": cid, "name": name, "content": output})

    def say(self, text: str) -> tuple[str, bool]:
        self.messages.append({"role": "assistant", "content": text})
        reply, done = self.session.reply(self.messages)
        self.messages.append({"role": "user", "content": reply})
        return reply, done

    def authenticate(self) -> None:
        self.tool("find_user_id_by_email", {"email": CUSTOMER.email}, "ann_lee_1")


def test_opening_states_only_the_first_goal_and_reveals_on_ask():
    c = Convo(task_of(cancel_goal(), address_goal()))
    opening = c.start()
    assert "cancel" in opening and "#W100" not in opening and "address" not in opening
    reply, done = c.say("Could you give me your email, or your name and zip code?")
    assert reply == "My email is ann.lee@example.com." and not done
    c.authenticate()
    reply, _ = c.say("Which order would you like to cancel, and what is the reason?")
    assert "#W100" in reply and "no longer need" in reply


def test_never_invents_facts_it_does_not_hold():
    c = Convo(task_of(cancel_goal()))
    c.start()
    c.authenticate()
    reply, done = c.say("What is your phone number?")
    assert not done
    assert "not sure" in reply.lower()
    assert not any(ch.isdigit() and ch not in "100" for ch in reply.replace("#W100", ""))


def test_confirms_only_what_matches_its_current_goal():
    c = Convo(task_of(cancel_goal()))
    c.start()
    c.authenticate()
    assert c.session.agreed is False
    reply, _ = c.say("To confirm, I will cancel order #W999. Do you confirm (yes/no)?")
    assert reply.startswith("No") and c.session.agreed is False
    reply, _ = c.say("To confirm, I will change the shipping address of order #W100. Shall I proceed?")
    assert reply.startswith("No") and c.session.agreed is False
    reply, done = c.say("To confirm, I will cancel order #W100 with the reason 'no longer needed'. Confirm (yes/no)?")
    assert reply.lower().startswith("yes") and not done and c.session.agreed is True


def test_reports_its_consent_reply_by_reply():
    """`agreed` (what the episode's consent rule reads) holds for a yes and for a "go ahead" standing
    by it, and for nothing else: not for the facts it gives, nor once the goal is done."""
    c = Convo(task_of(cancel_goal(), address_goal()))
    c.start()
    c.authenticate()
    c.say("Which order is it, and why do you want to cancel it?")
    assert c.session.agreed is False
    c.say("Shall I cancel order #W100 for you (yes/no)?")
    assert c.session.agreed is True
    reply, _ = c.say("Great, I'm working on it.")
    assert c.session.agreed is True and reply == c.session.bank.go_ahead()
    c.tool("cancel_pending_order", CANCEL.arguments, '{"order_id": "#W100", "status": "cancelled"}')
    c.say("Your order #W100 has been cancelled.")  # thanks, then the address request
    assert c.session.agreed is False


def test_a_change_that_went_through_spends_the_yes():
    """A yes covers one change: after a write that took effect but was not the agreed one (here
    another order cancelled), the customer does not "go ahead" on that yes to whatever comes next."""
    c = Convo(task_of(cancel_goal()))
    c.start()
    c.authenticate()
    c.say("Shall I cancel order #W100 for you (yes/no)?")
    assert c.session.agreed is True
    c.tool("cancel_pending_order", {"order_id": "#W200", "reason": "no longer needed"},
           '{"order_id": "#W200", "status": "cancelled"}')
    reply, done = c.say("Great, I'm working on it.")
    assert c.session.agreed is False and reply != c.session.bank.go_ahead() and not done
    c.say("Shall I cancel order #W100 for you (yes/no)?")  # asked again, it consents again
    assert c.session.agreed is True


def test_no_stop_after_yes_until_the_agent_acts():
    c = Convo(task_of(cancel_goal()))
    c.start()
    c.authenticate()
    c.say("Shall I cancel order #W100 for you (yes/no)?")
    reply, done = c.say("Great, I'm working on it.")
    assert not done and STOP not in reply
    c.tool("cancel_pending_order", {"order_id": "#W100", "reason": "too expensive"}, "Error: invalid reason")
    reply, done = c.say("Hmm, one moment.")
    assert not done
    c.tool("cancel_pending_order", CANCEL.arguments, '{"order_id": "#W100", "status": "cancelled"}')
    reply, done = c.say("Your order #W100 has been cancelled.")
    assert done and reply.endswith(STOP)


def test_goal_shift_fires_on_the_confirmation_request():
    shift = GoalShift(trigger="confirmation", say="Actually, wait. Instead, please change its address.")
    c = Convo(task_of(cancel_goal(outcome="abandon", shift=shift), address_goal()))
    c.start()
    c.authenticate()
    reply, done = c.say("To confirm, I will cancel order #W100. Do you confirm (yes/no)?")
    assert reply == shift.say and not done
    reply, _ = c.say("To confirm, I will cancel order #W100. Do you confirm (yes/no)?")
    assert reply.startswith("No")  # the cancel is no longer wanted
    reply, _ = c.say("What is the new address?")
    assert "1 Elm Street" in reply
    reply, _ = c.say("I will change the shipping address of order #W100 to 1 Elm Street. Do you confirm (yes/no)?")
    assert reply.lower().startswith("yes")


def test_haggles_as_scripted_then_accepts_the_fallback():
    haggle = Haggle(demands=["Please, make an exception.", "I insist!"], then="accept",
                    say_after="Fine, then change the address instead.")
    c = Convo(task_of(cancel_goal(outcome="refuse", haggle=haggle), address_goal()))
    c.start()
    c.authenticate()
    replies = [c.say("I'm sorry, but I can't cancel order #W100: it has already been processed.")[0]
               for _ in range(3)]
    assert replies == ["Please, make an exception.", "I insist!", "Fine, then change the address instead."]
    reply, _ = c.say("I will change the shipping address of order #W100 to 1 Elm Street. Do you confirm (yes/no)?")
    assert reply.lower().startswith("yes")


def test_gives_up_after_haggling_and_stops_when_nothing_is_left():
    haggle = Haggle(demands=["Really?"], then="give_up", say_after="Forget it then.")
    c = Convo(task_of(cancel_goal(outcome="refuse", haggle=haggle)))
    c.start()
    c.authenticate()
    assert c.say("Sorry, I cannot cancel that order.") == ("Really?", False)
    reply, done = c.say("Sorry, I cannot cancel that order.")
    assert done and reply.startswith("Forget it then.") and reply.endswith(STOP)


def test_late_information_only_when_the_agent_checks_the_list():
    goal = address_goal(late="Oh, and one more thing I forgot.")
    c = Convo(task_of(goal))
    c.start()
    c.authenticate()
    reply, _ = c.say("What is the new address?")
    assert "forgot" not in reply
    reply, _ = c.say("Is that all the items you want to change?")
    assert reply == "Oh, and one more thing I forgot."


def test_identity_mistake_is_corrected_after_not_found():
    customer = CUSTOMER.model_copy(update={"wrong_email": "ann.le@example.com"})
    c = Convo(task_of(cancel_goal(), customer=customer))
    c.start()
    assert c.say("Could you give me your email?")[0] == "My email is ann.le@example.com."
    c.tool("find_user_id_by_email", {"email": "ann.le@example.com"}, "Error: user not found")
    reply, _ = c.say("I couldn't find an account with that email. Could you double-check it?")
    assert "ann.lee@example.com" in reply


def test_same_seed_same_conversation():
    def run(seed: int) -> list[str]:
        c = Convo(task_of(cancel_goal(), address_goal()), seed=seed)
        out = [c.start()]
        c.authenticate()
        for text in ("Which order?", "Cancel order #W100, correct (yes/no)?", "Anything else?"):
            out.append(c.say(text)[0])
        return out

    assert run(1) == run(1)


def test_corrects_a_proposed_cancellation_reason_that_is_not_its_own():
    c = Convo(task_of(cancel_goal()))
    c.start()
    c.authenticate()
    reply, done = c.say("To confirm, I will cancel order #W100 with the reason 'ordered by mistake'. Confirm (yes/no)?")
    assert reply == "No, that's not the reason. I no longer need it." and not done
    reply, done = c.say("To confirm, I will cancel order #W100 with the reason 'no longer needed'. Confirm (yes/no)?")
    assert reply.lower().startswith("yes") and not done


def test_a_quiet_customer_refuses_the_other_reason_without_its_own_and_says_yes_to_its_own():
    c = Convo(task_of(cancel_goal()), quiet_reasons=1.0)
    c.start()
    c.authenticate()
    reply, done = c.say("To confirm, I will cancel order #W100 with the reason 'ordered by mistake'. Confirm (yes/no)?")
    assert reply == "No, that's not the reason." and not done
    reply, done = c.say("To confirm, I will cancel order #W100 with the reason 'no longer needed'. Confirm (yes/no)?")
    assert reply.lower().startswith("yes") and not done


def test_quiet_reasons_is_drawn_per_refusal_on_its_own_stream():
    def replies(quiet: float, seed: int) -> list[str]:
        c = Convo(task_of(cancel_goal()), seed=seed, quiet_reasons=quiet)
        out = [c.start()]
        c.authenticate()
        out.append(c.say("To confirm, I will cancel order #W100 with the reason 'ordered by mistake'. Confirm?"))
        out.append(c.say("To confirm, I will cancel order #W100 with the reason 'no longer needed'. Confirm?"))
        return out

    assert replies(0.0, 3) == replies(0.0, 3)
    quiet = [replies(0.5, seed)[1][0] for seed in range(40)]
    assert 5 < quiet.count("No, that's not the reason.") < 35
    # the other replies of a session are the same with or without quiet refusals
    assert all(replies(0.5, s)[2] == replies(0.0, s)[2] for s in range(10))
    with pytest.raises(ValueError, match="0..1"):
        ScriptedCustomer(quiet_reasons=1.5)
    with pytest.raises(ValueError, match="training customers"):
        make_user("heldout", quiet_reasons=0.5)
    assert make_user("varied", quiet_reasons=0.5).name == "varied+quiet0.5"
    assert make_user("varied").name == "varied"


def test_a_proposal_naming_no_reason_is_judged_as_before():
    c = Convo(task_of(cancel_goal()))
    c.start()
    c.authenticate()
    reply, _ = c.say("To confirm, I will cancel order #W100. Do you confirm (yes/no)?")
    assert reply.lower().startswith("yes")


def return_goal(**kw) -> Goal:
    base = dict(id="g0", kind="return", outcome="act", say="I want to return something from order #W100.",
                upfront=["order_id"], details={"order_id": "It's order #W100.",
                                               "payment": "Please refund my Visa card ending in 8906."},
                action=RETURN, order_id="#W100", confirm_terms=["#W100", "8906"])
    return Goal(**{**base, **kw})


def looked_up(c: Convo) -> None:
    c.tool("get_order_details", {"order_id": "#W100"}, json.dumps(ORDER))
    c.tool("get_user_details", {"user_id": "ann_lee_1"}, json.dumps(USER))


def test_confirms_a_return_of_an_item_with_a_noise_cancelling_option():
    c = Convo(task_of(return_goal()))
    c.start()
    c.authenticate()
    looked_up(c)
    reply, done = c.say(RETURN_TEXT)
    assert reply.lower().startswith("yes") and not done


def test_refusing_its_own_goal_stated_in_full_is_a_simulator_contradiction():
    # a script whose terms the right proposal cannot meet: the customer would say no to its own goal
    c = Convo(task_of(return_goal(confirm_terms=["#W100", "a term nobody says"])))
    c.start()
    c.authenticate()
    looked_up(c)
    with pytest.raises(SimulatorError) as e:
        c.say(RETURN_TEXT)
    assert e.value.cause == "simulator_contradiction" and "return_delivered_order_items" in str(e.value)
    # a proposal that differs from the goal is refused as before, with no contradiction
    c = Convo(task_of(return_goal()))
    c.start()
    c.authenticate()
    looked_up(c)
    reply, done = c.say(RETURN_TEXT.replace("Visa card ending in 8906", "PayPal account"))
    assert reply.startswith("No, that's not what I want.") and not done


def test_says_no_to_a_return_of_another_item_of_the_order():
    # the generator puts the items' names among a return's terms: the right order and payment method
    # with another item is not what the customer asked for, and a yes to it would let a write of the
    # wrong items (or a garbled description before the right ones) pass the consent rule
    c = Convo(task_of(return_goal(confirm_terms=["#W100", "Headphones", "8906"])))
    c.start()
    c.authenticate()
    looked_up(c)
    other = RETURN_TEXT.replace("the Headphones (color: black, style: in-ear, connectivity: wired, noise "
                                "cancelling: no)", "the Yoga Mat (thickness: 3 mm, color: black)")
    reply, done = c.say(other)
    assert reply.startswith("No, that's not what I want.") and not done
    reply, done = c.say(RETURN_TEXT)
    assert reply.lower().startswith("yes") and not done


def test_a_confirmation_shift_fires_only_on_the_customers_own_request():
    # asked for a new address, offered a cancellation: "no", not a change of mind into the cancellation
    shift = GoalShift(trigger="confirmation", say="Hold on, forget that. Please cancel it instead.")
    c = Convo(task_of(address_goal(outcome="abandon", shift=shift), cancel_goal(id="g2")))
    c.start()
    c.authenticate()
    reply, done = c.say("To confirm, I will cancel order #W100. Do you confirm (yes/no)?")
    assert reply != shift.say and not done and not c.session.agreed
    # a proposal of the request on another order is not it either
    reply, _ = c.say("To confirm, I will change the shipping address of order #W999. Do you confirm (yes/no)?")
    assert reply != shift.say
    # asked to confirm the address change itself, the customer changes their mind
    reply, _ = c.say("To confirm, I will change the shipping address of order #W100. Do you confirm (yes/no)?")
    assert reply == shift.say
    reply, _ = c.say("To confirm, I will cancel order #W100. Do you confirm (yes/no)?")
    assert reply.lower().startswith("yes") and c.session.agreed


def test_a_customer_who_gives_up_before_changing_their_mind_never_asks_for_what_they_would_have_shifted_to():
    # proposing the cancellation until the customer gives up on the address change must not lead to
    # the cancellation they would have asked for on hearing the address change proposed
    shift = GoalShift(trigger="confirmation", say="Hold on, forget that. Please cancel it instead.")
    c = Convo(task_of(address_goal(outcome="abandon", shift=shift), cancel_goal(id="g2")))
    c.start()
    c.authenticate()
    for _ in range(10):
        reply, done = c.say("To confirm, I will cancel order #W100. Do you confirm (yes/no)?")
        assert not c.session.agreed and reply != shift.say
        if done:
            break
    assert done and reply.endswith(STOP) and "cancel" not in reply.lower()
