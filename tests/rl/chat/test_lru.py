"""The bounded cache of per-conversation masks drops the least recently used entry, not everything."""

import pytest

from rl.chat.lru import LRUCache


def test_the_least_recently_used_entry_goes_first():
    cache: LRUCache[str, int | None] = LRUCache(2)
    made = []

    def make(v):
        made.append(v)
        return v

    assert cache.get_or_make("a", lambda: make(1)) == 1
    assert cache.get_or_make("b", lambda: make(None)) is None
    assert cache.get_or_make("a", lambda: make(99)) == 1  # a hit, now the most recent
    assert cache.get_or_make("b", lambda: make(98)) is None  # None is cached too
    assert cache.get_or_make("c", lambda: make(3)) == 3  # over size: "a" was used least recently
    assert "a" not in cache and "b" in cache and "c" in cache and len(cache) == 2
    assert made == [1, None, 3]


def test_a_cache_holds_at_least_one_entry():
    with pytest.raises(ValueError):
        LRUCache(0)
