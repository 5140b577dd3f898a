"""GRPO rollouts through the real episode runner: G episodes per task, each on its own sandbox with
the simulated customer, the agent being the local model (sampling at `temperature`, 1.0 unless the
GRPO config says otherwise: the trainer takes its log-probs at the same one), all agent
turns of all running episodes batched together, by default in lockstep (episodes admitted in task
order, each batch waiting for every running episode's turn: rl/policies/admission.py), so a step
plays the same rollouts whatever the timing of sandboxes and the database. Every episode's
token-exact `Trace` comes back with
its reward (0/1 from the environment), `excluded` (infrastructure or simulator failure: out of the
group statistics), turns and calls per tool.

The runner and the sandbox pool are async; the trainer is not. `EpisodeRollout` keeps its own event
loop in a background thread and submits each step's episodes to it.
"""

from __future__ import annotations

import asyncio
import threading
from collections import Counter
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, TypeVar

from transformers import PreTrainedModel, PreTrainedTokenizerBase

from rl.grpo.batches import task_kind
from rl.grpo.trace import Trace
from rl.policies.admission import Admission, episode_key
from rl.policies.local import LocalAgentPolicy, LocalPolicy

if TYPE_CHECKING:
    from rl.chat.views import ChatView
    from rl.env import GoldStateCache, SandboxPool
    from rl.env.episode import EpisodeLimits, Trajectory
    from rl.simulator.base import UserSimulator
    from rl.tasks.schema import Task

T = TypeVar("T")


def task_category(task: Task) -> str | None:
    """The generator's category of a task (its `category:NAME` tag), or None."""
    return task_kind(task)


class BackgroundLoop:
    """An asyncio loop in a daemon thread; `run(coro)` waits for the result from sync code."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="rollout-loop")
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], cleanup_timeout: float = 120.0) -> T:
        """Run `coro` on the loop and wait for its result. If the wait is interrupted (Ctrl-C, or
        SIGTERM turned into SystemExit), the coroutine is cancelled and given `cleanup_timeout`
        seconds to run its `finally` blocks (closing sandbox pools drops their databases) before the
        interruption goes on; otherwise a killed run would leave its sandboxes on the server."""
        finished = threading.Event()

        async def tracked() -> T:
            try:
                return await coro
            finally:
                finished.set()

        fut = asyncio.run_coroutine_threadsafe(tracked(), self.loop)
        try:
            return fut.result()
        except BaseException:
            if not finished.is_set():
                fut.cancel()
                finished.wait(cleanup_timeout)
            raise

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=5)


class EpisodeRollout:
    """`RolloutFn` for `GRPOTrainer` backed by `rl.env.episode.run_episode`.

    `pool` and `cache` live on `loop` (rl/experiment/environment.py `ExperimentEnv`)."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, loop: BackgroundLoop, pool: SandboxPool,
                 cache: GoldStateCache | None, user: UserSimulator, *, max_new_tokens: int = 128,
                 max_context: int = 4096, tools_transform: Callable | None = None, greedy: bool = False,
                 limits: EpisodeLimits | None = None, concurrency: int = 64, view: ChatView | None = None,
                 temperature: float = 1.0, seed: int = 0, episode_streams: bool = True,
                 lockstep: bool = True) -> None:
        self.tok, self.loop, self.pool, self.cache, self.user = tokenizer, loop, pool, cache, user
        self.temperature = temperature
        self.max_new_tokens, self.max_context = max_new_tokens, max_context
        self.tools_transform, self.greedy, self.limits, self.concurrency = tools_transform, greedy, limits, concurrency
        self.view = view  # rl.chat.views.ChatView: tool list and tool results as the model sees them
        self.last_generation: dict[str, float] = {}
        self.last_rounds: list[tuple[str, ...]] = []  # with lockstep: each batch's episode keys, in order
        # the GRPO run's seed: it and the step seed every episode's sampling stream, so two runs with
        # other seeds never sample the same rollouts of a task they both draw at a step
        self.seed = seed
        self.episode_streams = episode_streams  # rl/policies/local.py: each episode its own sampling stream
        # batches of every running episode's turn, episodes admitted in task order: the episodes, not
        # their timing, decide each batch and so the float rounding of its logits (rl/policies/local.py)
        self.lockstep = lockstep

    def __call__(self, model: PreTrainedModel, tasks: list[Task], group_size: int, step: int) -> list[Trace]:
        trajectories, traces = self.play(model, tasks, group_size, seed=step * 1000)
        return traces

    def play(self, model: PreTrainedModel, tasks: list[Task], trials: int, seed: int = 0) -> tuple[
            list[Trajectory], list[Trace]]:
        engine = LocalPolicy(model, self.tok, greedy=self.greedy, temperature=self.temperature,
                             max_new_tokens=self.max_new_tokens, max_context=self.max_context,
                             seed=self.seed * 1_000_003 + seed, view=self.view,
                             episode_streams=self.episode_streams, lockstep=self.lockstep)
        policy = LocalAgentPolicy(engine, tools_transform=self.tools_transform)
        trajectories = self.loop.run(self._play(policy, tasks, trials, seed))
        st = engine.stats
        self.last_rounds = engine.rounds
        self.last_generation = {"new_tokens": st.new_tokens, "seconds": st.seconds, "calls": st.calls,
                                "tokens_per_s": st.tokens_per_second, "prompt_tokens": st.prompt_tokens,
                                "cached_tokens": st.cached_tokens}
        traces = []
        for task, k, traj in trajectories:
            trace = traj.traces[-1] if traj.traces else Trace()
            trace.task_id, trace.group = task.id, task.id
            trace.excluded = traj.excluded is not None
            trace.reward = float(traj.reward or 0.0)
            trace.info = {"turns": traj.turns, "tool_calls": dict(Counter(c.name for c in traj.tool_calls)),
                          "ended_by": traj.ended_by, "excluded": traj.excluded, "tcr": traj.tcr, "trial": k,
                          "category": task_category(task)}
            traces.append(trace)
        return [t for _, _, t in trajectories], traces

    async def _play(self, policy: LocalAgentPolicy, tasks: list[Task], trials: int,
                    seed: int) -> list[tuple[Task, int, Trajectory]]:
        from rl.env.episode import EpisodeLimits, run_episode
        from rl.env.gold_states import precompute_gold_states

        limits = self.limits or EpisodeLimits()
        # gold states first: an episode scoring a task never waits for a second sandbox while it holds one
        if self.cache is not None:
            await precompute_gold_states(tasks, self.pool, self.cache)
        order = [(t, k) for t in tasks for k in range(trials)]
        admission = Admission.for_policy(policy, [episode_key(t, seed + k) for t, k in order], self.concurrency,
                                         [self.pool])

        async def one(i: int, task: Task, k: int) -> tuple[Task, int, Trajectory]:
            async with admission.slot(i), self.pool.sandbox() as sandbox:
                traj = await run_episode(task, policy, self.user, sandbox, cache=self.cache, trial=k,
                                         seed=seed + k, limits=limits)
            return task, k, traj

        return list(await asyncio.gather(*(one(i, t, k) for i, (t, k) in enumerate(order))))
