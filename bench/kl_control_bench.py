"""KL settings of the GRPO trainer on a toy task, side by side: the KL to the reference per step
under a fixed coefficient (the recipe's 0.001 and larger ones) and under the adaptive coefficient
(`kl_target`), at a learning rate that makes the policy drift fast. The task: a micro model answers
two customer turns; the reward is 1 when both answers start with a token from the lower half of the
vocabulary (a toy: it shows whether a setting bounds KL and what reward it leaves, not which value
suits the store's tasks).

    PYTHONPATH=. nice -n 19 python bench/kl_control_bench.py [--steps 16] [--lr 1e-2]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile

import torch

from rl.chat.format import render_conversation
from rl.grpo.trainer import GRPOConfig, GRPOTrainer
from rl.models.tiny import TinyQwen3Recipe, build_tiny_model
from rl.models.tokenizer import train_bpe
from rl.policies.local import LocalPolicy

MICRO = TinyQwen3Recipe(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
                        head_dim=32, intermediate_size=128)
SETTINGS = {"coef 0.001": {"kl_coef": 0.001}, "coef 0.1": {"kl_coef": 0.1}, "coef 1.0": {"kl_coef": 1.0},
            "target 0.1": {"kl_coef": 0.1, "kl_target": 0.1}}


def toy_rollout(tok):
    half = len(tok) // 2

    def rollout(model, tasks, group_size, step):
        policy = LocalPolicy(model, tok, max_new_tokens=1, seed=step)

        async def episode(task, k):
            eid = f"{task}-{k}"
            msgs = [{"role": "system", "content": "toy"}, {"role": "user", "content": f"hello {task}"}]
            for _ in range(2):
                msgs.append(await policy.act(eid, msgs))
                msgs.append({"role": "user", "content": "again"})
            trace = policy.pop_trace(eid)
            starts = [i for i in range(1, len(trace.loss_mask)) if trace.loss_mask[i] and not trace.loss_mask[i - 1]]
            trace.reward = float(all(trace.input_ids[i] < half for i in starts))
            trace.task_id = trace.group = str(task)
            trace.info = {"turns": 2, "tool_calls": {}}
            return trace

        async def main():
            return await asyncio.gather(*(episode(t, k) for t in tasks for k in range(group_size)))

        return list(asyncio.run(main()))

    return rollout


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--lr", type=float, default=1e-2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(2)
    texts = [render_conversation([{"role": "user", "content": f"Please look up order #W{1000 + i}."},
                                  {"role": "assistant", "content": "It is pending. Anything else?"}])
             for i in range(150)]
    tok = train_bpe(texts, vocab_size=500)
    results = {}
    for name, kl in SETTINGS.items():
        torch.manual_seed(0)
        model = build_tiny_model(tok, MICRO)
        cfg = GRPOConfig(steps=a.steps, tasks_per_step=4, group_size=8, lr=a.lr, save_every=10_000, **kl)
        history = GRPOTrainer(model, tok, list(range(16)), toy_rollout(tok), cfg, tempfile.mkdtemp()).run()
        r = results[name] = {"kl": [m["kl"] for m in history], "kl_coef": [m["kl_coef"] for m in history],
                             "reward": [m["reward_mean"] for m in history]}
        if a.json:
            continue
        half = len(r["kl"]) // 2
        print(f"{name:>12}: KL max {max(r['kl']):.3f}, last {r['kl'][-1]:.3f}; reward first {r['reward'][0]:.2f} "
              f"last-half mean {sum(r['reward'][half:]) / (len(r['reward']) - half):.2f}; "
              f"coef last {r['kl_coef'][-1]:.3g}")
        print("              KL per step " + " ".join(f"{x:.3f}" for x in r["kl"]), flush=True)
    if a.json:
        print(json.dumps(results))


if __name__ == "__main__":
    main()
