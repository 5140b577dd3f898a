"""What the experiment's SFT stage trains on: the cold-start records as the recipe's view shows them
(typed references, compact results), plus identifier-augmented copies when the recipe asks."""

import json
import re

from rl.experiment.recipe import get_recipe
from rl.experiment.stages import Stages
from tests.rl.coldstart.test_augment import RECORD


class _Quiet:
    def stage(self, *a, **k):
        pass

    def advance(self, *a, **k):
        pass


def _stages(tmp_path, **update):
    (tmp_path / "coldstart").mkdir()
    (tmp_path / "coldstart" / "filtered.jsonl").write_text(json.dumps(RECORD) + "\n")
    return Stages(get_recipe("smoke").model_copy(update=update), tmp_path, env=None, report=_Quiet())


def test_sft_records_are_shown_with_references_and_names_from_the_data(tmp_path):
    st = _stages(tmp_path, shuffle_refs=False)
    assert {"James", "Lee"} <= st.view.names
    [rec] = st._sft_records()
    text = json.dumps(rec["messages"])
    assert "8520591" not in text and "James" not in text and "<order_1>" in text and "<name_1>" in text
    assert rec["messages"][1]["content"] == "Hi, cancel order <order_1>. I'm <name_1> <name_2>, zip <zip_1>."


def test_augmented_copies_are_added_when_the_recipe_asks(tmp_path):
    st = _stages(tmp_path, sft_augment_copies=2, shuffle_refs=False)
    records = st._sft_records()
    assert len(records) == 3
    # a renamed customer's name is in the seed catalog, so it is still shown as a reference
    assert all("<name_1>" in json.dumps(r["messages"]) for r in records)


def test_shuffled_references_in_sft_records_are_consistent_within_a_conversation(tmp_path):
    st = _stages(tmp_path, shuffle_refs=True)
    assert st.view.shuffle_refs and st.view.constrain_calls
    [rec] = st._sft_records()
    opening = rec["messages"][1]["content"]
    order = re.search(r"<order_\d+>", opening).group(0)
    calls = [c for m in rec["messages"] for c in m.get("tool_calls") or []]
    assert any(order in json.dumps(c["function"]["arguments"]) for c in calls)  # the call names the order it was told
    assert st._sft_records() == [rec]  # the same numbers every time the records are built


def test_reason_counterfactuals_and_spaced_values_unless_the_recipe_turns_them_off(tmp_path):
    cancel = {"role": "assistant", "content": "", "tool_calls": [{"id": "c3", "type": "function", "function": {
        "name": "cancel_pending_order", "arguments": {"order_id": "#W8520591", "reason": "no longer needed"}}}]}
    said = {"role": "user", "content": "I no longer need it."}
    (tmp_path / "coldstart").mkdir()
    (tmp_path / "coldstart" / "filtered.jsonl").write_text(
        json.dumps({**RECORD, "messages": [*RECORD["messages"], said, cancel]}) + "\n")
    st = Stages(get_recipe("smoke"), tmp_path, env=None, report=_Quiet())  # both on by default
    original, swapped = st._sft_records()
    assert original["messages"][-2]["content"] == "I no longer need it."
    assert swapped["messages"][-2]["content"] == "I ordered it by mistake."
    args = [r["messages"][-1]["tool_calls"][0]["function"]["arguments"] for r in (original, swapped)]
    assert args == [{"order_id": "<order_1>", "reason": " no longer needed"},
                    {"order_id": "<order_1>", "reason": " ordered by mistake"}]
    off = get_recipe("smoke").model_copy(update={"sft_reason_counterfactuals": False, "spaced_values": False})
    [plain] = Stages(off, tmp_path, None, _Quiet())._sft_records()
    assert plain["messages"][-1]["tool_calls"][0]["function"]["arguments"]["reason"] == "no longer needed"


def test_each_stage_has_one_marker_and_unknown_stages_are_an_error(tmp_path):
    import pytest

    from rl.experiment.stages import result_marker

    assert result_marker(tmp_path, "sft") == tmp_path / "models" / "cold_start" / "manifest.json"
    assert result_marker(tmp_path, "grpo_mua_rl_s1") == tmp_path / "models" / "mua_rl_s1" / "manifest.json"
    assert result_marker(tmp_path, "eval_cold_start") == tmp_path / "eval" / "cold_start" / "result.json"
    with pytest.raises(ValueError, match="no such stage"):
        result_marker(tmp_path, "train_everything")
