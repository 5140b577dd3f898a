"""The verl tests run in the verl environment (.venv-verl, `make verl-venv`): under the project's own
venv verl is not installed and this folder is not collected; tests/rl/test_verl_env.py runs it in
.venv-verl instead."""

from __future__ import annotations

import importlib.util

collect_ignore_glob = [] if importlib.util.find_spec("verl") is not None else ["test_*.py"]
