"""When template choices change: `choices_changed` says that a schedule choice may have changed (a template
registered, a tuning record written, an option that decides between templates set) and `ChoiceMemo`s, the memos of
what is derived from choices under a key of their own, empty themselves when it did (`choices_generation`).

Below both the registry (which registers templates) and the tuning records (which write winners), which say so."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from typing import Generic, TypeVar

from hidet_lang import option

_generation = 0


def choices_generation() -> int:
    """A number that changes whenever a schedule choice may have changed (a template registered, a tuning record
    written, an option that decides between templates set): `ChoiceMemo`s are emptied when it does."""
    return _generation


def choices_changed() -> None:
    """Say that a schedule choice may have changed (a template registered, a tuning record written)."""
    global _generation
    _generation += 1


option.when_choices_change(choices_changed)  # allow_tf32 decides between templates

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class ChoiceMemo(Generic[K, V]):
    """A memo of what was derived from schedule choices under a key of its own (not a schedule's key), in front of
    the caches by schedule key (`_SCHEDULES`, `stdlib_ops.runtime.kernels.KERNELS`): it holds only what saves asking
    again, and is emptied whenever a choice may have changed (`choices_generation`), so that the next use chooses
    again (and finds the kernel in the cache by schedule key when the choice is the same)."""

    def __init__(self) -> None:
        self._entries: dict[K, V] = {}
        self._generation = _generation

    def get(self, key: K, make: Callable[[], V]) -> V:
        """The value remembered for `key`, made by `make` (and remembered) when there is none since the choices
        last changed."""
        if self._generation != _generation:
            self._entries.clear()
            self._generation = _generation
        value = self._entries.get(key)
        if value is None:
            value = self._entries[key] = make()
        return value

    def items(self) -> Iterator[tuple[K, V]]:
        """The remembered keys and values."""
        return iter(list(self._entries.items()))

    def __len__(self) -> int:
        return len(self._entries)
