"""`StrEnum`: the base of the IR's small closed sets of names (function kinds, loop kinds, declaration scopes)."""

from __future__ import annotations

from enum import Enum


class StrEnum(str, Enum):
    """An enum whose members are their values as strings: equal to, hashed like and printed as the value, so a
    member and its spelling are interchangeable as dict keys and in messages, and a misspelling fails at once."""

    def __str__(self) -> str:
        return str.__str__(self)

    __format__ = str.__format__
    __hash__ = str.__hash__
