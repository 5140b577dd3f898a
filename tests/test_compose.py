"""docker-compose.yml, checked without a Docker daemon: every muarl service runs a command the
real `muarl` CLI accepts (subcommands and options parsed by its click tree), vLLM runs under the
`gpu` profile with the launch flags our vLLM command builder prints, the long-running services
have healthchecks, volumes are named and declared, and `.env.example` documents every setting
and every variable the compose file reads."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml
from typer.core import TyperGroup

from backend.config import Settings
from backend.db.engine import make_engine
from backend.serving.registry import ModelRegistry, NewVersion

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
MUARL_SERVICES = ["store-init", "api", "worker", "beat", "model-server"]
_VAR = re.compile(r"\$\{([A-Z0-9_]+)(?::?-([^}]*))?\}")


def _muarl_cli() -> TyperGroup:
    from backend import cli

    cli._load_backend_commands()
    cli._load_plugins()
    command = typer.main.get_command(cli.app)
    assert isinstance(command, TyperGroup)
    return command


def _pending(ctx: Any) -> list[str]:
    """The arguments a group leaves for its subcommand (click renamed `protected_args`)."""
    protected = getattr(ctx, "protected_args", None)
    if protected is None:
        protected = getattr(ctx, "_protected_args", [])
    return [*protected, *ctx.args]


def _parse(group: TyperGroup, args: list[str]) -> list[str]:
    """Resolve `args` through the CLI as `muarl` would, without running anything; returns the
    command path. Unknown commands, options or bad values raise typer's (click's) usage errors."""
    path: list[str] = []
    command: Any = group
    ctx = group.make_context("muarl", list(args), resilient_parsing=False)
    rest = _pending(ctx)
    while isinstance(command, TyperGroup):
        if not rest:
            raise typer.BadParameter(f"`muarl {' '.join(path)}` needs a subcommand")
        name, sub, rest = command.resolve_command(ctx, rest)
        assert sub is not None and name is not None
        path.append(name)
        command = sub
        ctx = command.make_context(name, list(rest), parent=ctx)
        rest = _pending(ctx) if isinstance(command, TyperGroup) else []
    return path


def _expand(value: str) -> str:
    return _VAR.sub(lambda m: m.group(2) or "", value)


@pytest.mark.parametrize("name", MUARL_SERVICES)
def test_every_muarl_service_runs_a_real_muarl_command(name: str) -> None:
    service = SERVICES[name]
    argv = [_expand(a) for a in service["command"]]
    assert argv[0] == "muarl", argv
    assert "entrypoint" not in service
    path = _parse(_muarl_cli(), argv[1:])
    assert path == {"store-init": ["db", "prepare"], "api": ["serve"], "worker": ["worker"], "beat": ["beat"],
                    "model-server": ["model-server"]}[name]


def test_a_wrong_command_would_be_caught() -> None:
    cli = _muarl_cli()
    with pytest.raises(typer.TyperException):
        _parse(cli, ["serve", "--no-such-option"])
    with pytest.raises(typer.TyperException):
        _parse(cli, ["no-such-command"])
    with pytest.raises(typer.TyperException):
        _parse(cli, ["db"])


async def test_vllm_runs_what_muarl_serving_vllm_command_prints(empty_db: str, tmp_path: Path) -> None:
    vllm = SERVICES["vllm"]
    assert vllm["profiles"] == ["gpu"] and vllm["image"].startswith("vllm/vllm-openai:")
    assert all("profiles" not in s for n, s in SERVICES.items() if n != "vllm")
    argv = [_expand(a) for a in [*vllm["entrypoint"], *vllm["command"]]]
    flags = {a: argv[i + 1] for i, a in enumerate(argv[:-1]) if a.startswith("--") and not argv[i + 1].startswith("--")}
    folder = tmp_path / "base"  # a full model folder whose tokenizer has its chat template
    folder.mkdir()
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ messages }}"}))
    engine = make_engine(empty_db, null_pool=True)
    try:
        version = await ModelRegistry(engine).register(
            NewVersion(name="base", artifact_uri=str(folder), engine="vllm",
                       served_name=flags["--served-model-name"]), actor="test")
    finally:
        await engine.dispose()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MUARL_")} | {
        "DATABASE_URL": empty_db, "PYTHONPATH": str(ROOT)}
    printed = subprocess.run(
        [sys.executable, "-m", "backend.cli", "serving", "vllm-command", "--version", version.id, "--python",
         "python3", "--host", flags["--host"], "--port", flags["--port"], "--max-loras", flags["--max-loras"],
         "--json"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0, printed.stderr
    command = json.loads(printed.stdout)
    expected = [str(folder) if a == argv[argv.index("--model") + 1] else a for a in argv]
    assert command["argv"] == expected
    assert command["env"].items() <= vllm["environment"].items()
    assert flags["--tool-call-parser"] == "hermes" and {"--enable-auto-tool-choice", "--enable-lora"} <= set(argv)


def test_healthchecks_dependencies_and_named_volumes() -> None:
    for name in ("postgres", "redis", "api", "worker", "model-server", "vllm"):
        assert SERVICES[name]["healthcheck"]["test"], name
    declared = set(COMPOSE["volumes"])
    assert {"store", "artifacts"} <= declared
    for name, service in SERVICES.items():
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            assert source in declared, f"{name} mounts {source}, which is not a named volume"
        for dep in service.get("depends_on", {}):
            assert dep in SERVICES, f"{name} depends on unknown service {dep}"
    assert "store:/var/lib/postgresql" in SERVICES["postgres"]["volumes"]
    for name in ("api", "worker", "beat", "model-server"):
        assert "artifacts:/var/lib/muarl" in SERVICES[name]["volumes"]
        env = SERVICES[name]["environment"]
        assert env["DATABASE_URL"].startswith("postgresql://") and env["REDIS_URL"] == "redis://redis:6379/0"


def test_env_example_documents_every_setting_and_compose_variable() -> None:
    text = (ROOT / ".env.example").read_text()
    documented = set(re.findall(r"^#?\s?([A-Z][A-Z0-9_]+)=", text, flags=re.M))
    settings = {f.alias for f in Settings.model_fields.values() if f.alias}
    assert settings - documented == set(), "settings missing from .env.example"
    raw = (ROOT / "docker-compose.yml").read_text()
    used = {m.group(1) for m in _VAR.finditer(raw)}
    assert used - documented == set(), "compose variables missing from .env.example"
    assert documented - settings - used == set(), ".env.example names something nothing reads"
