"""The command line a results folder records: the experiment command with its path options written
relative to the project (or, outside it, as the folder's name alone) and its database URL left out,
so committed results carry no machine path and no credential."""

from __future__ import annotations

import shlex
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PATH_OPTIONS = frozenset({"--out", "--data-dir"})
SECRET_OPTIONS = frozenset({"--database-url"})  # where the run ran, possibly with a password


def portable_path(value: str, *, root: Path = PROJECT_ROOT, cwd: Path | None = None) -> str:
    """`value` relative to `root` when it lies inside it, else its last component."""
    path = Path(value)
    if not path.is_absolute():
        path = (cwd or Path.cwd()) / path
    path = Path(*_normalized(path.parts))
    try:
        return path.relative_to(root.resolve()).as_posix() or "."
    except ValueError:
        return path.name or "."


def _normalized(parts: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for p in parts:
        if p == "..":
            if len(out) > 1:
                out.pop()
        elif p != ".":
            out.append(p)
    return out


def recorded_command(args: list[str], *, root: Path = PROJECT_ROOT, cwd: Path | None = None) -> str:
    """`muarl ARGS...` as results record it: `--out`/`--data-dir` values made portable
    (`portable_path`), `--database-url` and its value dropped, each argument shell-quoted."""
    out: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, inline = arg.partition("=")
        if name in SECRET_OPTIONS:
            i += 1 if eq else 2
            continue
        if name in PATH_OPTIONS:
            if eq:
                out.append(f"{name}={portable_path(inline, root=root, cwd=cwd)}")
                i += 1
                continue
            out.append(arg)
            if i + 1 < len(args):
                out.append(portable_path(args[i + 1], root=root, cwd=cwd))
            i += 2
            continue
        out.append(arg)
        i += 1
    return " ".join(["muarl", *(shlex.quote(a) for a in out)])
