"""The static-query customer of the ablation: everything up front, then no answer and no
confirmation, and still the training customer's stop rules (goals settled, or no progress)."""

from __future__ import annotations

from rl.simulator.base import STOP
from rl.simulator.scripted import static_goals
from rl.simulator.static import NO_ANSWER, StaticCustomer
from rl.tasks.generator import SCHEDULE, generate_tasks
from rl.tasks.schema import Goal, GoalShift, Haggle
from rl.tasks.stores import resolve_store, synthetic_ref
from tests.rl.simulator.probe import probe
from tests.rl.simulator.test_scripted_customer import CANCEL, CUSTOMER, Convo, address_goal, cancel_goal, task_of

ADDRESS_ARGS = address_goal().action.arguments


def static_convo(task) -> Convo:
    c = Convo(task)
    c.session = StaticCustomer().session(task, 0)
    return c


def test_the_opening_states_identity_and_every_goal_with_its_details():
    shift = GoalShift(trigger="confirmation", say="Actually, no.")
    task = task_of(cancel_goal(outcome="abandon", shift=shift), address_goal())
    opening = static_convo(task).start()
    assert "1 Elm Street" in opening and "#W100" in opening and "ann.lee@example.com" in opening
    assert "cancel" not in opening  # the abandoned goal is not part of the static request


def test_an_identity_mistake_is_not_made_when_it_could_not_be_corrected():
    task = task_of(cancel_goal(), customer=CUSTOMER.model_copy(update={"wrong_email": "ann.le@example.com"}))
    opening = static_convo(task).start()
    assert "ann.lee@example.com" in opening and "ann.le@example.com" not in opening


def test_it_answers_no_question_and_confirms_nothing():
    c = static_convo(task_of(cancel_goal(), address_goal()))
    c.start()
    c.authenticate()
    for text in ("Which order?", "To confirm, I will cancel order #W100. Do you confirm (yes/no)?",
                 "What is the reason?"):
        assert c.say(text) == (NO_ANSWER, False)


def test_it_stops_once_every_goal_is_done():
    c = static_convo(task_of(cancel_goal(), address_goal()))
    c.start()
    c.authenticate()
    # goals may be done in any order; a failed attempt at another write is not the goal
    c.tool("modify_pending_order_address", ADDRESS_ARGS, '{"order_id": "#W100"}')
    assert c.say("The address is changed.") == (NO_ANSWER, False)
    c.tool("cancel_pending_order", {"order_id": "#W100", "reason": "ordered by mistake"}, "Error: bad")
    assert c.say("Hmm.") == (NO_ANSWER, False)
    c.tool("cancel_pending_order", CANCEL.arguments, '{"order_id": "#W100", "status": "cancelled"}')
    reply, done = c.say("Order #W100 is cancelled.")
    assert done and reply.endswith(STOP)


def test_a_refusal_settles_a_forbidden_goal_and_an_answer_an_information_goal():
    haggle = Haggle(demands=["Please!"], then="give_up", say_after="Fine.")
    c = static_convo(task_of(cancel_goal(outcome="refuse", haggle=haggle)))
    c.start()
    reply, done = c.say("I'm sorry, but I cannot cancel order #W100: it is already delivered.")
    assert done and reply.endswith(STOP)
    info = Goal(id="g1", kind="info", outcome="info", say="Where is order #W100?", answer=["shipped", "TRK42"])
    c = static_convo(task_of(info))
    c.start()
    assert c.say("Order #W100 has shipped.") == (NO_ANSWER, False)
    reply, done = c.say("Order #W100 has shipped, tracking number TRK42.")
    assert done and reply.endswith(STOP)


def test_it_stops_when_the_agent_makes_no_progress():
    c = static_convo(task_of(cancel_goal()))
    c.start()
    replies = [c.say("Could you tell me your order id?") for _ in range(4)]
    assert replies[:3] == [(NO_ANSWER, False)] * 3 and replies[3][1] and replies[3][0].endswith(STOP)


def test_generated_tasks_only_ever_get_the_fixed_line_after_the_opening():
    ref = synthetic_ref(0, 200)
    for t in generate_tasks(resolve_store(ref), 2 * len(SCHEDULE), 9, snapshot=ref):
        replies = probe(StaticCustomer().session(t, 0), t)
        goals = static_goals(t.script.goals)
        assert all(g.order_id[1:] in replies[0] for g in goals if g.order_id)
        assert set(replies[1:-1]) <= {NO_ANSWER} and replies[-1].endswith(STOP)
