"""What a run will cost before it runs, and a budget it cannot overspend.

- **Prices** come from ``data/prices.yaml`` (US dollars per million input and
  output tokens for well-known hosted models; prices change, so check them),
  overridden by a user file of the same shape (``--prices FILE`` or
  ``BIASAUDIT_PRICES``). ``sim/``, ``local/`` and self-hosted servers cost 0.
- **Token estimates**: input tokens are the prompt's characters divided by 4,
  rounded up (OpenAI's rule of thumb for English text), plus 4 per chat
  message and 3 to prime the reply (the chat format's overhead); output tokens
  are the request's ``max_tokens`` (``DEFAULT_OUTPUT_TOKENS`` when unset) times
  its choices ``n``, plus a reasoning model's allowance for its hidden
  reasoning per call, an upper bound. Answers already in the cache are free.
- **Budget**: :class:`BudgetedProvider` wraps a provider, adds up the cost of
  the tokens each answer reports, and once the spend reaches the budget
  refuses every later request with :class:`BudgetExceededError`, a fatal
  error: the engine stops the run (marked ``aborted``, every unanswered input
  listed) and every answer that arrived is already cached, so a rerun with a
  larger budget pays only for the rest. Requests already in flight when the
  budget is reached still finish, so a run can overshoot by up to
  ``concurrency`` answers.
- **Batches** (``--batch``) cost half: the estimate and the spend count half
  price. A batch is submitted whole, so with ``--batch`` the budget is held by
  the estimate, checked before anything is submitted (the output estimate is
  an upper bound).
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterable, Iterator, Sequence, Set
from dataclasses import dataclass, field, replace
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from biasaudit.errors import BudgetExceededError, ProviderError, UsageError
from biasaudit.providers import KNOWN_PROVIDERS, ModelRequest, ModelResponse, Provider
from biasaudit.providers._batch_api import BatchAPI
from biasaudit.providers._types import DEFAULT_OUTPUT_TOKENS, Usage, estimate_tokens
from biasaudit.spec import AuditSpec
from biasaudit.textfiles import load_yaml

__all__ = [
    "BATCH_DISCOUNT",
    "DEFAULT_OUTPUT_TOKENS",
    "PLAN_CHUNK_REQUESTS",
    "PLAN_CHUNK_TOKENS",
    "PRICES_ENV",
    "PRICES_PATH",
    "BudgetExceededError",
    "BudgetedProvider",
    "CostEstimate",
    "ModelPrice",
    "PriceTable",
    "estimate_cost",
    "estimate_spec_cost",
    "estimate_tokens",
    "load_prices",
]

PRICES_PATH = Path(__file__).parent / "data" / "prices.yaml"
PRICES_ENV = "BIASAUDIT_PRICES"
BATCH_DISCOUNT = 0.5  # OpenAI's Batch API and Anthropic's Message Batches: half price
_FREE_PROVIDERS = frozenset({"sim", "local"})
_SNAPSHOT_SUFFIX = re.compile(r"-(latest|\d{4}-\d{2}-\d{2}|\d{8})$")


class ModelPrice(BaseModel):
    """US dollars per million tokens."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: float = Field(ge=0.0)
    output: float = Field(ge=0.0)

    def cost(self, input_tokens: float, output_tokens: float) -> float:
        return (input_tokens * self.input + output_tokens * self.output) / 1e6


class _PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    checked: str | None = None
    prices: dict[str, ModelPrice]


@dataclass(frozen=True)
class PriceTable:
    """Prices by ``provider/model``; the user's entries over the shipped ones."""

    shipped: dict[str, ModelPrice]
    user: dict[str, ModelPrice]
    sources: tuple[str, ...]

    def price(
        self, model_id: str, *, base_url: str | Sequence[str] | None = None
    ) -> ModelPrice | None:
        """The user's price of ``model_id``, else 0 when free, else the shipped price or None."""
        found = _lookup(self.user, model_id)
        if found is not None:
            return found
        if _is_free(model_id, base_url):
            return ModelPrice(input=0.0, output=0.0)
        return _lookup(self.shipped, model_id)


def load_prices(path: Path | None = None) -> PriceTable:
    """The shipped price table, with ``path`` (or ``$BIASAUDIT_PRICES``) over it.

    Raises
    ------
    UsageError
        The user file cannot be read or has a bad entry (named).
    """
    shipped = _read_price_file(PRICES_PATH)
    chosen = path or (Path(os.environ[PRICES_ENV]) if os.environ.get(PRICES_ENV) else None)
    user = _read_price_file(chosen) if chosen is not None else {}
    sources = (str(PRICES_PATH),) + ((str(chosen),) if chosen is not None else ())
    return PriceTable(shipped, user, sources)


