"""Store snapshots by reference: the name a task file uses for the store its tasks run on.

`tau-retail` is tau-bench's retail store (read from the benchmarks folder); `synthetic:<seed>:<users>`
is `backend.store.seed.generate_store(seed, users)`. Tasks never embed store data, only the reference.
"""

from __future__ import annotations

from pathlib import Path

from backend.config import get_settings
from backend.store.tau_data import StoreData, read_tau_retail

TAU_RETAIL = "tau-retail"


def synthetic_ref(seed: int, users: int) -> str:
    return f"synthetic:{seed}:{users}"


def resolve_store(ref: str, data_dir: Path | None = None) -> StoreData:
    """The store data a snapshot reference names."""
    if ref == TAU_RETAIL:
        return read_tau_retail(Path(data_dir or get_settings().benchmarks_dir))
    kind, _, rest = ref.partition(":")
    if kind == "synthetic":
        try:
            seed, users = (int(x) for x in rest.split(":"))
        except ValueError:
            raise ValueError(f"bad synthetic store reference {ref!r}; expected synthetic:<seed>:<users>") from None
        from backend.store.seed import generate_store

        return generate_store(seed, users)
    raise ValueError(f"unknown store reference {ref!r}; expected {TAU_RETAIL!r} or synthetic:<seed>:<users>")
