"""The training customer says byte for byte what it said before its words moved into a phrasing
bank (rl/simulator/bank.py): the probe's conversations with 600 generated tasks, three seeds each,
hash to the digest main's customer gave (measured on main before the refactor)."""

from __future__ import annotations

import hashlib
import json

from rl.simulator.scripted import ScriptedCustomer
from rl.tasks.generator import generate_tasks
from rl.tasks.stores import resolve_store, synthetic_ref
from tests.rl.simulator.probe import probe

DIGEST = "774db4b8edfcba6a3af78b9f25717881d3391062769c50d6c38b98ce5bce37a3"
FIRST = ["Hi! I'd like to cancel one of my orders.",
         "My email is paloma.petrov7331@example.net.",
         "It's order #W2982685. I no longer need it."]


def test_training_transcripts_are_unchanged():
    ref = synthetic_ref(0, 200)
    tasks = generate_tasks(resolve_store(ref), 600, 5, snapshot=ref)
    h = hashlib.sha256()
    replies = 0
    for t in tasks:
        for seed in (0, 1, 2):
            out = probe(ScriptedCustomer().session(t, seed), t)
            replies += len(out)
            h.update(json.dumps(out).encode())
    assert probe(ScriptedCustomer().session(tasks[0], 0), tasks[0])[:3] == FIRST
    assert replies == 15357
    assert h.hexdigest() == DIGEST