def _read_price_file(path: Path) -> dict[str, ModelPrice]:
    data = load_yaml(path, "prices")
    try:
        return _PriceFile.model_validate(data).prices
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise UsageError(
            f"prices {path}, field '{where}': {first['msg']} "
            "(expected prices: {provider/model: {input: USD, output: USD}} per million tokens)"
        ) from None


def _lookup(table: dict[str, ModelPrice], model_id: str) -> ModelPrice | None:
    if model_id in table:
        return table[model_id]
    base = _SNAPSHOT_SUFFIX.sub("", model_id)
    return table.get(base)


def _is_free(model_id: str, base_url: str | Sequence[str] | None) -> bool:
    """sim/, local/ and self-hosted servers: known names without a fixed host, or unknown ones."""
    provider = model_id.partition("/")[0]
    if provider in _FREE_PROVIDERS:
        return True
    info = KNOWN_PROVIDERS.get(provider)
    return (info is None and base_url is not None) or (info is not None and info.base_url is None)


@dataclass(frozen=True)
class CostEstimate:
    """What a run would send and cost.

    Attributes
    ----------
    model:
        ``provider/model``.
    requests:
        Calls the engine would make (one per choice where the endpoint has no ``n``).
    cache_hits:
        Of those, answers already cached (free).
    repeats:
        Of the others, calls identical to an earlier one (one cache key): the engine
        sends each once, and the copies share its answer.
    input_tokens, output_tokens:
        Estimated tokens of the calls to send (output: an upper bound).
    price:
        The model's price, ``None`` when the price table does not know it.
    free_reason:
        Why the run costs nothing (sim, local, self-hosted), if it does not.
    cache_path:
        The cache the hits were looked up in.
    why:
        Where the number of calls comes from, when it is not one call per prompt.
    """

    model: str
    requests: int
    cache_hits: int
    input_tokens: int
    output_tokens: int
    price: ModelPrice | None
    free_reason: str | None = None
    cache_path: str | None = None
    why: str | None = None
    batch: bool = False
    reasoning_tokens: int = 0
    repeats: int = 0

    @property
    def to_send(self) -> int:
        return self.requests - self.cache_hits - self.repeats

    @property
    def cost(self) -> float | None:
        """Estimated US dollars, ``None`` when the price is unknown."""
        if self.price is None:
            return None
        full = self.price.cost(self.input_tokens, self.output_tokens)
        return full * BATCH_DISCOUNT if self.batch else full

    def lines(self) -> list[str]:
        """The dry run's report."""
        where = f" {self.cache_path}" if self.cache_path else ""
        lines = [
            f"dry run of {self.model}: {self.requests} requests, {self.cache_hits} in the cache"
            f"{where} (free), "
            + (f"{self.repeats} the same as another (sent once), " if self.repeats else "")
            + f"{self.to_send} to send",
            *([f"why so many: {self.why}"] if self.why else []),
            f"estimated tokens to send: {self.input_tokens} input (prompt characters / 4 + "
            f"chat overhead), at most {self.output_tokens} output (max_tokens x n"
            + (
                f", and up to {self.reasoning_tokens} tokens of reasoning per request)"
                if self.reasoning_tokens
                else ")"
            ),
        ]
        if self.free_reason is not None:
            lines.append(f"estimated cost: $0.00 ({self.free_reason})")
        elif self.price is None:
            lines.append(
                f"estimated cost: unknown (no price for {self.model}; give one with --prices FILE)"
            )
        else:
            half = " through batches, at half" if self.batch else ""
            lines.append(
                f"estimated cost: ${self.cost:.4f}{half} at ${self.price.input:g} input / "
                f"${self.price.output:g} output per million tokens (prices change: check them)"
            )
        return lines


PLAN_CHUNK_REQUESTS = 2_000
PLAN_CHUNK_TOKENS = 4_000_000
"""A dry run plans, keys, looks up and counts requests this many at a time, or fewer
once their prompts reach this many estimated tokens (about 16 MB of text): it holds
one chunk, never the run."""


