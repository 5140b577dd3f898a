"""GPU recipes for training real Qwen3 with verl: model, LoRA or full fine-tune, GPU layout, and the
Hydra overrides of the MUA-RL setup (GRPO, G = 8, KL 0.001 low_var_kl, clip 0.2, token-mean loss,
lr 1e-6, temperature 1.0, 30 turns, hermes calls, 32,768-token conversations).

The GPU counts and memory figures are planned on paper (docs/VERL.md shows the arithmetic); nothing
here has run on a GPU. `grpo_overrides(recipe, data_dir)` is the full list `run_grpo.sh` passes to
`python -m verl.trainer.main_ppo`; tests compose it with verl's own config files so a typo fails.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

CONTEXT = 32768  # tokens per conversation (MUA-RL)
PROMPT = 8192  # system prompt with the tool list + the customer's first message (Qwen3: ~4k)


@dataclass(frozen=True)
class Recipe:
    name: str
    model: str  # Hugging Face id or local folder
    params_b: float
    lora_rank: int = 0  # 0: full fine-tune
    gpus: int = 8
    nnodes: int = 1
    gpu_memory_gb: int = 80
    rollout_tp: int = 1
    param_offload: bool = False
    optimizer_offload: bool = False
    micro_batch_per_gpu: int = 1
    gpu_memory_utilization: float = 0.6

    @property
    def lr(self) -> float:
        return 1e-5 if self.lora_rank else 1e-6  # LoRA: about 10x the full fine-tune rate

    @property
    def lora(self) -> bool:
        return self.lora_rank > 0


def _pair(size: str, model: str, params_b: float, full: dict, lora: dict) -> dict[str, Recipe]:
    return {f"qwen3-{size}": Recipe(f"qwen3-{size}", model, params_b, **full),
            f"qwen3-{size}-lora": Recipe(f"qwen3-{size}-lora", model, params_b, lora_rank=64, **lora)}


RECIPES: dict[str, Recipe] = {
    **_pair("8b", "Qwen/Qwen3-8B", 8.2, dict(gpus=8, rollout_tp=2), dict(gpus=4, rollout_tp=1)),
    **_pair("14b", "Qwen/Qwen3-14B", 14.8, dict(gpus=8, rollout_tp=4, optimizer_offload=True),
            dict(gpus=8, rollout_tp=2)),
    **_pair("32b", "Qwen/Qwen3-32B", 32.8,
            dict(gpus=16, nnodes=2, rollout_tp=8, param_offload=True, optimizer_offload=True),
            dict(gpus=8, rollout_tp=4, param_offload=True)),
}


def get_recipe(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise ValueError(f"unknown recipe {name!r}; known: {', '.join(RECIPES)}") from None


def grpo_overrides(recipe: Recipe, data_dir: str | Path, *, model_path: str | None = None,
                   project: str = "muarl", experiment: str | None = None,
                   train_batch_size: int = 32, epochs: int = 3) -> list[str]:
    """Every Hydra override of the GRPO run (verl 0.9.1 keys)."""
    d = str(data_dir)
    per_node = recipe.gpus // recipe.nnodes
    o = [
        "algorithm.adv_estimator=grpo",
        "algorithm.use_kl_in_reward=False",
        "algorithm.norm_adv_by_std_in_grpo=True",
        f"data.train_files={d}/train.parquet",
        f"data.val_files={d}/val.parquet",
        f"data.train_batch_size={train_batch_size}",
        f"data.max_prompt_length={PROMPT}",
        f"data.max_response_length={CONTEXT - PROMPT}",
        "data.return_raw_chat=True",
        "data.filter_overlong_prompts=False",
        "data.truncation=error",
        f"actor_rollout_ref.model.path={model_path or recipe.model}",
        "actor_rollout_ref.model.use_remove_padding=True",
        "actor_rollout_ref.model.enable_gradient_checkpointing=True",
        f"actor_rollout_ref.model.lora_rank={recipe.lora_rank}",
        f"actor_rollout_ref.actor.optim.lr={recipe.lr}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={train_batch_size}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={recipe.micro_batch_per_gpu}",
        "actor_rollout_ref.actor.use_dynamic_bsz=True",
        f"actor_rollout_ref.actor.ppo_max_token_len_per_gpu={CONTEXT}",
        "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        "actor_rollout_ref.actor.clip_ratio=0.2",
        "actor_rollout_ref.actor.clip_ratio_low=0.2",
        "actor_rollout_ref.actor.clip_ratio_high=0.2",
        "actor_rollout_ref.actor.loss_agg_mode=token-mean",
        "actor_rollout_ref.actor.entropy_coeff=0",
        f"actor_rollout_ref.actor.fsdp_config.param_offload={recipe.param_offload}",
        f"actor_rollout_ref.actor.fsdp_config.optimizer_offload={recipe.optimizer_offload}",
        f"actor_rollout_ref.ref.fsdp_config.param_offload={recipe.param_offload or recipe.params_b > 10}",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={recipe.micro_batch_per_gpu}",
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.mode=async",
        "actor_rollout_ref.rollout.n=8",
        "actor_rollout_ref.rollout.temperature=1.0",
        "actor_rollout_ref.rollout.top_p=1.0",
        "actor_rollout_ref.rollout.val_kwargs.temperature=0.0",
        "actor_rollout_ref.rollout.val_kwargs.do_sample=False",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={recipe.rollout_tp}",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={recipe.gpu_memory_utilization}",
        f"actor_rollout_ref.rollout.max_model_len={CONTEXT}",
        f"actor_rollout_ref.rollout.max_num_batched_tokens={CONTEXT}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={recipe.micro_batch_per_gpu}",
        "actor_rollout_ref.rollout.calculate_log_probs=True",
        "actor_rollout_ref.rollout.multi_turn.enable=True",
        "actor_rollout_ref.rollout.multi_turn.max_assistant_turns=30",
        "actor_rollout_ref.rollout.multi_turn.max_user_turns=30",
        "actor_rollout_ref.rollout.multi_turn.max_parallel_calls=1",
        "actor_rollout_ref.rollout.multi_turn.max_tool_response_length=8192",
        "actor_rollout_ref.rollout.multi_turn.format=hermes",
        f"actor_rollout_ref.rollout.agent.agent_loop_config_path={d}/agent_loops.yaml",
        "actor_rollout_ref.rollout.agent.default_agent_loop=muarl_agent",
        f"trainer.n_gpus_per_node={per_node}",
        f"trainer.nnodes={recipe.nnodes}",
        f"trainer.project_name={project}",
        f"trainer.experiment_name={experiment or recipe.name}",
        f"trainer.total_epochs={epochs}",
        "trainer.save_freq=10",
        "trainer.test_freq=10",
        "trainer.resume_mode=auto",
        "trainer.val_before_train=True",
        "trainer.logger=[console]",
    ]
    if recipe.lora:
        o += [f"actor_rollout_ref.model.lora_alpha={2 * recipe.lora_rank}",
              "actor_rollout_ref.model.target_modules=all-linear",
              "actor_rollout_ref.rollout.load_format=safetensors"]
    return o


def sft_overrides(recipe: Recipe, data_dir: str | Path, *, model_path: str | None = None,
                  project: str = "muarl", experiment: str | None = None) -> list[str]:
    """Hydra overrides of cold-start SFT with verl's SFT trainer (MUA-RL: batch 128, 2 epochs, AdamW,
    lr 5e-6, cosine) on multi-turn `messages` + `tools` rows."""
    d = str(data_dir)
    o = [
        f"data.train_files={d}/sft.parquet",
        "data.val_files=null",
        "data.messages_key=messages",
        "data.tools_key=tools",
        "data.train_batch_size=128",
        "data.micro_batch_size_per_gpu=1",
        f"data.max_length={CONTEXT}",
        f"data.max_token_len_per_gpu={CONTEXT}",
        "data.use_dynamic_bsz=True",
        "data.truncation=error",
        f"model.path={model_path or recipe.model}",
        "model.enable_gradient_checkpointing=True",
        f"model.lora_rank={recipe.lora_rank}",
        "optim.lr=5e-06" if not recipe.lora else "optim.lr=5e-05",
        "optim.lr_scheduler_type=cosine",
        "optim.lr_warmup_steps_ratio=0.03",
        f"trainer.n_gpus_per_node={recipe.gpus // recipe.nnodes}",
        f"trainer.nnodes={recipe.nnodes}",
        f"trainer.project_name={project}",
        f"trainer.experiment_name={experiment or recipe.name + '-sft'}",
        "trainer.total_epochs=2",
        "trainer.logger=[console]",
    ]
    if recipe.lora:
        o += [f"model.lora_alpha={2 * recipe.lora_rank}", "model.target_modules=all-linear"]
    return o
