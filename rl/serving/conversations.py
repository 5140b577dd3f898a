"""Finding the episode a chat request continues.

An OpenAI client sends the whole conversation with every request, while the local policy keeps each
conversation's tokens and key/value cache between turns (rl/policies/local.py). After every reply the
engine remembers a fingerprint of the conversation including that reply; a request whose messages up
to its last assistant message have that fingerprint continues the same episode, so only the new
customer message or tool results are processed. Anything else (a conversation this engine never saw,
one another version answered before, a retried request) starts a fresh episode from the whole
history. Fingerprints ignore what clients commonly rewrite: tool-call ids, whitespace around text,
`null` versus empty content and the spacing of argument JSON.
"""

from __future__ import annotations

import hashlib
import json
from collections import OrderedDict
from typing import Any


def _arguments(raw: Any) -> Any:
    if isinstance(raw, str):
        try:
            return json.loads(raw)
        except ValueError:
            return raw
    return raw


def normalize(message: dict[str, Any]) -> list[Any]:
    """What of a message decides what the model reads."""
    calls = [[(c.get("function") or c).get("name"), _arguments((c.get("function") or c).get("arguments"))]
             for c in message.get("tool_calls") or []]
    return [message.get("role"), str(message.get("content") or "").strip(), calls]


def fingerprint(messages: list[dict[str, Any]], extra: Any = None) -> str:
    blob = json.dumps([extra, [normalize(m) for m in messages]], sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def last_assistant(messages: list[dict[str, Any]]) -> int:
    """The index of the last assistant message (-1 when there is none)."""
    for i in range(len(messages) - 1, -1, -1):
        if messages[i].get("role") == "assistant":
            return i
    return -1


class Conversations:
    """Fingerprint -> episode id of the conversations a policy is keeping, oldest forgotten first."""

    def __init__(self, capacity: int = 1024) -> None:
        self.capacity = capacity
        self._episodes: OrderedDict[str, str] = OrderedDict()
        self.continued = 0  # requests that continued a kept episode
        self.started = 0  # requests that started a fresh one

    def take(self, messages: list[dict[str, Any]], extra: Any = None) -> str | None:
        """The episode these messages continue (and forget it: it is about to move on), or None."""
        k = last_assistant(messages)
        episode = self._episodes.pop(fingerprint(messages[: k + 1], extra), None) if k >= 0 else None
        if episode is None:
            self.started += 1
        else:
            self.continued += 1
        return episode

    def keep(self, messages: list[dict[str, Any]], reply: dict[str, Any], episode: str,
             extra: Any = None) -> list[str]:
        """Remember `episode` as the conversation `messages` + `reply`; returns the episodes forgotten
        to stay within capacity (their state can be dropped)."""
        self._episodes[fingerprint([*messages, reply], extra)] = episode
        dropped = []
        while len(self._episodes) > self.capacity:
            dropped.append(self._episodes.popitem(last=False)[1])
        return dropped

    def __len__(self) -> int:
        return len(self._episodes)
