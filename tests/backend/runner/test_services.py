"""What `muarl run` plans to start: the embedded Redis only without REDIS_URL (and only when none
answers yet), every child on the same store and broker, the first cycle only while there is no
champion and a worker runs it, and a clear error for an unknown service."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from backend.runner.services import Plan, build_services


def test_all_services_on_one_store_and_broker(tmp_path: Path) -> None:
    plan = Plan(database_url="postgresql+asyncpg://u@h/db", redis_url=None, var_dir=tmp_path, port=8100,
                model_server_port=8101, first_cycle=True)
    services = {s.name: s for s in build_services(plan, {"MUARL_MCP_TOKEN": "t"})}
    assert list(services) == ["redis", "api", "worker", "beat", "model-server", "first-cycle"]
    assert services["redis"].argv[0].endswith("redis-server") and "--daemonize" in services["redis"].argv
    assert services["api"].argv == [sys.executable, "-m", "backend.cli", "serve", "--host", "127.0.0.1",
                                    "--port", "8100"]
    assert services["first-cycle"].argv[-4:] == ["cycle", "run", "--recipe", "first-model"]
    assert services["first-cycle"].restart is False and services["worker"].restart is True
    for name in ("api", "worker", "beat", "model-server", "first-cycle"):
        env = services[name].env
        assert env["DATABASE_URL"] == plan.database_url and env["MUARL_MCP_TOKEN"] == "t"
        assert env["REDIS_URL"] == f"redis+socket://{tmp_path.resolve()}/redis/redis.sock"
        assert env["MUARL_MODEL_SERVER_URL"] == "http://127.0.0.1:8101/v1"


def test_redis_url_subsets_and_errors(tmp_path: Path) -> None:
    plan = Plan(database_url="x", redis_url="redis://r:6379/0", var_dir=tmp_path, services=("api", "beat"),
                first_cycle=True)
    services = build_services(plan)
    assert [s.name for s in services] == ["api", "beat"]  # no worker: nobody would run the first cycle
    assert services[0].env["REDIS_URL"] == "redis://r:6379/0"
    with pytest.raises(ValueError, match="unknown services \\['web'\\]"):
        build_services(Plan(database_url="x", redis_url=None, var_dir=tmp_path, services=("api", "web")))
