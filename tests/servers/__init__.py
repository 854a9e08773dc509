"""Loopback HTTP servers speaking the real OpenAI and Anthropic wire formats,
for tests and benchmarks (no real provider is ever called).

    with OpenAIServer() as srv:
        client = openai.AsyncOpenAI(base_url=srv.base_url, api_key="test")

Exports are resolved lazily (PEP 562) so `python -m tests.servers.openai_server`
does not import its own module twice (runpy warns when a package __init__
already imported the module being run).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .anthropic_server import AnthropicServer
    from .base import RecordedRequest
    from .faults import Fault
    from .openai_server import OpenAIServer
    from .responders import DEFAULT_TOP_LOGPROBS, Choice, Responder, default_responder, request_key

_EXPORTS = {
    "OpenAIServer": ".openai_server",
    "AnthropicServer": ".anthropic_server",
    "Fault": ".faults",
    "Choice": ".responders",
    "Responder": ".responders",
    "DEFAULT_TOP_LOGPROBS": ".responders",
    "default_responder": ".responders",
    "request_key": ".responders",
    "RecordedRequest": ".base",
}

__all__ = [
    "DEFAULT_TOP_LOGPROBS",
    "AnthropicServer",
    "Choice",
    "Fault",
    "OpenAIServer",
    "RecordedRequest",
    "Responder",
    "default_responder",
    "request_key",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)
