"""Our store policy states the rules a tau-bench retail agent follows, in our own words."""

from __future__ import annotations

import re

from backend.agent.policy import STORE_POLICY, system_prompt


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def test_policy_covers_the_rules() -> None:
    text = STORE_POLICY.lower()
    for rule in ("email", "zip code", "one customer", "say yes", "one tool call at a time", "human agent",
                 "no longer needed", "ordered by mistake", "pending", "delivered", "gift card",
                 "5 to 7 business days", "same product", "return requested", "exchange requested"):
        assert rule in text, rule
    assert system_prompt() == STORE_POLICY


def test_policy_is_not_a_copy_of_the_benchmark_wiki(tau_data_dir) -> None:
    wiki = _words((tau_data_dir / "tau1" / "retail" / "wiki.md").read_text())
    ours = _words(STORE_POLICY)
    n = 8
    theirs = {tuple(wiki[i:i + n]) for i in range(len(wiki) - n + 1)}
    shared = [" ".join(ours[i:i + n]) for i in range(len(ours) - n + 1) if tuple(ours[i:i + n]) in theirs]
    assert shared == []
