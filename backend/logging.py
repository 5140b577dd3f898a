"""Structured logging (structlog) for every muarl process: JSON lines when MUARL_LOG_JSON
is set, readable console lines otherwise; always to stderr."""

from __future__ import annotations

import logging
import sys

import structlog

from backend.config import get_settings

_configured = False


def configure_logging(level: str | None = None, *, json_lines: bool | None = None) -> None:
    global _configured
    settings = get_settings()
    level_name = (level or settings.log_level).upper()
    as_json = settings.log_json if json_lines is None else json_lines
    logging.basicConfig(stream=sys.stderr, level=level_name, format="%(message)s", force=True)
    renderer = structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso"),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level_name)),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    # migrations log every step at INFO (the worker migrates each snapshot): only when debugging
    logging.getLogger("alembic").setLevel(logging.DEBUG if level_name == "DEBUG" else logging.WARNING)
    _configured = True
