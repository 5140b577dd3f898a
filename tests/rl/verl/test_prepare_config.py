"""`muarl verl prepare` writes what verl reads: its own dataset class reads the parquet files, and
the Hydra overrides of run_grpo.sh / run_sft.sh compose with verl's config files and validate
(a misspelt key fails here, not on a cluster)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import verl.trainer.config as trainer_config_pkg
import yaml
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from rl.tasks.schema import save_tasks
from rl.verl.agent_loop_name import AGENT_NAME, LOOP_TARGET
from rl.verl.recipes import RECIPES, get_recipe, grpo_overrides

VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)  # vLLM's max_lora_rank choices
CONFIG_DIR = str(Path(trainer_config_pkg.__file__).parent)


def overrides_of(script: Path) -> list[str]:
    """The Hydra overrides a generated script passes (its command line after the program)."""
    words = shlex.split(script.read_text().split("set -euo pipefail\n", 1)[1].replace("\\\n", " "))
    return [w for w in words if "=" in w and not w.startswith("--") and w != '"$@"']


@pytest.fixture(scope="module")
def prepared(tmp_path_factory, generated_tasks) -> Path:
    out = tmp_path_factory.mktemp("verl_run")
    tasks = out.parent / "tasks_in.json"
    save_tasks(tasks, generated_tasks)
    cold = out.parent / "cold.jsonl"
    cold.write_text(json.dumps({"messages": [{"role": "user", "content": "hi"},
                                             {"role": "assistant", "content": "Hello!"}],
                                "tools": [], "meta": {}}) + "\n")
    r = subprocess.run([sys.executable, "-m", "backend.cli", "verl", "prepare", "--tasks", str(tasks),
                        "--recipe", "qwen3-8b", "--out", str(out), "--val-fraction", "0.25",
                        "--coldstart", str(cold)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["train"] + summary["val"] >= len(generated_tasks) and summary["sft"] == 1
    return out


def test_prepare_writes_all_files(prepared: Path) -> None:
    for name in ("train.parquet", "val.parquet", "agent_loops.yaml", "run_grpo.sh", "run_sft.sh", "tasks.json",
                 "sft.parquet"):
        assert (prepared / name).is_file(), name
    loops = yaml.safe_load((prepared / "agent_loops.yaml").read_text())
    assert loops[0]["name"] == AGENT_NAME and loops[0]["_target_"] == LOOP_TARGET
    assert Path(loops[0]["env"]["tasks"]) == prepared / "tasks.json"
    script = (prepared / "run_grpo.sh").read_text()
    assert "python -m verl.trainer.main_ppo" in script
    for must in ("algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.n=8",
                 "actor_rollout_ref.actor.use_kl_loss=True",
                 "actor_rollout_ref.actor.kl_loss_coef=0.001", "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
                 "actor_rollout_ref.actor.clip_ratio=0.2", "actor_rollout_ref.actor.loss_agg_mode=token-mean",
                 "actor_rollout_ref.actor.optim.lr=1e-06", "actor_rollout_ref.rollout.temperature=1.0",
                 "actor_rollout_ref.rollout.multi_turn.enable=True",
                 "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=30",
                 "actor_rollout_ref.rollout.multi_turn.format=hermes", "actor_rollout_ref.rollout.max_model_len=32768",
                 f"actor_rollout_ref.rollout.agent.agent_loop_config_path={prepared}/agent_loops.yaml"):
        assert must in overrides_of(prepared / "run_grpo.sh"), must


def test_verl_dataset_class_reads_the_parquet(prepared: Path, generated_tasks) -> None:
    from verl.utils.dataset.rl_dataset import RLHFDataset

    config = OmegaConf.create({"prompt_key": "prompt", "max_prompt_length": 4096, "filter_overlong_prompts": False,
                               "return_raw_chat": True, "cache_dir": str(prepared / "cache")})
    ids = set()
    for name in ("train.parquet", "val.parquet"):
        ds = RLHFDataset(str(prepared / name), tokenizer=None, config=config)
        assert len(ds) > 0
        for i in range(len(ds)):
            row = ds[i]
            assert row["agent_name"] == AGENT_NAME
            assert row["raw_prompt"][0]["role"] == "system"
            assert row["extra_info"]["snapshot"] == "tau-retail"
            ids.add(row["extra_info"]["task_id"])
    assert ids == {t.id for t in generated_tasks}


def _compose(config_name: str, overrides: list[str]):
    with initialize_config_dir(config_dir=CONFIG_DIR, version_base=None):
        return compose(config_name=config_name, overrides=overrides)


def _validate_ppo(cfg) -> None:
    """What verl's trainer does with the config before it starts workers: typed dataclasses (their
    own checks) and the trainer's cross-field validation."""
    from verl.utils.config import omega_conf_to_dataclass, validate_config

    OmegaConf.resolve(cfg)
    actor = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    rollout = omega_conf_to_dataclass(cfg.actor_rollout_ref.rollout)
    algo = omega_conf_to_dataclass(cfg.algorithm)
    assert actor.use_kl_loss and actor.kl_loss_coef == 0.001 and actor.kl_loss_type == "low_var_kl"
    assert rollout.n == 8 and rollout.multi_turn.enable and rollout.multi_turn.format == "hermes"
    assert rollout.multi_turn.max_assistant_turns == 30 and rollout.agent.default_agent_loop == AGENT_NAME
    assert algo.adv_estimator == "grpo"
    rank = cfg.actor_rollout_ref.model.lora_rank
    if rank:  # verl asks the installed vLLM for the allowed LoRA ranks; vLLM is a GPU package, not here
        assert rank in VLLM_LORA_RANKS
        cfg = OmegaConf.merge(cfg, {"actor_rollout_ref": {"model": {"lora_rank": 0}}})
    validate_config(cfg, use_reference_policy=True, use_critic=False)


@pytest.mark.parametrize("recipe", sorted(RECIPES))
def test_grpo_overrides_compose_with_verl_config(recipe: str, tmp_path: Path) -> None:
    cfg = _compose("ppo_trainer", grpo_overrides(get_recipe(recipe), tmp_path))
    _validate_ppo(cfg)


def test_generated_script_composes(prepared: Path) -> None:
    cfg = _compose("ppo_trainer", overrides_of(prepared / "run_grpo.sh"))
    _validate_ppo(cfg)
    sft = _compose("sft_trainer_engine", overrides_of(prepared / "run_sft.sh"))
    assert sft.data.messages_key == "messages" and sft.optim.lr == 5e-6 and sft.trainer.total_epochs == 2


@pytest.mark.parametrize("typo", ["actor_rollout_ref.actor.kl_los_coef=0.001",
                                  "actor_rollout_ref.rollout.multi_turn.max_asistant_turns=30",
                                  "actor_rollout_ref.actor.loss_agg_mode=token-mena"])
def test_a_typo_fails(typo: str, tmp_path: Path) -> None:
    with pytest.raises(Exception):  # noqa: B017 - Hydra's override error or verl's validation error
        _validate_ppo(_compose("ppo_trainer", [*grpo_overrides(get_recipe("qwen3-8b"), tmp_path), typo]))
