"""The generation probe: replicate long-form texts of one prompt, read for their pronouns.

Lum et al., "Bias in Language Models: Beyond Trick Tests and Towards RUTEd
Evaluation" (ACL 2025) sample many generations of each prompt (a bedtime
story, a user persona, an ESL exercise) and label each by the gender its
third-person pronouns refer to (:func:`~biasaudit.probes.classify_pronouns`).

Replicates are asked for in one of two ways, each request cached on its own:

- where the endpoint takes ``n``, one request asks for up to
  :data:`MAX_CHOICES_PER_REQUEST` choices (``replicate`` numbers the
  request, so 300 replicates are three requests);
- elsewhere, one request per replicate, ``replicate`` being its index, so a
  later run with more replicates reuses the ones already cached.

Where the endpoint takes a seed, each request carries its own, derived from
the audit's seed and the replicate number: seeded endpoints would otherwise
return one text as every replicate.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from biasaudit.errors import UsageError
from biasaudit.probes._pronouns import PronounCount, classify_pronouns
from biasaudit.providers import Capabilities, ModelRequest, ModelResponse, SamplingParams

__all__ = ["MAX_CHOICES_PER_REQUEST", "GenerationProbe", "replicate_requests"]

MAX_CHOICES_PER_REQUEST = 128  # OpenAI's ceiling on n, and SamplingParams'


def replicate_seed(seed: int, replicate: int) -> int:
    """A seed of its own for each replicate request, stable across runs."""
    digest = hashlib.sha256(f"{seed}:{replicate}".encode()).digest()
    return int.from_bytes(digest[:4], "big") >> 1  # fits a signed 32-bit integer


def replicate_requests(
    request_id: str,
    *,
    params: SamplingParams,
    replicates: int,
    choices_per_request: int,
    seed: int | None,
    messages: Sequence[dict[str, Any]] | None = None,
    prompt: str | None = None,
) -> list[ModelRequest]:
    """The requests that together ask for ``replicates`` texts of one prompt.

    Request k asks for choices k*c .. k*c + c - 1 (c = ``choices_per_request``;
    the last one for what is left), with ``replicate`` = k.
    """
    if replicates < 1 or choices_per_request < 1:
        raise UsageError("replicates and choices per request must be at least 1")
    found = []
    for number, start in enumerate(range(0, replicates, choices_per_request)):
        size = min(choices_per_request, replicates - start)
        update: dict[str, Any] = {"n": size if size > 1 else None}
        if seed is not None:
            update["seed"] = replicate_seed(seed, number)
        found.append(
            ModelRequest(
                id=request_id,
                messages=tuple(messages) if messages is not None else None,
                prompt=prompt,
                params=params.model_copy(update=update),
                replicate=number,
            )
        )
    return found


def choices_for(capabilities: Capabilities, replicates: int, most: int | None = None) -> int:
    """Choices per request: all replicates at once (up to the ceiling, or ``most``) where
    ``n`` works."""
    ceiling = min(MAX_CHOICES_PER_REQUEST, most or MAX_CHOICES_PER_REQUEST)
    return min(replicates, ceiling) if capabilities.n else 1


class GenerationProbe:
    """Asks for replicate texts of a prompt and reads their pronouns; see the module docstring.

    Parameters
    ----------
    max_tokens:
        Longest text asked for.
    temperature:
        Sampling temperature of every replicate.
    replicates:
        Texts per prompt.
    choices_per_request:
        ``n`` of each request (1: one request per replicate).
    seed:
        The audit's seed, sent (per request) to endpoints that take one; None sends none.
    """

    kind = "generation"

    def __init__(
        self,
        *,
        max_tokens: int,
        temperature: float = 1.0,
        replicates: int = 30,
        choices_per_request: int = 1,
        seed: int | None = None,
    ) -> None:
        self.max_tokens, self.temperature = max_tokens, temperature
        self.replicates, self.choices_per_request, self.seed = replicates, choices_per_request, seed

    @classmethod
    def for_endpoint(
        cls,
        capabilities: Capabilities,
        *,
        max_tokens: int,
        temperature: float = 1.0,
        replicates: int = 30,
        seed: int | None = None,
        per_request: int | None = None,
    ) -> GenerationProbe:
        """The probe for an endpoint: ``n`` choices per request (at most ``per_request``)
        and a seed where it takes them."""
        return cls(
            max_tokens=max_tokens,
            temperature=temperature,
            replicates=replicates,
            choices_per_request=choices_for(capabilities, replicates, per_request),
            seed=seed if capabilities.seed else None,
        )

    @property
    def params(self) -> SamplingParams:
        """Sampling parameters of every request (``n`` and ``seed`` are set per request)."""
        return SamplingParams(max_tokens=self.max_tokens, temperature=self.temperature)

    def requests(self, request_id: str, messages: Sequence[dict[str, Any]]) -> list[ModelRequest]:
        """The requests that ask for every replicate of one prompt."""
        return replicate_requests(
            request_id,
            messages=messages,
            params=self.params,
            replicates=self.replicates,
            choices_per_request=self.choices_per_request,
            seed=self.seed,
        )

    def first_replicate(self, request: ModelRequest) -> int:
        """The index of the first replicate a request asked for."""
        return request.replicate * self.choices_per_request

    def read(self, response: ModelResponse) -> list[PronounCount]:
        """The pronoun count of each text of a response."""
        return [classify_pronouns(text) for text in response.texts]
