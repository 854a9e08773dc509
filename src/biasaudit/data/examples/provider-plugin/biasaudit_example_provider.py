"""An example biasaudit provider plugin (see README.md beside it).

Two providers, one of each sort a plugin can declare:

- ``myhost/<model>``: an OpenAI-compatible host, declared by data alone: where it
  is, which variable holds its key, and what its endpoint can do. biasaudit's own
  OpenAI-compatible provider sends the requests.
- ``shout/<anything>``: a provider of its own (``build``), here an offline one that
  answers every prompt with its last message in capitals. A real plugin would call
  its API in ``complete`` and turn what that API raises into biasaudit's provider
  errors in ``classify`` (the engine retries, waits or stops on them).
"""

from __future__ import annotations

from typing import Any

from biasaudit.providers import (
    Capabilities,
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderPlugin,
    Usage,
)


class ShoutProvider(Provider):
    """Answers each request with its last message (or prompt), upper-cased."""

    def __init__(self, model: str) -> None:
        self.name, self.model, self.base_url = "shout", model, None
        # No logprobs: audits sample replicates, and ask for n answers per call.
        self.capabilities = Capabilities(logprobs=False, max_top_logprobs=0, completions=True)

    @property
    def cache_scope(self) -> str:
        return "shout-v1"  # answers of this version are cached apart from a later one's

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        if request.messages is not None:
            text = str(request.messages[-1].get("content", ""))
        else:
            text = request.prompt or ""
        answer = text.upper()
        n = request.params.n or 1
        return ModelResponse(
            texts=(answer,) * n,
            finish_reasons=("stop",) * n,
            model_version="shout-v1",
            usage=Usage(input_tokens=len(text.split()), output_tokens=n * len(answer.split())),
        )


def _build_shout(model: str, **_endpoint: Any) -> Provider:
    # The endpoint's arguments (base_url, api_key, max_connections, headers) are
    # offered to every plugin; an offline provider needs none of them.
    return ShoutProvider(model)


SHOUT = ProviderPlugin(
    build=_build_shout,
    capabilities=Capabilities(logprobs=False, max_top_logprobs=0),
    note="offline: answers with the prompt in capitals",
)

MYHOST = ProviderPlugin(
    base_url="http://127.0.0.1:8000/v1",
    key_env="MYHOST_API_KEY",
    capabilities=Capabilities(max_top_logprobs=5, n=False),
    note="an OpenAI-compatible host, declared",
)
