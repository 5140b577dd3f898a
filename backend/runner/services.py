"""The product's processes, as `muarl run` starts them: the embedded Redis (unless `REDIS_URL`
is set), the API, a Celery worker and beat, the local model server, and, while no model is
champion, a one-shot first cycle. Every child gets the same `DATABASE_URL` and `REDIS_URL`, so
they all talk to the store and broker the supervisor resolved (embedded ones under `var/`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from backend.broker import embedded_redis_command, embedded_redis_running, redis_socket, socket_url
from backend.runner.supervisor import Service

ALL_SERVICES = ("api", "worker", "beat", "model-server")
FIRST_RECIPE = "first-model"


@dataclass
class Plan:
    """What `muarl run` resolved before starting anything."""

    database_url: str
    redis_url: str | None  # None: start the embedded Redis
    var_dir: Path
    host: str = "127.0.0.1"
    port: int = 8000
    model_server_port: int = 8001
    services: tuple[str, ...] = ALL_SERVICES
    first_cycle: bool = False  # no champion yet: start a cycle with the first-model recipe now
    debug: bool = False  # MUARL_LOG_LEVEL=debug: let the libraries' own chatter through


def muarl_argv(*args: str) -> list[str]:
    """`muarl ARGS` with this interpreter (no dependence on PATH or an installed script)."""
    return [sys.executable, "-m", "backend.cli", *args]


def broker_for(plan: Plan) -> str:
    return plan.redis_url or socket_url(redis_socket(plan.var_dir))


def build_services(plan: Plan, extra_env: dict[str, str] | None = None) -> list[Service]:
    """The supervised commands for `plan`, in start order."""
    unknown = set(plan.services) - set(ALL_SERVICES)
    if unknown:
        raise ValueError(f"unknown services {sorted(unknown)}; known: {', '.join(ALL_SERVICES)}")
    env = {"DATABASE_URL": plan.database_url, "REDIS_URL": broker_for(plan), "MUARL_VAR_DIR": str(plan.var_dir),
           "MUARL_MODEL_SERVER_URL": f"http://127.0.0.1:{plan.model_server_port}/v1"} | (extra_env or {})
    if not plan.debug:  # library progress bars and banners are debugging noise in a supervised log
        env |= {"TRANSFORMERS_VERBOSITY": "error", "HF_HUB_DISABLE_PROGRESS_BARS": "1", "TQDM_DISABLE": "1"}
    commands = {
        "api": muarl_argv("serve", "--host", plan.host, "--port", str(plan.port)),
        "worker": muarl_argv("worker"),
        "beat": muarl_argv("beat"),
        "model-server": muarl_argv("model-server", "--host", "127.0.0.1", "--port", str(plan.model_server_port)),
    }
    services: list[Service] = []
    # the embedded Redis, unless one already answers on its socket (a detached one that a
    # standalone `muarl cycle run` started: reused, and left as it is)
    if plan.redis_url is None and not embedded_redis_running(plan.var_dir):
        services.append(Service("redis", embedded_redis_command(plan.var_dir)))
    services += [Service(name, commands[name], env=env) for name in ALL_SERVICES if name in plan.services]
    if plan.first_cycle and "worker" in plan.services:
        services.append(Service("first-cycle", muarl_argv("cycle", "run", "--recipe", FIRST_RECIPE), env=env,
                                restart=False))
    return services
