"""API keys: read them from the environment, and keep them out of everything written.

Keys are only ever read from environment variables (never from the command line,
where they would land in shell history and in ``manifest.json``'s command). Every
key read is remembered so that :func:`redact` can scrub it from error messages an
endpoint might echo back before they reach a log line, the cache or a run file.
"""

from __future__ import annotations

import logging
import os
import re

from .errors import MissingAPIKeyError

__all__ = ["RedactingFilter", "read_api_key", "redact"]

_known_secrets: set[str] = set()
# Bearer tokens and sk-style keys the endpoint may quote even when we never read them.
_KEY_PATTERN = re.compile(r"\b(sk-[A-Za-z0-9_\-]{6,}|Bearer\s+[A-Za-z0-9_\-.]{6,})")


def read_api_key(env_name: str, *, provider: str) -> str:
    """Return the key in ``$env_name``; raise before any request if it is unset or empty."""
    value = os.environ.get(env_name, "").strip()
    if not value:
        raise MissingAPIKeyError(
            f"{provider}: the API key variable {env_name} is not set; "
            f"export {env_name}=... (or pass --api-key-env NAME)"
        )
    remember_secret(value)
    return value


def remember_secret(value: str) -> None:
    """Add a value that :func:`redact` must never let through."""
    if len(value) >= 4:
        _known_secrets.add(value)


def redact(text: str) -> str:
    """Replace every known secret and anything shaped like an API key with ``[REDACTED]``."""
    for secret in _known_secrets:
        if secret in text:
            text = text.replace(secret, "[REDACTED]")
    return _KEY_PATTERN.sub("[REDACTED]", text)


class RedactingFilter(logging.Filter):
    """A logging filter that redacts secrets from every record's final message."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
