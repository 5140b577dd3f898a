"""Writes a real FSDP checkpoint in verl's layout, as verl's FSDP checkpoint manager does: two CPU
ranks (gloo) shard a model folder with FSDP2 and each saves its state dict of DTensor shards as
`model_world_size_2_rank_R.pt`, next to `fsdp_config.json` and the `huggingface/` config.
Run as `python -m tests.rl.verl.fsdp_checkpoint MODEL_DIR ACTOR_DIR`."""

from __future__ import annotations

import json
import os
import shutil
import sys

import torch
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank: int, world: int, model_dir: str, actor_dir: str, port: int) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("fsdp",))
    for layer in model.model.layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    torch.save(model.state_dict(), os.path.join(actor_dir, f"model_world_size_{world}_rank_{rank}.pt"))
    dist.barrier()
    dist.destroy_process_group()


def main(model_dir: str, actor_dir: str, port: int) -> None:
    os.makedirs(os.path.join(actor_dir, "huggingface"), exist_ok=True)
    for f in os.listdir(model_dir):
        if f.endswith(".json") and f != "manifest.json":
            shutil.copy(os.path.join(model_dir, f), os.path.join(actor_dir, "huggingface", f))
    with open(os.path.join(actor_dir, "fsdp_config.json"), "w") as fh:
        json.dump({"world_size": 2}, fh)
    mp.spawn(worker, args=(2, model_dir, actor_dir, port), nprocs=2)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 29561)
