"""The evaluation harness: K trials of every task, many episodes at once, scored and summarised.

`await evaluate(tasks, policy, user, trials=K, concurrency=N, out_dir=DIR)` builds one snapshot per
store a task file refers to (or uses snapshots the caller passes in), replays every gold plan once
on one sandbox (`rl.eval.gold_states`), runs every (task, trial) as an episode on a sandbox from a
pool, at most N at a time, appends each trajectory to `DIR/episodes.jsonl` as it finishes, and
writes `DIR/summary.json` and `DIR/summary.md`. It returns the trajectories and the summary; the
trainer and the promotion gates call it directly. Databases it creates are dropped on the way out,
errors and cancellation included.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import structlog

from rl.env import GoldStateCache, SandboxPool, Snapshot
from rl.env.episode import EpisodeLimits, Trajectory, run_episode
from rl.env.gold_states import precompute_gold_states
from rl.env.pools import StorePools
from rl.eval.summary import summarize, to_markdown
from rl.policies.admission import Admission, episode_key
from rl.policies.base import AgentPolicy
from rl.simulator.base import UserSimulator
from rl.tasks.schema import Task

log = structlog.get_logger(__name__)


@dataclass
class EvalResult:
    trajectories: list[Trajectory]
    summary: dict[str, Any]


def episode_seed(seed: int, task_id: str, trial: int) -> int:
    return int(hashlib.sha256(f"{seed}:{task_id}:{trial}".encode()).hexdigest()[:8], 16)


async def evaluate(tasks: list[Task], policy: AgentPolicy, user: UserSimulator, *, trials: int = 1,
                   concurrency: int = 8, server_url: str | None = None, out_dir: Path | None = None,
                   seed: int = 0, limits: EpisodeLimits = EpisodeLimits(),
                   data_dir: Path | None = None, snapshots: dict[str, Snapshot] | None = None,
                   on_episode: Callable[[Trajectory], None] | None = None,
                   max_sandboxes: int | None = None) -> EvalResult:
    """Run and score `trials` episodes of every task (see the module docstring). `max_sandboxes`
    caps each snapshot's pool (one server connection per sandbox; None: what the server allows)."""
    if trials < 1 or concurrency < 1:
        raise ValueError("trials and concurrency must be at least 1")
    if not tasks:
        raise ValueError("no tasks to evaluate")
    start = time.perf_counter()
    out_file = None
    if out_dir is not None:
        out_dir = Path(out_dir)
        out_dir.mkdir(parents=True, exist_ok=True)
        out_file = (out_dir / "episodes.jsonl").open("w")
    stores = StorePools(server_url, size=min(concurrency + 1, 32), max_sandboxes=max_sandboxes,
                        snapshots=snapshots, data_dir=data_dir)
    pools: dict[str, SandboxPool] = {}
    cache = GoldStateCache()
    trajs: list[Trajectory] = []
    try:
        for ref in sorted({t.snapshot for t in tasks}):
            pools[ref] = await stores.pool(ref)
            await precompute_gold_states([t for t in tasks if t.snapshot == ref], pools[ref], cache)
        order = [(task, trial) for trial in range(trials) for task in tasks]
        # episodes start in task order; a lockstep local policy then batches the same turns together
        # in every run (rl/policies/admission.py), within what the pools give at once
        admission = Admission.for_policy(policy, [episode_key(t, episode_seed(seed, t.id, k)) for t, k in order],
                                         concurrency, list(pools.values()))

        async def one(i: int, task: Task, trial: int) -> Trajectory:
            ep_seed = episode_seed(seed, task.id, trial)
            try:
                async with admission.slot(i), pools[task.snapshot].sandbox() as sb:
                    traj = await run_episode(task, policy, user, sb, cache=cache, trial=trial, seed=ep_seed,
                                             limits=limits)
            except Exception as e:  # no sandbox (server full, pool closed): excluded, the run goes on
                log.warning("episode.no_sandbox", task=task.id, error=str(e))
                traj = Trajectory(task_id=task.id, trial=trial, seed=ep_seed, tags=task.tags, policy=policy.name,
                                  policy_model=policy.model, user=user.name, user_model=user.model,
                                  user_prompt_version=user.prompt_version, ended_by="error",
                                  excluded="sandbox_error", error=f"{type(e).__name__}: {e}")
            trajs.append(traj)
            if out_file is not None:
                out_file.write(traj.model_dump_json() + "\n")
                out_file.flush()
            if on_episode is not None:
                on_episode(traj)
            return traj

        await asyncio.gather(*(one(i, task, trial) for i, (task, trial) in enumerate(order)))
    finally:
        if out_file is not None:
            out_file.close()
        await stores.close()
    order = {t.id: i for i, t in enumerate(tasks)}
    trajs.sort(key=lambda t: (order[t.task_id], t.trial))
    meta = {"policy": policy.name, "policy_model": policy.model, "user": user.name, "user_model": user.model,
            "user_prompt_version": user.prompt_version, "seed": seed, "max_turns": limits.max_turns,
            "wall_s": round(time.perf_counter() - start, 3)}
    summary = summarize(tasks, trajs, trials, meta=meta, seed=seed)
    if out_dir is not None:
        (out_dir / "summary.json").write_text(json.dumps(summary, indent=1))
        (out_dir / "summary.md").write_text(to_markdown(summary))
    return EvalResult(trajs, summary)
