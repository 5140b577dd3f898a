"""A bounded least-recently-used cache for per-conversation token masks: it keeps the entries
generation asks for again and drops the oldest, where emptying the whole cache when full would make
every running conversation rebuild its masks at once."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LRUCache(Generic[K, V]):
    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("an LRU cache holds at least one entry")
        self.maxsize = maxsize
        self._data: OrderedDict[K, V] = OrderedDict()

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The value cached for `key` (now the most recent), else `make()`, cached; the least
        recently used entry goes when the cache is over its size."""
        try:
            value = self._data[key]
        except KeyError:
            value = self._data[key] = make()
            if len(self._data) > self.maxsize:
                self._data.popitem(last=False)
            return value
        self._data.move_to_end(key)
        return value

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __len__(self) -> int:
        return len(self._data)
