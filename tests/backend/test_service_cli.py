"""`muarl run` without MUARL_OPS_TOKEN: one ops token per installation, private to its owner."""

from __future__ import annotations

import stat
from pathlib import Path

from backend.service_cli import local_ops_token


def test_the_ops_token_is_made_once_private_and_kept(tmp_path: Path) -> None:
    var = tmp_path / "var"
    path = local_ops_token(var)
    token = path.read_text().strip()
    assert len(token) >= 32
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert local_ops_token(var) == path and path.read_text().strip() == token  # a second run signs in the same
    assert local_ops_token(tmp_path / "other").read_text().strip() != token
