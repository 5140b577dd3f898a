"""The oracle reads the identity each customer gives, in the training and in the held-out words,
and `oracle:static` is the oracle for the static-query customer."""

from __future__ import annotations

import json

import pytest

from rl.policies.base import make_policy
from rl.policies.oracle import OracleSession
from rl.simulator.bank import TrainingBank
from rl.simulator.heldout import HeldOutBank
from tests.rl.simulator.test_scripted_customer import CUSTOMER, cancel_goal, task_of


@pytest.mark.parametrize("knows_email", [True, False])
def test_the_oracle_reads_name_and_zip_in_either_bank(knows_email):
    c = CUSTOMER.model_copy(update={"identify_by": "name_zip", "knows_email": knows_email})
    task = task_of(cancel_goal(), customer=c)
    for bank in (TrainingBank(), HeldOutBank(task, 0)):
        call = OracleSession(task)._identify("Sure. " + bank.name_zip(c))["tool_calls"][0]["function"]
        assert call["name"] == "find_user_id_by_name_zip"
        assert json.loads(call["arguments"]) == {"first_name": "Ann", "last_name": "Lee", "zip": "10001"}


def test_the_oracle_asks_when_no_identity_was_given():
    message = OracleSession(task_of(cancel_goal()))._identify("I'm hoping to cancel order #W100, zip 12345.")
    assert "tool_calls" not in message and "verify your identity" in message["content"]


def test_oracle_variants():
    assert make_policy("oracle").name == "oracle" and make_policy("oracle:static").name == "oracle:static"
    with pytest.raises(ValueError, match="oracle:static"):
        make_policy("oracle:nonsense")
