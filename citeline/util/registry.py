"""Registries by name: a decorator that records a class in a table (vector kinds, ranking stages)."""

from __future__ import annotations

from collections.abc import Callable, MutableMapping
from typing import Any, TypeVar

T = TypeVar("T")


def registering(table: MutableMapping[str, Any], name: str) -> Callable[[T], T]:
    """A decorator recording what it decorates in ``table`` under ``name`` and returning it unchanged."""

    def register(cls: T) -> T:
        table[name] = cls
        return cls

    return register
