"""Settings for every muarl process, read once from the environment or `.env`.

When no `DATABASE_URL` is given the store runs on an embedded PostgreSQL under `var/`
(see `backend.db.embedded`); when no `REDIS_URL` is given, on an embedded Redis.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

PROJECT_ROOT = Path(__file__).resolve().parent.parent


class Settings(BaseSettings):
    """All muarl settings. Environment names are given explicitly so they stay stable."""

    model_config = SettingsConfigDict(env_file=".env", extra="ignore", populate_by_name=True)

    database_url: str | None = Field(default=None, alias="DATABASE_URL")
    test_database_url: str | None = Field(default=None, alias="TEST_DATABASE_URL")
    redis_url: str | None = Field(default=None, alias="REDIS_URL")
    var_dir: Path = Field(default=PROJECT_ROOT / "var", alias="MUARL_VAR_DIR")
    benchmarks_dir: Path = Field(default=PROJECT_ROOT.parent / "shared" / "benchmarks", alias="MUARL_BENCHMARKS_DIR")

    llm_base_url: str | None = Field(default=None, alias="MUARL_LLM_BASE_URL")
    llm_model: str | None = Field(default=None, alias="MUARL_LLM_MODEL")
    llm_api_key: str | None = Field(default=None, alias="MUARL_LLM_API_KEY")
    llm_timeout_s: float = Field(default=60.0, alias="MUARL_LLM_TIMEOUT_S")
    llm_max_retries: int = Field(default=2, alias="MUARL_LLM_MAX_RETRIES")

    mcp_token: str | None = Field(default=None, alias="MUARL_MCP_TOKEN")
    ops_token: str | None = Field(default=None, alias="MUARL_OPS_TOKEN")

    llm_retry_backoff_s: float = Field(default=0.5, alias="MUARL_LLM_RETRY_BACKOFF_S")
    llm_temperature: float | None = Field(default=None, alias="MUARL_LLM_TEMPERATURE")

    # the chat service (backend/api, backend/agent)
    agent_max_steps: int = Field(default=20, alias="MUARL_AGENT_MAX_STEPS")
    agent_tool_calls_per_step: int = Field(default=1, alias="MUARL_AGENT_TOOL_CALLS_PER_STEP")
    api_max_message_chars: int = Field(default=4000, alias="MUARL_API_MAX_MESSAGE_CHARS")
    api_rate_limit_per_minute: int = Field(default=20, alias="MUARL_API_RATE_LIMIT_PER_MINUTE")
    api_db_pool_size: int = Field(default=20, alias="MUARL_API_DB_POOL_SIZE")
    api_turn_lease_s: float = Field(default=300.0, alias="MUARL_API_TURN_LEASE_S")
    api_max_body_bytes: int = Field(default=1_000_000, alias="MUARL_API_MAX_BODY_BYTES")
    # transcript writes commit without waiting for the WAL flush (store changes always wait)
    api_async_transcript_commit: bool = Field(default=True, alias="MUARL_API_ASYNC_TRANSCRIPT_COMMIT")

    # the API's edge: per-client quotas, waiting for a busy conversation, who may read /metrics
    rate_conversations_per_hour: int = Field(default=60, alias="MUARL_RATE_CONVERSATIONS_PER_HOUR")
    rate_messages_per_hour: int = Field(default=600, alias="MUARL_RATE_MESSAGES_PER_HOUR")
    rate_client_header: str | None = Field(default=None, alias="MUARL_RATE_CLIENT_HEADER")
    api_turn_wait_s: float = Field(default=30.0, alias="MUARL_API_TURN_WAIT_S")
    metrics_access: Literal["loopback", "open", "token"] = Field(default="loopback", alias="MUARL_METRICS_ACCESS")
    metrics_token: str | None = Field(default=None, alias="MUARL_METRICS_TOKEN")

    # the online cycle (rl/pipeline: Celery worker and beat; backend/cycles.py)
    # when cycles start on their own: seconds between them ("21600"), a crontab ("0 3 * * *"), or "off"
    cycle_schedule: str = Field(default="off", alias="MUARL_CYCLE_SCHEDULE")
    cycle_recipe: str = Field(default="cpu-tiny", alias="MUARL_CYCLE_RECIPE")
    cycle_auto_promote: bool = Field(default=True, alias="MUARL_CYCLE_AUTO_PROMOTE")
    cycle_step_soft_limit_s: float = Field(default=4 * 3600.0, alias="MUARL_CYCLE_STEP_SOFT_LIMIT_S")
    cycle_step_hard_limit_s: float = Field(default=4 * 3600.0 + 600.0, alias="MUARL_CYCLE_STEP_HARD_LIMIT_S")
    cycle_max_step_attempts: int = Field(default=3, ge=1, alias="MUARL_CYCLE_MAX_STEP_ATTEMPTS")
    # a step message nobody has picked up this long after it was sent is sent again (the cycle's
    # state in Postgres says which step is next; a duplicate is skipped)
    cycle_redispatch_after_s: float = Field(default=300.0, alias="MUARL_CYCLE_REDISPATCH_AFTER_S")
    cycle_sweep_interval_s: float = Field(default=600.0, alias="MUARL_CYCLE_SWEEP_INTERVAL_S")

    # make run (backend/runner): which services `muarl run` supervises, comma-separated
    run_services: str = Field(default="api,worker,beat,model-server", alias="MUARL_RUN_SERVICES")

    # model registry, engines and promotion gates (backend/serving, rl/eval/gates.py)
    model_server_url: str = Field(default="http://127.0.0.1:8001/v1", alias="MUARL_MODEL_SERVER_URL")
    vllm_base_url: str | None = Field(default=None, alias="MUARL_VLLM_BASE_URL")
    engine_timeout_s: float = Field(default=30.0, alias="MUARL_ENGINE_TIMEOUT_S")
    # the longest a serving process trusts its cached champion without the NOTIFY listener
    champion_recheck_s: float = Field(default=5.0, alias="MUARL_CHAMPION_RECHECK_S")
    gate_margin: float = Field(default=0.02, alias="MUARL_GATE_MARGIN")
    gate_trials: int = Field(default=4, alias="MUARL_GATE_TRIALS")
    gate_category_tolerance: float = Field(default=0.10, alias="MUARL_GATE_CATEGORY_TOLERANCE")
    gate_max_excluded: float = Field(default=0.05, alias="MUARL_GATE_MAX_EXCLUDED")

    log_level: str = Field(default="INFO", alias="MUARL_LOG_LEVEL")
    log_json: bool = Field(default=False, alias="MUARL_LOG_JSON")


@lru_cache
def get_settings() -> Settings:
    """The process-wide settings (cached; tests call `get_settings.cache_clear()`)."""
    return Settings()
