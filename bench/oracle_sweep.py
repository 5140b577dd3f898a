"""The oracle with scripted customers over many generated tasks: pass rate per (store, seed), and
what the sweep costs.

A correct agent must pass every task: anything below 1.000 is a simulator or task defect (the
failed task ids are printed, with `excluded` causes such as `simulator_contradiction`). Also
evaluates the tau1 / tau2 retail imports that a customer conversation can carry out, and names the
ones left out with the reason (rl.tasks.importers.split_conversational). Figures: wall time, and
the CPU seconds of this process and of the PostgreSQL server (when it is a local embedded one).
Usage: .venv/bin/python bench/oracle_sweep.py [--seeds 1 2 3 4 5] [--n 500] [--store synthetic]
       [--tau] [--concurrency 8] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import time
from collections import defaultdict
from pathlib import Path

from backend.config import get_settings
from backend.db.engine import database_url, normalize_url
from rl.eval.harness import evaluate
from rl.policies.base import make_policy
from rl.simulator.scripted import ScriptedCustomer
from rl.tasks.generator import generate_tasks
from rl.tasks.importers import import_tau1, import_tau2, split_conversational
from rl.tasks.schema import Task
from rl.tasks.stores import TAU_RETAIL, resolve_store, synthetic_ref


def server_cpu_s() -> float | None:
    """CPU seconds of the embedded server under var/ and its finished children, if readable."""
    pid_file = Path(get_settings().var_dir) / "pgdata" / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split()[0])
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return sum(int(x) for x in fields[11:15]) / tick  # utime, stime, cutime, cstime
    except (OSError, ValueError, IndexError):
        return None


def own_cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def main(args: argparse.Namespace) -> dict:
    server = normalize_url(args.database_url) if args.database_url else database_url()
    batches: dict[str, list[Task]] = {}
    ref = TAU_RETAIL if args.store == "tau-retail" else synthetic_ref(0, 200)
    data = resolve_store(ref)
    for seed in args.seeds:
        batches[f"{args.store} seed {seed}"] = generate_tasks(data, args.n, seed, snapshot=ref)
    left_out: dict[str, str] = {}
    if args.tau:
        tau = resolve_store(TAU_RETAIL)
        bench = Path(get_settings().benchmarks_dir)
        imports = {f"tau1 {s}": import_tau1(bench, tau, s) for s in ("train", "test", "dev")}
        imports["tau2 all"] = import_tau2(bench, tau)
        for name, tasks in imports.items():
            kept, out = split_conversational(tasks, tau)
            batches[name] = kept
            left_out.update(out)
    batch_of = {t.id: name for name, tasks in batches.items() for t in tasks}
    everything = [t for tasks in batches.values() for t in tasks]
    cpu0, pg0, t0 = own_cpu_s(), server_cpu_s(), time.perf_counter()
    result = await evaluate(everything, make_policy("oracle"), ScriptedCustomer(), concurrency=args.concurrency,
                            server_url=server)
    wall = time.perf_counter() - t0
    pg1 = server_cpu_s()
    per: dict[str, dict] = defaultdict(lambda: {"tasks": 0, "passed": 0, "excluded": {}, "failed": []})
    for traj in result.trajectories:
        row = per[batch_of[traj.task_id]]
        row["tasks"] += 1
        row["passed"] += traj.success
        if traj.excluded:
            row["excluded"][traj.excluded] = row["excluded"].get(traj.excluded, 0) + 1
        if not traj.success:
            row["failed"].append(traj.task_id)
    for row in per.values():
        row["pass_rate"] = round(row["passed"] / row["tasks"], 4)
    return {"batches": dict(per), "left_out": left_out, "episodes": len(everything), "wall_s": round(wall, 1),
            "cpu_s_self": round(own_cpu_s() - cpu0, 1),
            "cpu_s_server": round(pg1 - pg0, 1) if pg0 is not None and pg1 is not None else None,
            "simulator_failures": result.summary["simulator_failures"]}


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3, 4, 5])
    p.add_argument("--n", type=int, default=500)
    p.add_argument("--store", choices=["synthetic", "tau-retail"], default="synthetic")
    p.add_argument("--tau", action="store_true", help="also the tau1 / tau2 retail imports")
    p.add_argument("--concurrency", type=int, default=8)
    p.add_argument("--database-url", default=None)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    out = asyncio.run(main(a))
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        for name, row in out["batches"].items():
            print(f"{name:22s} {row['passed']:4d}/{row['tasks']:<4d} pass {row['pass_rate']:.3f}"
                  f"  excluded {row['excluded'] or 'none'}  failed {row['failed'][:5]}")
        for tid, why in out["left_out"].items():
            print(f"left out {tid}: {why}")
        print(f"{out['episodes']} episodes in {out['wall_s']} s; CPU s: this process {out['cpu_s_self']}, "
              f"server {out['cpu_s_server']}; simulator failures {out['simulator_failures']}")