@dataclass
class _Tally:
    """Running totals of an estimate, added to chunk by chunk."""

    requests: int = 0
    calls: int = 0
    hits: int = 0
    to_send: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    answers: int = 0
    most_n: int = 1
    logprobs: bool = False
    prompts: set[str] = field(default_factory=set)
    seen: set[str] = field(default_factory=set)

    def add(
        self,
        requests: Sequence[ModelRequest],
        calls: Sequence[ModelRequest],
        keys: Sequence[str] | None = None,
        cached: Set[str] = frozenset(),
    ) -> None:
        """Count ``calls`` (the engine's calls for ``requests``): a call whose key is
        cached is free, one whose key came before is sent once (the engine sends it
        once), the others are sent, their tokens estimated."""
        self.requests += len(requests)
        for request in requests:
            n = request.params.n or 1
            self.answers += n
            self.most_n = max(self.most_n, n)
            self.logprobs = self.logprobs or request.params.wants_logprobs
            self.prompts.add(request.id)  # a prompt's requests share its id
        self.calls += len(calls)
        # Replicates of one prompt share its messages: each text is counted once (the
        # chunk's objects are alive, so their ids cannot be reused within it).
        counted: dict[tuple[int, int | None, int], tuple[int, int]] = {}
        for i, call in enumerate(calls):
            if keys is not None:
                if keys[i] in cached:
                    self.hits += 1
                    continue
                if keys[i] in self.seen:
                    continue
                self.seen.add(keys[i])
            self.to_send += 1
            shape = (id(call.messages if call.messages is not None else call.prompt),
                     call.params.max_tokens, call.params.n or 1)  # fmt: skip
            found = counted.get(shape)
            if found is None:
                found = counted[shape] = estimate_tokens(call)
            self.input_tokens += found[0]
            self.output_tokens += found[1]

    def estimate(self, provider: Provider, prices: PriceTable) -> CostEstimate:
        reasoning = provider.capabilities.reasoning_tokens or 0
        model_id = provider.model_id
        price = prices.price(model_id, base_url=provider.base_url)
        reason = None
        if _is_free(model_id, provider.base_url) and price == ModelPrice(input=0.0, output=0.0):
            reason = "simulated model" if provider.simulated else "local or self-hosted model"
        return CostEstimate(
            model=model_id,
            requests=self.calls,
            cache_hits=self.hits,
            repeats=self.calls - self.hits - self.to_send,
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens + reasoning * self.to_send,
            price=price,
            free_reason=reason,
            reasoning_tokens=reasoning,
        )


def estimate_cost(
    provider: Provider,
    requests: Sequence[ModelRequest],
    *,
    prices: PriceTable,
    cached_keys: set[str] | None = None,
    units: Sequence[ModelRequest] | None = None,
    key: Callable[[ModelRequest], str] | None = None,
    keys: Sequence[str] | None = None,
) -> CostEstimate:
    """Estimate the cost of sending ``units`` (the engine's calls) of ``requests``.

    ``key`` computes a call's cache key (or ``keys`` gives them, in the calls' order)
    and ``cached_keys`` holds the keys in the cache; calls found there are free, and
    so are calls identical to an earlier one (one key: the engine sends it once).
    """
    calls = list(units if units is not None else requests)
    if keys is None and key is not None:
        keys = [key(call) for call in calls]
    tally = _Tally()
    tally.add(requests, calls, keys, cached_keys or frozenset())
    return tally.estimate(provider, prices)


class BudgetedProvider(Provider):
    """A provider that stops sending once its answers have cost ``max_cost`` dollars.

    The cost of an answer is that of the tokens its endpoint reports, or of
    the estimate (:func:`estimate_tokens`) when it reports none. Runs in one
    process (``spec`` is ``None``): worker processes would each spend apart.
    """

    def __init__(self, inner: Provider, price: ModelPrice, max_cost: float) -> None:
        self.inner, self.price, self.max_cost = inner, price, max_cost
        self.name, self.model, self.base_url = inner.name, inner.model, inner.base_url
        self.capabilities, self.simulated = inner.capabilities, inner.simulated
        self.plugin = inner.plugin
        self.spec = None
        self.spent = 0.0

    async def complete(self, request: ModelRequest, *, timeout: float) -> ModelResponse:
        if self.spent >= self.max_cost:
            raise BudgetExceededError(
                f"spent ${self.spent:.4f} of the --max-cost ${self.max_cost:g} budget; "
                "the answers received are cached, so a rerun with a larger budget pays "
                "only for the rest"
            )
        response = await self.inner.complete(request, timeout=timeout)
        self.spent += self._cost(request, response.usage)
        return response

    def _cost(self, request: ModelRequest, usage: Usage) -> float:
        if usage.input_tokens or usage.output_tokens:
            return self.price.cost(usage.input_tokens, usage.output_tokens)
        return self.price.cost(*estimate_tokens(request))

    def classify(self, error: BaseException) -> ProviderError:
        if isinstance(error, BudgetExceededError):
            return error
        return self.inner.classify(error)

    def check(self, request: ModelRequest) -> None:
        self.inner.check(request)

    def batch_api(self) -> BatchAPI | None:
        """The inner provider's batch API, its answers counted at half price."""
        api = self.inner.batch_api()
        if api is not None:
            api.on_answer = self._charge_batch
        return api

    def _charge_batch(self, request: ModelRequest, response: ModelResponse) -> None:
        self.spent += self._cost(request, response.usage) * BATCH_DISCOUNT

    async def aclose(self) -> None:
        await self.inner.aclose()

    def describe(self) -> dict[str, object]:
        return {**self.inner.describe(), "max_cost_usd": self.max_cost}

    def run_report(self) -> dict[str, object]:
        return self.inner.run_report()


