"""What the two SDK-backed providers share: their HTTP client, lifecycle and network errors."""

from __future__ import annotations

import socket
from typing import Any

from ..errors import EndpointUnreachableError, ProviderError, TransientProviderError
from ..secrets import redact
from ._base import Provider

__all__ = ["SDKProvider", "connection_error", "http_module"]


class SDKProvider(Provider):
    """A provider that talks through an official SDK client, built on first use.

    Subclasses implement :meth:`_new_client`; this class keeps the client,
    hands the SDK an aiohttp transport pooled for the engine's concurrency, and
    closes it in :meth:`aclose`.
    """

    _client: Any = None
    _max_connections: int = 64

    def _new_client(self, http_client: Any) -> Any:
        raise NotImplementedError

    def _sdk(self) -> Any:
        if self._client is None:
            self._client = self._new_client(_aiohttp_client(self._max_connections))
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def http_module() -> Any:
    """The HTTP library the installed SDKs are built on (httpx2, or httpx before it)."""
    try:
        import httpx2

        return httpx2
    except ImportError:  # SDK releases before the move to httpx2
        import httpx

        return httpx


def _aiohttp_client(max_connections: int) -> Any:
    """The SDK's aiohttp transport, pooled for our concurrency.

    Measured here it serves about twice the requests per second of the SDK's
    default httpx transport at 128 concurrent requests (bench/RESULTS.md).
    """
    limits = http_module().Limits(
        max_connections=max_connections, max_keepalive_connections=max_connections
    )
    import openai  # both SDKs ship the same client classes; openai's is always installed

    try:
        return openai.DefaultAioHttpClient(limits=limits)
    except RuntimeError:  # installed without the aiohttp extra
        return openai.DefaultAsyncHttpxClient(limits=limits)


def connection_error(base_url: str, error: BaseException) -> ProviderError:
    """Tell a server that is not there from one that is slow or dropped a link.

    The SDKs' aiohttp transport reports a refused connection as a connect
    *timeout*, so the whole cause chain is searched for the refusal.
    """
    chain: list[BaseException] = []
    link: BaseException | None = error
    while link is not None and len(chain) < 8:
        chain.append(link)
        link = link.__cause__ or link.__context__
    text = " | ".join(f"{type(e).__name__}: {e}" for e in chain[1:] or chain)
    if any(isinstance(e, ConnectionRefusedError | socket.gaierror) for e in chain):
        return EndpointUnreachableError(redact(f"cannot reach {base_url} ({text})"))
    if any(isinstance(e, TimeoutError) or "Timeout" in type(e).__name__ for e in chain):
        return TransientProviderError(f"timed out talking to {base_url}")
    return TransientProviderError(redact(f"connection to {base_url} failed ({text})"))
