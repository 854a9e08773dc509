"""API keys: read them from the environment, and keep them out of everything written.

Keys are only ever read from environment variables (never from the command line,
where they would land in shell history and in ``manifest.json``'s command). Every
key read is remembered so that :func:`redact` can scrub it from error messages an
endpoint might echo back before they reach a log line, the cache or a run file.

Some endpoints want credentials elsewhere: in the base URL (basic auth for a
proxy, ``?api-key=`` for some hosts; :class:`EndpointURL`) or in a header of their
own (``--header 'api-key=$AZURE_KEY'``; :func:`read_headers`). Those are used for
every request and recorded only masked (:func:`redact_url`,
:func:`public_headers`, :func:`redact_command`).
"""

from __future__ import annotations

import base64
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

from biasaudit.errors import MissingAPIKeyError, UsageError

__all__ = [
    "MASK",
    "EndpointURL",
    "RedactingFilter",
    "public_headers",
    "read_api_key",
    "read_headers",
    "redact",
    "redact_command",
    "redact_url",
    "redact_urls",
]

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


# --- credentials in a URL, and headers that carry keys --------------------------------

MASK = "***"
# Query parameters whose values are credentials (api-key, key, token, sig, code, ...):
# sent with every request, never recorded, never part of the cache key.
_CREDENTIAL_PARAM = re.compile(r"key|token|secret|pass|pwd|auth|sig|credential|code", re.I)
_URL_CREDENTIALS = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<userinfo>[^/@\s?#]+)@", re.I)
_QUERY_PARAM = re.compile(r"(?P<lead>[?&])(?P<name>[^=&#\s]+)=(?P<value>[^&#\s]*)")
_ENV_REFERENCE = re.compile(
    r"^\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))$"
)
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


@dataclass(frozen=True)
class EndpointURL:
    """A base URL split into where to connect, what to send, and what may be written down.

    Credentials in the URL (``http://user:password@host/v1``, ``?api-key=...``)
    are used for every request: ``basic_auth`` as HTTP basic authentication,
    ``query`` as query parameters. They are never written: :attr:`shown` has
    ``***`` in their place (manifests, messages), and :attr:`scope` (the
    endpoint's identity in the cache key) leaves them out.
    """

    given: str
    connect: str = field(init=False)
    query: dict[str, str] = field(init=False)
    basic_auth: str | None = field(init=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.given)
        netloc = parts.netloc.rpartition("@")[2]
        userinfo = parts.netloc.rpartition("@")[0] or None
        path = parts.path.rstrip("/")
        object.__setattr__(self, "connect", urlunsplit((parts.scheme, netloc, path, "", "")))
        object.__setattr__(self, "query", dict(parse_qsl(parts.query, keep_blank_values=True)))
        object.__setattr__(self, "basic_auth", unquote(userinfo) if userinfo else None)
        if userinfo:
            remember_secret(unquote(userinfo).partition(":")[2] or unquote(userinfo))
        for name, value in self.query.items():
            if _CREDENTIAL_PARAM.search(name):
                remember_secret(value)

    @property
    def shown(self) -> str:
        """The URL as it may be recorded: credentials as ``***``."""
        return redact_url(self.given if self.query else self.given.rstrip("/"))

    def auth_headers(self) -> dict[str, str]:
        """``Authorization: Basic ...`` for credentials in the URL, else nothing."""
        if self.basic_auth is None:
            return {}
        token = base64.b64encode(self.basic_auth.encode()).decode("ascii")
        remember_secret(token)
        return {"Authorization": f"Basic {token}"}

    @property
    def scope(self) -> str:
        """The URL without its credentials: which endpoint this is, for the cache key."""
        public = [(k, v) for k, v in self.query.items() if not _CREDENTIAL_PARAM.search(k)]
        return self.connect + (f"?{urlencode(public)}" if public else "")


def redact_url(text: str) -> str:
    """``text`` with the credentials of every URL in it as ``***`` (user, password, key params)."""
    text = _URL_CREDENTIALS.sub(
        lambda m: m["scheme"] + (f"{MASK}:{MASK}" if ":" in m["userinfo"] else MASK) + "@", text
    )
    return _QUERY_PARAM.sub(
        lambda m: (
            m["lead"]
            + m["name"]
            + "="
            + (MASK if _CREDENTIAL_PARAM.search(m["name"]) else m["value"])
        ),
        text,
    )


def redact_urls(urls: str | Sequence[str] | None) -> str | list[str] | None:
    """Base URL(s) as they may be recorded: one, or a list of replicas, credentials as ``***``."""
    if urls is None or isinstance(urls, str):
        return None if urls is None else redact_url(urls)
    return [redact_url(url) for url in urls]


def read_headers(headers: Mapping[str, str] | None, *, need_values: bool = True) -> dict[str, str]:
    """Extra request headers, ``$NAME`` / ``${NAME}`` values read from the environment.

    Every value is remembered as a secret (redacted from anything written).
    ``need_values=False`` (runs that send nothing) skips the environment.

    Raises
    ------
    UsageError
        A header name that is not an HTTP token.
    MissingAPIKeyError
        A variable a value names is unset.
    """
    resolved: dict[str, str] = {}
    for name, value in (headers or {}).items():
        if not _HEADER_NAME.match(name):
            raise UsageError(f"--header: '{name}' is not a header name (letters, digits, -)")
        reference = _ENV_REFERENCE.match(value)
        if reference is not None:
            if not need_values:
                continue
            value = read_api_key(
                reference["braced"] or reference["bare"], provider=f"header {name}"
            )
        remember_secret(value)
        resolved[name] = value
    return resolved


def public_headers(headers: Mapping[str, str] | None) -> dict[str, str] | None:
    """Headers as they may be recorded: ``$NAME`` references kept, every other value ``***``."""
    if not headers:
        return None
    return {name: value if _ENV_REFERENCE.match(value) else MASK for name, value in headers.items()}


def redact_command(argv: Sequence[str]) -> list[str]:
    """A command line as it may be recorded: URL credentials and literal header values masked."""
    shown: list[str] = []
    header_next = False
    for arg in argv:
        if header_next or arg.startswith("--header="):
            prefix = "--header=" if arg.startswith("--header=") else ""
            name, equals, value = arg.removeprefix(prefix).partition("=")
            if equals and not _ENV_REFERENCE.match(value):
                arg = f"{prefix}{name}={MASK}"
        header_next = arg == "--header"
        shown.append(redact(redact_url(arg)))
    return shown