def estimate_spec_cost(spec: AuditSpec, provider: Provider, prices: PriceTable) -> CostEstimate:
    """Estimate what running ``spec`` against ``provider`` would send and cost; sends nothing.

    The plan is read as it is made, a chunk at a time (:data:`PLAN_CHUNK_REQUESTS`,
    :data:`PLAN_CHUNK_TOKENS`), each chunk keyed and looked up in the cache and
    then dropped: memory holds one chunk's prompts and every key seen (to count a
    call identical to an earlier one once), not every prompt of the run."""
    from biasaudit.engine.core import Engine
    from biasaudit.kinds.registry import plan_requests
    from biasaudit.store.cache import ResponseCache

    engine = Engine(provider, None, spec.engine_settings())
    tally = _Tally()
    with contextlib.ExitStack() as stack:
        store = None
        if spec.cache_path.is_file() and not spec.fresh:
            store = stack.enter_context(ResponseCache(spec.cache_path, readonly=True))
        for chunk in _chunks(plan_requests(spec, provider)):
            calls = engine.calls(chunk)
            keys = [engine.key(call) for call in calls]
            cached = store.keys_present(keys) if store is not None else set()
            tally.add(chunk, calls, keys, cached)
    estimate = replace(tally.estimate(provider, prices), cache_path=str(spec.cache_path),
                       why=_why(spec, tally))  # fmt: skip
    if spec.batch and provider.batch_api() is not None:
        estimate = replace(estimate, batch=True)
    return estimate


def _chunks(requests: Iterable[ModelRequest]) -> Iterator[list[ModelRequest]]:
    """``requests`` in lists of at most :data:`PLAN_CHUNK_REQUESTS`, each cut once its
    prompts pass :data:`PLAN_CHUNK_TOKENS` estimated tokens."""
    chunk: list[ModelRequest] = []
    tokens = 0
    for request in requests:
        chunk.append(request)
        tokens += estimate_tokens(request)[0]
        if len(chunk) >= PLAN_CHUNK_REQUESTS or tokens >= PLAN_CHUNK_TOKENS:
            yield chunk
            chunk, tokens = [], 0
    if chunk:
        yield chunk


def _why(spec: AuditSpec, tally: _Tally) -> str:
    """Where the calls come from, where a prompt costs more than one call (sampled answers
    at an endpoint without logprobs or ``n``), with the option that lowers it; else ""."""
    if tally.most_n == 1 and tally.calls == tally.requests:
        return ""
    prompts = len(tally.prompts) or 1
    answers = tally.answers / prompts
    knob = next((f"--{name} N" for name in ("samples", "replicates")
                 if name in type(spec).model_fields), None)  # fmt: skip
    text = f"{prompts} prompts x {answers:g} sampled answers each"
    calls = tally.requests / prompts
    if tally.calls > tally.requests:
        per = tally.calls / prompts
        text += f"; this endpoint has no n, so each answer is a call of its own ({per:g} a prompt)"
    elif calls == 1:
        text += ", asked for in one call each (n)"
    else:
        text += f", asked for in {calls:g} calls each (n = {tally.most_n} at most)"
    if not tally.logprobs:
        text += " (sampled answers stand in for logprobs: the endpoint gives none, or sampling "
        text += "was asked for)"
    return text + (f"; {knob} lowers it" if knob else "")
