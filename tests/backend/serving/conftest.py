"""Fixtures for the registry tests: a migrated empty database, its engine and registry, and
model folders shaped like the ones our pipeline writes (small files, no torch needed)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from backend.db.engine import make_engine
from backend.serving.registry import ModelRegistry


def write_model_folder(folder: Path, *, adapter: bool = False, manifest: dict | None = None,
                       weights: bytes = b"weights") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ("adapter_config.json" if adapter else "config.json")).write_text(json.dumps({"r": 8} if adapter else
                                                                                          {"model_type": "qwen3"}))
    (folder / ("adapter_model.safetensors" if adapter else "model.safetensors")).write_bytes(weights)
    (folder / "tokenizer.json").write_text("{}")
    (folder / "manifest.json").write_text(json.dumps(manifest if manifest is not None else {
        "recipe": {"name": "tiny", "gate": {"suite": "suite.jsonl", "floor": 0.1}},
        "training": {"method": "grpo", "run": "runs/r1", "steps": 3, "final_reward": 0.5},
        "store_snapshot": "seed:0:500", "view": {"references": True}}))
    return folder


@pytest.fixture
async def reg_engine(empty_db: str) -> AsyncIterator[AsyncEngine]:
    engine = make_engine(empty_db)
    yield engine
    await engine.dispose()


@pytest.fixture
def registry(reg_engine: AsyncEngine) -> ModelRegistry:
    return ModelRegistry(reg_engine)
