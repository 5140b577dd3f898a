"""The stages of the paper experiment (see rl/experiment/paper_table.py), each a method that writes
its result under the experiment folder and returns at once when that result already exists.

An evaluation (`evaluate`) plays every task with each evaluation customer `eval_trials` times:
trial 0 greedy (temperature 0, `DIR/eval/<model>/<customer>/greedy/`), the others sampled at
temperature 1 (`.../sampled/`, numbered from 0 there). The greedy trial gives pass^1, TCR and the
per-tag figures; the sampled ones pass^k for k = 1..eval_trials-1 (exchangeable trials, which the
pass^k estimate assumes: a greedy trial is not one more draw from the sampling policy). Both models
of a comparison meet the same customer seeds on the same task and trial."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

import structlog

from rl.chat.views import ChatView
from rl.experiment.environment import ExperimentEnv
from rl.experiment.plan import (
    Reporter,
    customer_folder,
    evaluation_customers,
    result_marker,
    row_result,
    stage_done,
)
from rl.experiment.recipe import ExperimentRecipe
from rl.tasks.schema import Task

if TYPE_CHECKING:
    from rl.grpo.rollout import EpisodeRollout
    from rl.grpo.trace import Trace
    from rl.simulator.base import UserSimulator

log = structlog.get_logger(__name__)


def _append_jsonl(path: Path, obj: dict[str, Any]) -> None:
    with path.open("a") as f:
        f.write(json.dumps(obj) + "\n")


class Stages:
    def __init__(self, recipe: ExperimentRecipe, out: Path, env: ExperimentEnv, report: Reporter,
                 customers: list[str] | None = None) -> None:
        self.recipe, self.out, self.env, self.report = recipe, out, env, report
        self._view: ChatView | None = None
        self._customers = customers

    @property
    def customers(self) -> list[str]:
        """The customers evaluations play with (plan.py `evaluation_customers` unless given)."""
        if self._customers is None:
            self._customers = evaluation_customers(self.recipe)
        return self._customers

    @property
    def view(self) -> ChatView:
        """The recipe's view with the names learned from the cold-start data (rl/chat/views.py)."""
        if self._view is None:
            from rl.coldstart.sft import read_records

            self._view = self.recipe.view_with_names(read_records(self.out / "coldstart" / "filtered.jsonl"))
        return self._view

    def model_dir(self, name: str) -> Path:
        return self.out / "models" / name

    # ------------------------------------------------------------------ data
    def cold_start_data(self, tasks: list[Task]) -> Path:
        folder = self.out / "coldstart"
        kept_path = result_marker(self.out, "cold_start_data")
        if kept_path.exists():
            return kept_path
        from rl.coldstart.data import write_jsonl
        from rl.simulator.base import make_user

        customer = self.recipe.train_customer
        self.report.stage(f"cold-start data (teacher x {customer} customer)", None)
        user = make_user(customer, quiet_reasons=self.recipe.cold_start_quiet_reasons)
        records, kept, why = self._teacher_plays(tasks, user, corrections=self.recipe.cold_start_corrections)
        write_jsonl(records, folder / "raw.jsonl")
        (folder / "stats.json").write_text(json.dumps({"episodes": len(records), "kept": len(kept),
                                                       "rejected_because": dict(why)}, indent=1))
        if not kept:
            raise RuntimeError(f"no cold-start trajectory passed the filter: {dict(why)}")
        return write_jsonl(kept, kept_path)

    def _teacher_plays(self, tasks: list[Task], user: UserSimulator, corrections: float = 0.0) -> tuple[
            list[dict[str, Any]], list[dict[str, Any]], Any]:
        """The cold-start teacher plays every task once with `user`: every record, the ones fit for
        training (rl/coldstart/data.py `filter_records`) and why the others were not."""
        from rl.coldstart.data import collect_real_tool_trajectories, filter_records, write_tool_names
        from rl.coldstart.teacher import TeacherPolicy

        teacher = TeacherPolicy(corrections=corrections, wordings=getattr(user, "wordings", None),
                                item_options=self.recipe.teacher_item_options, item_refs=self.recipe.view.item_refs,
                                payment_refs=self.recipe.view.payment_refs, said_order=self.recipe.teacher_said_order)
        records = self.env.run(collect_real_tool_trajectories(
            tasks, teacher, user, self.env.pool, self.env.cache,
            concurrency=16, source=f"real_tools:teacher+{user.name}"))
        kept, why = filter_records(records, write_tool_names())
        return records, kept, why

    def _sft_records(self) -> list[dict[str, Any]]:
        from rl.coldstart.augment import sft_training_records
        from rl.coldstart.sft import read_records

        recipe = self.recipe
        records = sft_training_records(read_records(self.out / "coldstart" / "filtered.jsonl"),
                                       counterfactuals=recipe.sft_reason_counterfactuals,
                                       augment_copies=recipe.sft_augment_copies, seed=recipe.task_seed)
        return [self.view.record(r) for r in records]

    # ------------------------------------------------------------------ models
    def base_model(self) -> Path:
        folder = self.model_dir("base")
        if result_marker(self.out, "base_model").exists():
            return folder
        from rl.chat.format import render_conversation
        from rl.models.tiny import build_tiny_model, save_model_folder
        from rl.models.tokenizer import train_bpe

        self.report.stage("tokenizer and base model", None)
        texts = [render_conversation(r["messages"], r["tools"]) for r in self._sft_records()]
        tok = train_bpe(texts, vocab_size=self.recipe.vocab_size, extra_tokens=self.view.extra_tokens)
        model = build_tiny_model(tok, self.recipe.model)
        digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
        return save_model_folder(model, tok, folder, {
            "kind": "tiny-qwen3", "recipe": self.recipe.model.model_dump(), "experiment_recipe": self.recipe.name,
            "tokenizer": {"type": "byte-level BPE", "vocab_size": len(tok), "corpus": "cold-start conversations",
                          "corpus_digest": digest, "documents": len(texts)},
            "view": self.view.describe(), "parent": None})

    def sft(self) -> Path:
        folder = self.model_dir("cold_start")
        if result_marker(self.out, "sft").exists():
            return folder
        from rl.coldstart.sft import sft_train
        from rl.models.tiny import load_model_folder, save_model_folder

        model, tok, manifest = load_model_folder(self.model_dir("base"))
        records = self._sft_records()
        metrics = self.out / "sft_metrics.jsonl"
        metrics.unlink(missing_ok=True)
        cfg = self.recipe.sft
        import math

        total = max(1, round(math.ceil(len(records) / cfg.batch_size) * cfg.epochs))
        self.report.stage(f"cold-start SFT ({len(records)} conversations)", total)

        def on_step(m: dict[str, Any]) -> None:
            _append_jsonl(metrics, m)
            self.report.advance(1, loss=m["loss"])

        history = sft_train(model, tok, records, cfg, on_step=on_step)
        return save_model_folder(model, tok, folder, {
            **{k: v for k, v in manifest.items() if k not in ("created", "parameters", "architecture")},
            "parent": "base", "training": {"method": "sft", "config": cfg.model_dump(), "steps": len(history),
                                           "conversations": len(records), "final_loss": history[-1]["loss"]}})

    def grpo(self, row: str, init: str, user_spec: str, tasks: list[Task],
             val_tasks: list[Task] | None = None, *, seed: int | None = None) -> Path:
        """GRPO run `row` (its model is `models/<row>`) from model `init` with `user_spec` customers on
        `tasks`, with GRPO seed `seed` (None: the recipe's). With `val_tasks` the run ships the best
        of its validated models (rl/grpo/selection.py), else its last one."""
        folder = self.model_dir(row)
        if result_marker(self.out, f"grpo_{row}").exists():
            return folder
        from rl.env.episode import EpisodeLimits
        from rl.grpo.rollout import EpisodeRollout
        from rl.grpo.selection import CheckpointSelector, validation_score
        from rl.grpo.trainer import GRPOTrainer
        from rl.models.tiny import load_model_folder, save_model_folder
        from rl.simulator.base import make_user

        model, tok, manifest = load_model_folder(self.model_dir(init))
        r = self.recipe
        config = r.grpo if seed is None else r.grpo.model_copy(update={"seed": seed})
        run_dir = self.out / "grpo" / row

        def episodes(user: UserSimulator, greedy: bool) -> EpisodeRollout:
            return EpisodeRollout(tok, self.env.loop, self.env.pool, self.env.cache, user,
                                  max_new_tokens=r.max_new_tokens, temperature=config.temperature,
                                  max_context=r.max_context, view=self.view, greedy=greedy,
                                  limits=EpisodeLimits(max_turns=r.max_turns), concurrency=r.rollout_concurrency,
                                  seed=config.seed)

        base_manifest = {**{k: v for k, v in manifest.items() if k not in ("created", "parameters", "architecture")},
                         "parent": init}
        user = make_user(user_spec, quiet_reasons=r.grpo_quiet_reasons if user_spec == r.train_customer else 0.0)
        if r.grpo_customer_noise:
            from rl.simulator.noisy import NoisyCustomer, noise_words

            user = NoisyCustomer(user, noise_words(tok), r.grpo_customer_noise)
        anchor: list[Any] = []
        if config.anchor_coef:  # GRPO from a cold-started model keeps to the teacher's conversations
            if init == "base":
                config = config.model_copy(update={"anchor_coef": 0.0})  # w/o cold start never sees them
            else:  # the cold start, or the cycle's champion (it descends from one): cold_start_data first
                from rl.coldstart.sft import build_traces

                anchor, _ = build_traces(tok, self._sft_records(), r.sft.max_tokens)
        guides: dict[str, Trace] = {}
        if config.guide_failed_groups:  # like the anchor: the teacher's conversations guide the cold start only
            if init == "cold_start":
                guides = self.guides(tok, user, tasks)
                if not guides:  # the teacher solved none of them with this customer: nothing to guide with
                    log.warning("grpo.no_guides", row=row, customer=user.name)
            if not guides:
                config = config.model_copy(update={"guide_failed_groups": False})
        trainer = GRPOTrainer(model, tok, tasks, episodes(user, greedy=False), config, run_dir,
                              manifest={**manifest, "parent": init, "user": user.name}, anchor=anchor,
                              guides=guides)
        selector = None
        if val_tasks:
            scorer = validation_score(episodes(make_user(r.train_customer), greedy=True), val_tasks)
            selector = CheckpointSelector(scorer, run_dir, every=r.validate_every, last_step=r.grpo.steps)
        self.report.stage(f"GRPO {row} (from {init}, {user_spec} customers)", r.grpo.steps)
        self.report.advance(trainer.step)
        if selector is not None:  # the starting model, or a resumed checkpoint whose score was not recorded
            selector.observe(model, tok, trainer.step, base_manifest)

        def on_step(m: dict[str, Any]) -> None:
            if selector is not None:
                selector.observe(model, tok, trainer.step, base_manifest)
            self.report.advance(1, reward=m["reward_mean"])

        trainer.run(on_step=on_step)
        training: dict[str, Any] = {"method": "grpo", "user": user.name, "config": config.model_dump(),
                                    "tasks": len(tasks), "run": str(run_dir), "steps": trainer.step}
        if selector is not None:
            best = selector.restore_best(model)
            assert best is not None
            training["selection"] = {"step": best["step"], "validation_tasks": len(val_tasks or ()),
                                     "every": r.validate_every,
                                     "scores": {str(x["step"]): x["reward"] for x in selector.records()}}
        return save_model_folder(model, tok, folder, {**base_manifest, "training": training})

    def guides(self, tok: Any, user: UserSimulator, tasks: list[Task]) -> dict[str, Trace]:
        """Per task id, the trace of a conversation in which the cold-start teacher solved the task
        with `user` (GRPO's `guide_failed_groups`); tasks the teacher did not solve have none. Played
        once per customer and kept in `guides/<customer>.jsonl`: every seed's run reads the same."""
        from rl.coldstart.data import write_jsonl
        from rl.coldstart.sft import build_traces, read_records

        path = self.out / "guides" / f"{user.name}.jsonl"
        if path.exists():
            kept = read_records(path)
        else:
            _, kept, _ = self._teacher_plays(tasks, user)
            # two workers may play them at once: each writes its own file and renames it into place
            write_jsonl(kept, path.with_name(f"{path.stem}.{os.getpid()}.jsonl")).replace(path)
        out: dict[str, Trace] = {}
        for record in kept:
            traces, _ = build_traces(tok, [self.view.record(record)], self.recipe.max_context)
            if traces:
                out[record["meta"]["task_id"]] = traces[0]
        log.info("grpo.guides", customer=user.name, tasks=len(tasks), guides=len(out))
        return out

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, model_name: str, tasks: list[Task]) -> dict[str, Any]:
        """Model `model_name` played on `tasks` with every evaluation customer (see the module
        docstring); `DIR/eval/<model>/result.json` holds each customer's figures (`evaluation_result`).
        A customer already evaluated (its `result.json`) is not played again."""
        folder = self.out / "eval" / model_name
        marker = result_marker(self.out, f"eval_{model_name}")
        if stage_done(self.out, f"eval_{model_name}", self.customers):
            return json.loads(marker.read_text())
        if self._same_as_base(model_name):
            return self._reuse_base_evaluation(model_name)
        from rl.models.tiny import load_model_folder
        from rl.policies.local import LocalAgentPolicy, LocalPolicy

        r = self.recipe
        self.env.release_pool()
        model, tok, _ = load_model_folder(self.model_dir(model_name))
        model.eval()
        results = {}
        for spec in self.customers:
            path = folder / customer_folder(spec) / "result.json"
            if path.exists():
                results[spec] = json.loads(path.read_text())
                continue
            summaries = {}
            for mode, trials in (("greedy", 1), ("sampled", r.eval_trials - 1)):
                if trials < 1:
                    continue
                engine = LocalPolicy(model, tok, greedy=mode == "greedy", max_new_tokens=r.max_new_tokens,
                                     max_context=r.max_context, view=self.view, max_batch=64, lockstep=True)
                summaries[mode] = self._play(LocalAgentPolicy(engine, model_name=model_name), spec, tasks, trials,
                                             folder / customer_folder(spec) / mode, seed=0 if mode == "greedy" else 1)
            results[spec] = evaluation_result(spec, summaries["greedy"], summaries.get("sampled"))
            path.write_text(json.dumps(results[spec], indent=1))
        out = {"model": model_name, "customers": results}
        marker.write_text(json.dumps(out, indent=1))
        return out

    def _same_as_base(self, model_name: str) -> bool:
        """Whether `model_name` has the base model's very weights (a GRPO run from the random base
        that never got a reward takes no step) and the base's evaluation is done: playing it again
        would repeat that evaluation, decoding and customer seeds alike."""
        return (model_name != "base" and stage_done(self.out, "eval_base", self.customers)
                and weights_digest(self.model_dir(model_name)) == weights_digest(self.model_dir("base")))

    def _reuse_base_evaluation(self, model_name: str) -> dict[str, Any]:
        """The base's evaluation (its figures and episodes) as `model_name`'s, marked `same_weights_as`."""
        import shutil

        folder = self.out / "eval" / model_name
        tmp = folder.with_name(folder.name + ".tmp")  # the marker appears only with the whole copy
        for old in (tmp, folder):
            if old.exists():
                shutil.rmtree(old)
        shutil.copytree(self.out / "eval" / "base", tmp)
        out = {**json.loads((tmp / "result.json").read_text()), "model": model_name, "same_weights_as": "base"}
        (tmp / "result.json").write_text(json.dumps(out, indent=1))
        tmp.rename(folder)
        self.report.stage(f"evaluate {model_name}: the base's weights, its evaluation reused", None)
        return out

    def _play(self, policy: Any, spec: str, tasks: list[Task], trials: int, folder: Path,
              seed: int) -> dict[str, Any]:
        from rl.env.episode import EpisodeLimits
        from rl.eval.harness import evaluate
        from rl.eval.summary import task_success
        from rl.simulator.base import make_user

        r = self.recipe
        what = "greedy" if trials == 1 and seed == 0 else f"{trials} sampled"
        self.report.stage(f"evaluate {policy.name} ({spec} customer, {what})", len(tasks) * trials)
        result = self.env.run(evaluate(
            tasks, policy, make_user(spec), trials=trials, concurrency=r.eval_concurrency, seed=seed,
            server_url=self.env.server_url, out_dir=folder, limits=EpisodeLimits(max_turns=r.max_turns),
            snapshots={r.store: self.env.snapshot},
            on_episode=lambda _t: self.report.advance(1), max_sandboxes=self.env.max_sandboxes))
        return {**result.summary, "task_success": task_success(tasks, result.trajectories)}


def weights_digest(folder: Path) -> str:
    """A digest of a model folder's weight files (`*.safetensors`): equal digests, equal weights."""
    h = hashlib.sha256()
    for path in sorted(folder.glob("*.safetensors")):
        h.update(path.name.encode())
        with path.open("rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
    return h.hexdigest()


def evaluation_result(customer: str, greedy: dict[str, Any], sampled: dict[str, Any] | None) -> dict[str, Any]:
    """One model's figures with one customer, from its greedy and sampled evaluation summaries
    (rl/eval/summary.py, each with `task_success`): the greedy trial's pass^1 (with its interval),
    TCR, per-tag figures and per-task success (`by_task`: 1, 0, or None when excluded), and the
    sampled trials' pass^k with intervals (None with a single trial)."""
    ci = greedy["pass_hat_k_ci95"].get("1")
    return {"customer": customer, **row_result(greedy), "pass1_ci95": ci,
            "by_task": greedy["task_success"],
            "sampled": None if sampled is None else {
                "trials": sampled["trials"], "pass_hat_k": sampled["pass_hat_k"],
                "pass_hat_k_ci95": sampled["pass_hat_k_ci95"], "tcr": sampled.get("tcr"),
                "excluded": sum(sampled.get("excluded", {}).values())}}
