"""Prompt templates every kind fills in: a system instruction, a user message and
(pairwise) how one item is shown, with only plain ``{name}`` placeholders."""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from biasaudit.errors import UsageError
from biasaudit.textfiles import brief, load_yaml

__all__ = ["PromptTemplate", "plain_placeholders"]

_PROMPT_KEYS = frozenset({"system", "user", "candidate"})


def plain_placeholders(text: str, where: str) -> set[str]:
    """The ``{name}`` placeholders of ``text``; anything else in braces is refused.

    Only a plain name is filled in: no attribute or index (``{x.y}``,
    ``{x[0]}``), no conversion (``{x!r}``) and no format spec (``{x:>9}``, which
    can ask for a string gigabytes long). ``{{`` and ``}}`` are literal braces.

    Raises
    ------
    UsageError
        ``where`` (file and field) and the placeholder at fault.
    """
    try:
        parsed = list(string.Formatter().parse(text))
    except ValueError as error:
        raise UsageError(f"{where}: {error} (write {{{{ and }}}} for a literal brace)") from None
    names: set[str] = set()
    for _, name, spec, conversion in parsed:
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            shown = (
                "{"
                + name
                + (f"!{conversion}" if conversion else "")
                + (f":{spec}" if spec else "")
                + "}"
            )
            raise UsageError(
                f"{where}: placeholder {brief(shown)} is not a plain {{name}}; only plain "
                "placeholders are filled in (no format specs, conversions, attributes or "
                "indexes; write {{ and }} for a literal brace)"
            )
        names.add(name)
    return names


@dataclass(frozen=True)
class PromptTemplate:
    """One prompt: a system instruction, a user message, and (pairwise) how one item is shown.

    Placeholders are written ``{name}`` (``{{`` for a literal brace). A
    pairwise prompt's user message holds ``{first}`` and ``{second}``, each
    filled with ``candidate`` rendered for one item.
    """

    source: str
    system: str
    user: str
    candidate: str | None = None

    @classmethod
    def load(cls, path: str | Path) -> PromptTemplate:
        """Read a prompt file: YAML with ``system``, ``user`` and optionally ``candidate``."""
        return cls.from_mapping(load_yaml(path, "prompt"), str(path))

    @classmethod
    def from_mapping(cls, data: Any, source: str) -> PromptTemplate:
        """Build from a mapping with ``system``, ``user`` and optionally ``candidate``."""
        if not isinstance(data, Mapping):
            raise UsageError(f"{source}: a prompt needs the fields 'system' and 'user'")
        unknown = sorted(set(data) - _PROMPT_KEYS)
        if unknown:
            raise UsageError(
                f"{source}: unknown field '{unknown[0]}' (allowed: system, user, candidate)"
            )
        for key in ("system", "user"):
            if not isinstance(data.get(key), str) or not data[key].strip():
                raise UsageError(f"{source}, field '{key}': required, as text")
        candidate = data.get("candidate")
        if candidate is not None and not isinstance(candidate, str):
            raise UsageError(f"{source}, field 'candidate': must be text")
        template = cls(source, data["system"].strip(), data["user"].strip(), candidate)
        for part in ("system", "user", "candidate"):
            template.placeholders(part)  # only plain {name}s, checked as the prompt is loaded
        return template

    def placeholders(self, part: Literal["system", "user", "candidate"]) -> set[str]:
        """The ``{names}`` one part of the prompt fills in."""
        return plain_placeholders(getattr(self, part) or "", f"{self.source}, field '{part}'")

    def check(self, part: Literal["system", "user", "candidate"], available: set[str]) -> None:
        """Raise unless every placeholder of ``part`` is one of ``available``."""
        missing = sorted(self.placeholders(part) - available)
        if missing:
            offered = ", ".join(sorted(available)) or "none"
            raise UsageError(
                f"{self.source}, field '{part}': unknown placeholder {{{missing[0]}}} "
                f"(available: {offered})"
            )

    def messages(self, fields: Mapping[str, str]) -> tuple[dict[str, str], ...]:
        """The chat messages with ``fields`` filled in."""
        return (
            {"role": "system", "content": self.system.format_map(fields).strip()},
            {"role": "user", "content": self.user.format_map(fields).strip()},
        )

    def block(self, fields: Mapping[str, str]) -> str:
        """One item, as a pairwise prompt shows it."""
        if self.candidate is None:
            raise UsageError(f"{self.source}: a pairwise prompt needs a 'candidate' field")
        return self.candidate.format_map(fields).strip()
