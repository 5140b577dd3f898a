"""`muarl coldstart`: cold-start data for SFT, as JSONL records of OpenAI-style messages + tools.

- `generate --tasks FILE --out FILE.jsonl [--agent teacher|oracle|openai:MODEL] [--user scripted|llm:MODEL]
  [--corrections SHARE]`: pipeline (a), real tools on sandboxes; writes every episode to OUT.raw.jsonl
  and the records that pass the quality filter to OUT (reward 1, valid calls, confirmation before
  every write). `--corrections` (teacher only): the share of tasks whose first proposal is a wrong
  one the customer corrects (rl/coldstart/teacher.py).
- `synthesize --domains FILE --out FILE.jsonl --model M --base-url URL`: pipeline (b), tools simulated
  by an LLM from a small synthetic store in its prompt (rl/coldstart/synthetic.py).
Bad input exits with code 2 and writes nothing.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

coldstart_app = typer.Typer(help="Cold-start data for SFT (real tools, or LLM-simulated tools).",
                            no_args_is_help=True)
console = Console(stderr=True)


def register(app: typer.Typer) -> None:
    app.add_typer(coldstart_app, name="coldstart")


def _fail(message: str) -> typer.Exit:
    console.print(f"[red]error:[/red] {message}")
    return typer.Exit(2)


@coldstart_app.command("generate")
def generate(
    tasks_file: Annotated[Path, typer.Option("--tasks", help="task file (muarl tasks generate)")],
    out: Annotated[Path, typer.Option("--out", help="filtered JSONL to write (raw episodes go to OUT.raw.jsonl)")],
    agent: Annotated[str, typer.Option("--agent", help="teacher, oracle or openai:MODEL")] = "teacher",
    user: Annotated[str, typer.Option("--user", help="scripted or llm:MODEL")] = "scripted",
    trials: Annotated[int, typer.Option("--trials", min=1)] = 1,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=256)] = 16,
    corrections: Annotated[float, typer.Option(
        "--corrections", min=0.0, max=1.0,
        help="teacher only: share of tasks played with a wrong first proposal the customer corrects")] = 0.0,
    base_url: Annotated[str | None, typer.Option("--base-url", help="agent's OpenAI-compatible endpoint")] = None,
    judge_model: Annotated[str | None, typer.Option("--judge-model", help="LLM judge in the filter (optional)")] = None,
    judge_base_url: Annotated[str | None, typer.Option("--judge-base-url", help="judge's endpoint")] = None,
    database_url: Annotated[str | None, typer.Option("--database-url", help="Postgres server for sandboxes")] = None,
    data_dir: Annotated[Path | None, typer.Option("--data-dir", help="benchmarks folder")] = None,
) -> None:
    """Pipeline (a): play tasks with real tools on sandboxes; keep the clean successes."""
    from rl.coldstart.data import collect_real_tool_trajectories, filter_records, write_jsonl, write_tool_names
    from rl.coldstart.teacher import TeacherPolicy
    from rl.experiment.environment import ExperimentEnv
    from rl.policies.base import make_policy
    from rl.simulator.base import make_user
    from rl.tasks.schema import TaskFileError, load_tasks
    from rl.tasks.stores import resolve_store

    try:
        tasks = load_tasks(tasks_file)
        refs = {t.snapshot for t in tasks}
        if len(refs) != 1:
            raise ValueError(f"tasks must share one store, found {sorted(refs)}")
        if corrections and agent != "teacher":
            raise ValueError(f"--corrections is for --agent teacher, not {agent!r}")
        sim = make_user(user)
        pol = TeacherPolicy(corrections=corrections, wordings=getattr(sim, "wordings", None)) \
            if agent == "teacher" else make_policy(agent, **({"base_url": base_url} if base_url else {}))
    except (TaskFileError, ValueError) as e:
        raise _fail(str(e)) from None
    ref = refs.pop()
    with ExperimentEnv(database_url, resolve_store(ref, data_dir), ref, min(concurrency, 32)) as env:
        with console.status(f"playing {len(tasks) * trials} episodes"):
            records = env.run(collect_real_tool_trajectories(
                tasks, pol, sim, env.pool, env.cache, trials=trials, concurrency=concurrency,
                source=f"real_tools:{agent}+{user}"))
    if judge_model:
        from backend.agent.policy import STORE_POLICY
        from rl.coldstart.synthetic import judge_records

        judge = _model(judge_model, judge_base_url)
        with console.status("judging"):
            asyncio.run(judge_records(judge, [r for r in records if r["meta"].get("reward") == 1.0],
                                      STORE_POLICY))
    kept, why = filter_records(records, write_tool_names())
    write_jsonl(records, out.with_name(out.stem + ".raw.jsonl"))
    write_jsonl(kept, out)
    console.print(f"{len(kept)}/{len(records)} kept -> {out}; rejected: {json.dumps(dict(why)) if why else 'none'}")




def _model(name: str, base_url: str | None):
    from backend.agent.llm import OpenAICompatibleModel

    model = OpenAICompatibleModel.from_settings(model=name, base_url=base_url)
    if model is None:
        raise _fail(f"no endpoint for {name}: pass a base URL or set MUARL_LLM_BASE_URL")
    return model


@coldstart_app.command("synthesize")
def synthesize_command(
    domain_file: Annotated[Path, typer.Option("--domain", help="domain spec JSON (policy, tools, store, scenarios)")],
    out: Annotated[Path, typer.Option("--out", help="filtered JSONL to write (all conversations: OUT.raw.jsonl)")],
    model: Annotated[str, typer.Option("--model", help="the agent's model")],
    base_url: Annotated[str | None, typer.Option("--base-url", help="endpoint for every role by default")] = None,
    customer_model: Annotated[str | None, typer.Option("--customer-model", help="default: --model")] = None,
    tool_model: Annotated[str | None, typer.Option("--tool-model", help="tool simulator; default: --model")] = None,
    judge_model: Annotated[str | None, typer.Option("--judge-model", help="judge; default: --model")] = None,
    trials: Annotated[int, typer.Option("--trials", min=1)] = 1,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=256)] = 8,
    max_turns: Annotated[int, typer.Option("--max-turns", min=2)] = 20,
) -> None:
    """Pipeline (b): tools simulated by an LLM from a small synthetic store; judged and filtered."""
    from pydantic import ValidationError

    from rl.coldstart.data import filter_records, write_jsonl
    from rl.coldstart.synthetic import DomainSpec, SimulatedToolConversations, synthesize

    try:
        spec = DomainSpec.model_validate_json(domain_file.read_text())
    except (OSError, ValidationError, ValueError) as e:
        raise _fail(f"{domain_file}: not a domain spec: {e}") from None
    convs = SimulatedToolConversations(_model(model, base_url), _model(customer_model or model, base_url),
                                       _model(tool_model or model, base_url), _model(judge_model or model, base_url),
                                       max_turns=max_turns)
    with console.status(f"synthesizing {len(spec.scenarios) * trials} conversations"):
        records = asyncio.run(synthesize(spec, convs, trials=trials, concurrency=concurrency))
    kept, why = filter_records(records, spec.tool_names("write"))
    write_jsonl(records, out.with_name(out.stem + ".raw.jsonl"))
    write_jsonl(kept, out)
    console.print(f"{len(kept)}/{len(records)} kept -> {out}; rejected: {json.dumps(dict(why)) if why else 'none'}")
