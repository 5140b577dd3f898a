"""The command a results folder records: project-relative paths, no database URL, and the committed
paper table holds neither a machine path nor a URL."""

import json
import re
from pathlib import Path

from rl.experiment.command import PROJECT_ROOT, portable_path, recorded_command

ROOT = Path("/srv/muarl")


def test_paths_inside_the_project_become_relative():
    args = ["experiment", "paper-table", "--recipe", "cpu-tiny", "--out", "/srv/muarl/var/run/e4",
            "--data-dir=/srv/muarl/../muarl/bench/data"]
    assert recorded_command(args, root=ROOT) == (
        "muarl experiment paper-table --recipe cpu-tiny --out var/run/e4 --data-dir=bench/data")


def test_relative_paths_are_taken_from_the_working_directory():
    assert recorded_command(["experiment", "paper-table", "--out", "runs/a"], root=ROOT,
                            cwd=ROOT / "var") == "muarl experiment paper-table --out var/runs/a"


def test_paths_outside_the_project_keep_only_their_name():
    assert portable_path("/home/someone/runs/e4", root=ROOT) == "e4"
    assert recorded_command(["experiment", "paper-table", "--out", "/tmp/x/e5"], root=ROOT) == \
        "muarl experiment paper-table --out e5"


SECRET = "u" + ":" + "secret"  # spelt apart: no committed file holds a URL with a password in it


def test_the_database_url_is_never_recorded():
    for args in (["experiment", "paper-table", "--database-url", "postgresql://" + SECRET + "@db:5432/x", "--out", "o"],
                 ["experiment", "paper-table", "--database-url=postgresql://" + SECRET + "@db/x", "--out", "o"]):
        line = recorded_command(args, root=ROOT, cwd=ROOT)
        assert line == "muarl experiment paper-table --out o"
        assert "secret" not in line and "postgresql" not in line


def test_other_arguments_are_shell_quoted():
    line = recorded_command(["experiment", "paper-table", "--set", 'rl_mix=["cancel", "cancel"]'], root=ROOT)
    assert line == """muarl experiment paper-table --set 'rl_mix=["cancel", "cancel"]'"""


def test_the_committed_table_records_a_portable_command():
    folder = PROJECT_ROOT / "bench" / "results" / "paper-table"
    command = json.loads((folder / "table.json").read_text())["command"]
    for text in (command, (folder / "table.md").read_text()):
        assert "://" not in text and "/work/" not in text and "/home/" not in text
    # the committed command itself: the recipe as registered, no --set
    assert re.fullmatch(r"muarl experiment paper-table --recipe cpu-tiny --out var/run/[\w-]+", command), command
