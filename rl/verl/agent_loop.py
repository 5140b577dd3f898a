"""Our episode as a verl agent loop: `MuarlAgentLoop`, registered through agent_loops.yaml.

verl (0.9.1) builds one loop object per sample and awaits `run(sampling_params, **row)`, where
`row` is the dataset row (`extra_info` carries our task id and snapshot). The loop plays the task
with OUR episode runner (`rl.env.episode.run_episode`, hence the one agent step
`backend.agent.loop.agent_turn`): a sandbox from the process's pool (given back in every case:
success, error, cancellation), our tools through the one registry as a customer principal, our
simulated customer whenever the agent answers in text, and the episode's stops (30 turns counting
customer turns and tool calls, the customer's stop, a transfer). The model side is verl's
generation server wrapped as a `ChatModel` (rl/verl/model.py), which keeps the token trace by
appending: the response mask is 1 exactly on the tokens the model generated and 0 on customer
messages, tool results and template glue.

The output sets `reward_score` from our reward (so verl's reward manager is skipped) and puts the
reward breakdown, the episode's end, its turns and the failure flag in `extra_fields`. A rollout
that failed outside the agent (sandbox, simulator, generation server: the episode's `excluded`
cause) gets reward 0 and an all-zero response mask, so none of its tokens carries a gradient;
`extra_fields["muarl_excluded"]` names the cause and `muarl_excluded_flag` (0/1) lets the trainer
count them.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from typing import Any

from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput

from rl.env.episode import EpisodeLimits, Trajectory, run_episode
from rl.verl.agent_loop_name import AGENT_NAME  # noqa: F401 (the name agent_loops.yaml registers)
from rl.verl.environment import VerlEnvironment, environment
from rl.verl.model import VerlPolicy, VerlServerModel

logger = logging.getLogger(__name__)



class MuarlAgentLoop(AgentLoopBase):
    """Plays one of our episodes per sample. `env` (from agent_loops.yaml) names the environment:
    {name, tasks, user, pool_size, max_turns} (rl/verl/environment.py), and `max_turn_tokens` (default
    1,024) caps one agent turn."""

    def __init__(self, *args: Any, env: dict[str, Any] | None = None, tools: Any = None, **kwargs: Any) -> None:
        del tools  # our tools come from our registry, not verl's tool config
        super().__init__(*args, **kwargs)
        self.env_spec = dict(env or {})
        self.prompt_length = int(self.rollout_config.prompt_length)
        self.response_length = int(self.rollout_config.response_length)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        extra_info = dict(kwargs.get("extra_info") or {})
        env = await environment(self.env_spec)
        task_id = str(extra_info.get("task_id") or "")
        task = env.tasks.get(task_id)
        if task is None:
            raise KeyError(f"task {task_id!r} of this sample is not in the loop's task file")
        # MUA-RL: about 1,024 tokens per agent turn (the context budget bounds it further)
        params = {**sampling_params, "max_tokens": int(self.env_spec.get("max_turn_tokens", 1024))}
        model = VerlServerModel(self.server_manager, self.tokenizer, params,
                                max_tokens=self.prompt_length + self.response_length,
                                request_id=uuid.uuid4().hex, name=str(self.env_spec.get("model_name", "verl")))
        seed = int(extra_info.get("seed", kwargs.get("index", 0)) or 0)
        traj = await play(env, task, model, seed=seed)
        return self.output(model, traj)

    def output(self, model: VerlServerModel, traj: Trajectory) -> AgentLoopOutput:
        trace = model.trace
        split = model.prompt_len if model.prompt_len is not None else len(trace.input_ids)
        if split > self.prompt_length:  # verl would cut the system prompt: refuse (raise data.max_prompt_length)
            raise ValueError(f"the prompt has {split} tokens, more than data.max_prompt_length={self.prompt_length}")
        prompt_ids = trace.input_ids[:split]
        response_ids = trace.input_ids[split:][: self.response_length]
        mask = trace.loss_mask[split:][: self.response_length]
        logprobs = trace.logprobs[split:][: self.response_length]
        excluded = traj.excluded is not None
        if excluded:
            mask = [0] * len(mask)  # no gradient from a rollout that failed outside the agent
        if not response_ids:  # verl puts the reward on the last response token: keep one (masked)
            response_ids, mask, logprobs = [self.tokenizer.eos_token_id or 0], [0], [0.0]
        reward = 0.0 if excluded or traj.reward is None else float(traj.reward)
        extra = {
            "muarl_task_id": traj.task_id,
            "muarl_reward": reward,
            "muarl_breakdown": traj.breakdown or {},
            "muarl_excluded": traj.excluded or "",
            "muarl_excluded_flag": int(excluded),
            "muarl_error": traj.error or "",
            "muarl_ended_by": traj.ended_by,
            "muarl_turns": traj.turns,
            "muarl_messages": traj.messages,
        }
        return AgentLoopOutput(prompt_ids=prompt_ids, response_ids=response_ids, response_mask=mask,
                               response_logprobs=logprobs, reward_score=reward, num_turns=traj.turns,
                               metrics=AgentLoopMetrics(), extra_fields=extra)


async def play(env: VerlEnvironment, task: Any, model: VerlServerModel, *, seed: int = 0,
               limits: EpisodeLimits | None = None) -> Trajectory:
    """Play `task` with `model` on a sandbox of `env`'s pool; the sandbox goes back in every case."""
    sandbox = await env.pool.acquire()
    try:
        return await run_episode(task, VerlPolicy(model), env.user, sandbox, cache=env.cache, seed=seed,
                                 limits=limits or env.limits)
    finally:
        # shielded: a cancelled rollout still hands its sandbox back before the cancellation goes on
        await asyncio.shield(env.pool.release(sandbox))
