"""Where the audit kinds register how the offline ``sim/`` model answers their prompts.

A leaf that imports nothing: :mod:`biasaudit.kinds` registers a source of responders
here when it is imported (each kind's ``sim.py``, loaded only when a sim first
answers), and :mod:`biasaudit.providers.sim` reads them. So the kinds push their
responders to the sim, and the provider imports no kind.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

__all__ = ["register", "sources"]

_SOURCES: list[Callable[[], Iterable[Any]]] = []


def register(source: Callable[[], Iterable[Any]]) -> None:
    """Add ``source``, a function giving responders (``providers.sim.Responder``), once."""
    if source not in _SOURCES:
        _SOURCES.append(source)


def sources() -> tuple[Callable[[], Iterable[Any]], ...]:
    """Every source registered, in the order registered."""
    return tuple(_SOURCES)
