"""`muarl train init|sft|grpo`, `muarl coldstart generate|synthesize` and `muarl experiment` from the
shell: the files they write and clean errors for bad input (exit code 2, nothing written)."""

from __future__ import annotations

import json

import typer
from typer.testing import CliRunner

from rl.cli import register
from tests.fakes.openai_server import FakeOpenAIServer, text
from tests.rl.coldstart.test_synthetic import SPEC, responder

app = typer.Typer()
register(app)


def test_coldstart_generate_init_sft_grpo(tmp_path, test_dbs, tau_data_dir):
    r = CliRunner()
    tasks = tmp_path / "tasks.json"
    res = r.invoke(app, ["tasks", "generate", "--store", "tau-retail", "--n", "3", "--seed", "4", "--out", str(tasks),
                         "--data-dir", str(tau_data_dir)])
    assert res.exit_code == 0, res.output
    data = tmp_path / "cold.jsonl"
    res = r.invoke(app, ["coldstart", "generate", "--tasks", str(tasks), "--out", str(data), "--concurrency", "2",
                         "--database-url", test_dbs.server_url, "--data-dir", str(tau_data_dir),
                         "--corrections", "1.0"])
    assert res.exit_code == 0, res.output
    kept = [json.loads(x) for x in data.read_text().splitlines()]
    assert kept and all(k["meta"]["reward"] == 1.0 for k in kept)
    # every conversation with a proposal shows the corrected one, marked out of the loss
    proposing = [k for k in kept if any("(yes/no)" in str(m.get("content")) for m in k["messages"])]
    assert proposing and all(k["meta"].get("retracted_proposals") == 1 for k in proposing)
    res = r.invoke(app, ["coldstart", "generate", "--tasks", str(tasks), "--out", str(tmp_path / "o.jsonl"),
                         "--agent", "oracle", "--corrections", "0.5"])
    assert res.exit_code == 2 and "--corrections is for --agent teacher" in res.output
    assert not (tmp_path / "o.jsonl").exists()
    assert (tmp_path / "cold.raw.jsonl").exists()
    res = r.invoke(app, ["train", "init", "--corpus", str(data), "--out", str(tmp_path / "base"), "--recipe", "smoke"])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "base" / "manifest.json").read_text())["kind"] == "tiny-qwen3"
    res = r.invoke(app, ["train", "sft", "--model", str(tmp_path / "base"), "--data", str(data), "--out",
                         str(tmp_path / "sft"), "--recipe", "smoke", "--epochs", "1"])
    assert res.exit_code == 0, res.output
    assert json.loads((tmp_path / "sft" / "manifest.json").read_text())["training"]["method"] == "sft"
    res = r.invoke(app, ["train", "grpo", "--model", str(tmp_path / "sft"), "--tasks", str(tasks), "--out",
                         str(tmp_path / "rl"), "--recipe", "smoke", "--steps", "1", "--mini-batches", "2",
                         "--loss-agg", "seq-mean-token-mean",
                         "--database-url", test_dbs.server_url, "--data-dir", str(tau_data_dir)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "rl" / "metrics.jsonl").exists() and (tmp_path / "rl" / "model" / "manifest.json").exists()
    manifest = json.loads((tmp_path / "rl" / "model" / "manifest.json").read_text())
    assert manifest["training"]["config"]["mini_batches"] == 2 and manifest["view"]["refs"]
    assert manifest["training"]["config"]["loss_agg"] == "seq-mean-token-mean"
    assert manifest["view"]["constrain_calls"] and manifest["view"]["shuffle_refs"] is False


def test_bad_input_exits_2_and_writes_nothing(tmp_path):
    r = CliRunner()
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"no": "messages"}\n')
    res = r.invoke(app, ["train", "init", "--corpus", str(bad), "--out", str(tmp_path / "m")])
    assert res.exit_code == 2 and "messages" in res.output and not (tmp_path / "m").exists()
    res = r.invoke(app, ["train", "init", "--corpus", str(bad), "--out", str(tmp_path / "m"), "--recipe", "nope"])
    assert res.exit_code == 2 and "unknown recipe" in res.output
    res = r.invoke(app, ["train", "grpo", "--model", str(tmp_path / "m"), "--tasks", str(bad), "--out",
                         str(tmp_path / "g"), "--loss-agg", "seq-sum"])
    assert res.exit_code == 2 and "--loss-agg must be one of" in res.output and not (tmp_path / "g").exists()
    res = r.invoke(app, ["experiment", "paper-table", "--recipe", "nope", "--out", str(tmp_path / "t")])
    assert res.exit_code == 2 and not (tmp_path / "t").exists()
    res = r.invoke(app, ["experiment", "paper-table", "--out", str(tmp_path / "t"), "--set", "grpo.stepz=3"])
    assert res.exit_code == 2 and "unknown setting 'grpo.stepz'" in res.output and not (tmp_path / "t").exists()
    res = r.invoke(app, ["coldstart", "synthesize", "--domain", str(bad), "--out", str(tmp_path / "s.jsonl"),
                         "--model", "m", "--base-url", "http://127.0.0.1:9/v1"])
    assert res.exit_code == 2 and "not a domain spec" in res.output and not (tmp_path / "s.jsonl").exists()


def test_coldstart_synthesize_with_fake_endpoint(tmp_path):
    spec = tmp_path / "bakery.json"
    spec.write_text(SPEC.model_dump_json())
    out = tmp_path / "syn.jsonl"
    with FakeOpenAIServer(responder(careful=True)) as server:
        res = CliRunner().invoke(app, ["coldstart", "synthesize", "--domain", str(spec), "--out", str(out),
                                       "--model", "fake", "--base-url", server.url, "--trials", "2"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    assert len(rows) == 2 and rows[0]["meta"]["judge"]["ok"]
    with FakeOpenAIServer(lambda req: text("NO")) as server:
        res = CliRunner().invoke(app, ["coldstart", "synthesize", "--domain", str(spec), "--out", str(out),
                                       "--model", "fake", "--base-url", server.url, "--max-turns", "3"])
    assert res.exit_code == 0 and out.read_text() == ""
