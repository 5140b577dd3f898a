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


def _evaluated_base(tmp_path, customers):
    """A run folder with a base model, its finished evaluation and a GRPO model from it."""
    for name in ("base", "no_cold_start_s0"):
        (tmp_path / "models" / name).mkdir(parents=True)
        (tmp_path / "models" / name / "model.safetensors").write_bytes(b"the base's weights")
    ev = tmp_path / "eval" / "base"
    (ev / "heldout" / "greedy").mkdir(parents=True)
    (ev / "heldout" / "greedy" / "episodes.jsonl").write_text('{"task_id": "t1"}\n')
    result = {"model": "base", "customers": dict.fromkeys(customers, {"pass1": 0.0})}
    (ev / "result.json").write_text(json.dumps(result))


def test_a_model_with_the_base_weights_takes_the_base_evaluation(tmp_path):
    from rl.experiment.stages import weights_digest

    st = Stages(get_recipe("smoke"), tmp_path, env=None, report=_Quiet(), customers=["heldout"])
    _evaluated_base(tmp_path, ["heldout"])
    # env=None: playing an episode would fail, so the result can only be the base's, copied
    out = st.evaluate("no_cold_start_s0", tasks=[])
    assert out == {"model": "no_cold_start_s0", "customers": {"heldout": {"pass1": 0.0}}, "same_weights_as": "base"}
    ev = tmp_path / "eval" / "no_cold_start_s0"
    assert json.loads((ev / "result.json").read_text()) == out
    assert (ev / "heldout" / "greedy" / "episodes.jsonl").read_text() == '{"task_id": "t1"}\n'
    assert not ev.with_name("no_cold_start_s0.tmp").exists()
    # other weights: not the same model, nothing reused
    (tmp_path / "models" / "no_cold_start_s0" / "model.safetensors").write_bytes(b"one GRPO step later")
    assert weights_digest(tmp_path / "models" / "no_cold_start_s0") != weights_digest(tmp_path / "models" / "base")
    assert not st._same_as_base("no_cold_start_s0")


def test_the_base_evaluation_is_reused_only_when_it_holds_every_customer(tmp_path):
    st = Stages(get_recipe("smoke"), tmp_path, env=None, report=_Quiet(), customers=["heldout", "scripted"])
    _evaluated_base(tmp_path, ["heldout"])  # the base was evaluated before a customer was added
    assert not st._same_as_base("no_cold_start_s0")
    assert not st._same_as_base("base")
