"""The `muarl tasks` / `muarl eval` contract end to end on a small task file, and clean errors."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from rl.cli import register

app = typer.Typer()
register(app)  # the rl commands, exactly as the `muarl` entry point adds them


def test_generate_then_eval_writes_the_contract_files(tmp_path, test_dbs, tau_data_dir):
    runner = CliRunner()
    tasks = tmp_path / "tasks.json"
    res = runner.invoke(app, ["tasks", "generate", "--store", "tau-retail", "--n", "6", "--seed", "2",
                              "--out", str(tasks), "--data-dir", str(tau_data_dir)])
    assert res.exit_code == 0, res.output
    out = tmp_path / "run"
    res = runner.invoke(app, ["eval", "--tasks", str(tasks), "--policy", "oracle", "--user", "scripted",
                              "--trials", "2", "--concurrency", "3", "--out", str(out),
                              "--database-url", test_dbs.server_url, "--data-dir", str(tau_data_dir)])
    assert res.exit_code == 0, res.output
    lines = (out / "episodes.jsonl").read_text().splitlines()
    assert len(lines) == 12
    episode = json.loads(lines[0])
    assert {"task_id", "trial", "messages", "tool_calls", "reward", "breakdown", "tcr", "timings_ms",
            "policy_model", "user_model", "excluded"} <= set(episode)
    s = json.loads((out / "summary.json").read_text())
    assert s["n_tasks"] == 6 and s["trials"] == 2
    assert set(s["pass_hat_k"]) == {"1", "2"} and s["pass_hat_k"]["1"] == 1.0
    assert s["tcr"] == 1.0 and s["excluded"] == {}
    assert all(set(v) >= {"n", "pass_hat_k"} for v in s["by_tag"].values())
    assert (out / "summary.md").read_text().startswith("# Evaluation")


def test_import_tau_cli(tmp_path, tau_data_dir):
    out = tmp_path / "tau1.json"
    res = CliRunner().invoke(app, ["tasks", "import-tau", "--benchmark", "tau1", "--domain", "retail",
                                   "--split", "dev", "--data-dir", str(tau_data_dir), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert len(json.loads(out.read_text())["tasks"]) == 20
    # a gold plan no customer conversation can carry out is left out, named with the reason
    out = tmp_path / "tau1-test.json"
    res = CliRunner().invoke(app, ["tasks", "import-tau", "--benchmark", "tau1", "--domain", "retail",
                                   "--split", "test", "--data-dir", str(tau_data_dir), "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "left out tau1-retail-test-064" in " ".join(res.output.split())
    written = json.loads(out.read_text())
    assert len(written["tasks"]) == 114 and "tau1-retail-test-064" not in {t["id"] for t in written["tasks"]}
    assert "james_sanchez_3954" in written["meta"]["left_out"]["tau1-retail-test-064"]


def test_bad_input_is_a_clear_error_and_writes_nothing(tmp_path):
    runner = CliRunner()
    out = tmp_path / "run"
    missing = runner.invoke(app, ["eval", "--tasks", str(tmp_path / "nope.json"), "--out", str(out)])
    assert missing.exit_code == 2 and "not found" in " ".join(missing.output.split()) and not out.exists()
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    res = runner.invoke(app, ["eval", "--tasks", str(bad), "--out", str(out)])
    assert res.exit_code == 2 and not out.exists()
    res = runner.invoke(app, ["eval", "--tasks", str(bad), "--out", str(out), "--policy", "nonsense"])
    assert res.exit_code == 2
    res = runner.invoke(app, ["tasks", "import-tau", "--benchmark", "tau1", "--domain", "airline",
                              "--out", str(tmp_path / "x.json")])
    assert res.exit_code == 2 and not (tmp_path / "x.json").exists()
