"""The options of every run that sends requests, declared once: the model and its
endpoint, how hard to push it, and where answers are kept.

An audit's spec (:class:`biasaudit.spec.RunSpec`) and ``biasaudit fanout``
(:class:`biasaudit.engine.fanout.FanoutOptions`) both are :class:`RunOptions`;
the command line's options are generated from these fields (their bounds,
defaults and descriptions), so each is written here only.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from typing import Annotated, Any, Literal, Self, cast, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticUndefined

from biasaudit.engine.types import BOUNDS, MAX_TIMEOUT_S, EngineSettings
from biasaudit.providers import Provider, resolve_model
from biasaudit.secrets import public_headers, redact_urls

__all__ = ["MAX_TIMEOUT_S", "Flag", "RunOptions", "header_pairs"]


@dataclass(frozen=True)
class Flag:
    """How a field is spelt on the command line where ``--field-name`` is not enough
    (kept in the field's ``Annotated`` metadata; the command line reads it)."""

    name: str | None = None
    """The option's name, e.g. ``--header`` for ``headers``."""
    short: str | None = None
    """A one-letter alias, e.g. ``-m``."""
    metavar: str | None = None
    multiple: bool = False
    """Given again for each value; the field gets the list."""
    command_line: bool = True
    """False: set in a spec or from Python only."""


def header_pairs(pairs: list[str] | tuple[str, ...]) -> dict[str, str] | None:
    """``NAME=VALUE`` strings (``--header`` given once per header) as a mapping.

    Raises
    ------
    ValueError
        A string without ``=`` or without a name.
    """
    headers: dict[str, str] = {}
    for pair in pairs:
        name, equals, value = str(pair).partition("=")
        if not equals or not name.strip():
            raise ValueError(f"'{name}=...' expected NAME=VALUE, e.g. 'api-key=$AZURE_KEY'")
        headers[name.strip()] = value
    return headers or None


class ModelEntry(BaseModel):
    """One of a spec's ``models`` where it needs its own endpoint: a model behind its
    own server (``base_url``), or with its own key variable."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="provider/model.")
    base_url: str | None = Field(None, description="Its server's API root.")
    api_key_env: str | None = Field(None, description="The variable holding its key.")

    @field_serializer("base_url", when_used="json")
    def _masked_url(self, url: str | None) -> str | list[str] | None:
        return redact_urls(url)


FieldRole = Literal["model", "sending", "storing", "computing", "sizing"]
"""What a spec field says about a run, declared on the field (``json_schema_extra``),
where it is not what the run asked (every other field): which model (``model``), how
the requests were sent (``sending``: endpoint, key, limits, retries, batches) or stored
(``storing``), how the figures were computed from the same answers (``computing``: the
bootstrap's replicates), or how much of an audit a run asks (``sizing``). The study,
``compare`` and a history's spec identity read these marks, never a list of names."""

MODEL_FIELD: dict[str, Any] = {"role": "model"}
SENDING_FIELD: dict[str, Any] = {"role": "sending"}
STORING_FIELD: dict[str, Any] = {"role": "storing"}
COMPUTING_FIELD: dict[str, Any] = {"role": "computing"}
SIZING_FIELD: dict[str, Any] = {"role": "sizing"}


def role_field(role: FieldRole, default: Any = PydanticUndefined, /, **field: Any) -> Any:
    """A spec field (pydantic's ``Field(default, **field)``) declared in ``role``."""
    return Field(default, json_schema_extra={"role": role}, **field)


model_field = partial(role_field, "model")
sending_field = partial(role_field, "sending")
storing_field = partial(role_field, "storing")
computing_field = partial(role_field, "computing")
sizing_field = partial(role_field, "sizing")
"""A field that says how much of an audit a run asks (see :data:`FieldRole`)."""


def field_role(field: Any) -> FieldRole | None:
    """A field's declared role (:data:`FieldRole`); None: it is part of what was asked."""
    extra = getattr(field, "json_schema_extra", None)
    role = extra.get("role") if isinstance(extra, dict) else None
    return cast("FieldRole", role) if role in get_args(FieldRole) else None


def fields_in_roles(spec_class: type[BaseModel], *roles: FieldRole) -> frozenset[str]:
    """The names of ``spec_class``'s fields declared in one of ``roles``."""
    return frozenset(name for name, field in spec_class.model_fields.items()
                     if field_role(field) in roles)  # fmt: skip


class RunOptions(BaseModel):
    """The model, its endpoint, the engine's settings and the storage of a run."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    model: Annotated[str, Flag(short="-m", multiple=True)] = model_field(
        description="provider/model, e.g. openai/gpt-4o-mini, sim/biased; again for each "
        "model to audit: the same audit on each, at once, then the study across them."
    )
    models: Annotated[tuple[str | ModelEntry, ...], Flag(command_line=False)] = model_field(
        (),
        description="Several models (instead of model): the same audit on each, at once, "
        "one run directory each, then the study across them. Each is provider/model, or "
        "{model, base_url, api_key_env} for a model with an endpoint of its own.",
    )
    base_url: Annotated[str | tuple[str, ...] | None, Flag(multiple=True)] = sending_field(
        None,
        description="API root of an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1; "
        "again for each replica of the same model.",
    )
    api_key_env: Annotated[str | None, Flag(metavar="NAME")] = sending_field(
        None,
        description="Environment variable holding the API key [default: the provider's, "
        "e.g. OPENAI_API_KEY; none for self-hosted servers].",
    )
    headers: Annotated[
        dict[str, str] | None, Flag(name="--header", metavar="NAME=VALUE", multiple=True)
    ] = sending_field(
        None,
        description="Send this header with every request, as NAME=VALUE (a mapping in a "
        "spec); a value $VAR is read from the environment (--header 'api-key=$AZURE_KEY'). "
        "Recorded masked. Again for each header.",
    )
    concurrency: int = sending_field(
        EngineSettings.concurrency,
        **BOUNDS["concurrency"],
        description="Most requests in flight; lowered automatically on rate limits.",
    )
    rpm: float | None = sending_field(
        EngineSettings.rpm,
        **BOUNDS["rpm"],
        allow_inf_nan=False,
        description="Most requests per minute.",
    )
    n_ctx: Annotated[int | None, Flag(name="--n-ctx", metavar="TOKENS")] = sending_field(
        None,
        ge=256,
        le=1 << 20,
        description="local/ models: the server's context in tokens [default: the model's own].",
    )
    n_threads: Annotated[int | None, Flag(name="--threads")] = sending_field(
        None,
        ge=1,
        le=1024,
        description="local/ models: threads per server [default: the machine's cores, shared "
        "among the servers].",
    )
    parallel: int = sending_field(
        1,
        ge=1,
        le=64,
        description="local/ models: servers to start, each answering one request at a time "
        "(each holds the model in memory).",
    )
    tpm: float | None = sending_field(
        EngineSettings.tpm,
        **BOUNDS["tpm"],
        allow_inf_nan=False,
        description="Most tokens per minute, each request counted before it is sent (its "
        "prompt's characters / 4 and its max_tokens): providers limit both.",
    )
    max_retries: int = sending_field(
        EngineSettings.max_retries,
        **BOUNDS["max_retries"],
        description="Retries of a failed request (transient errors only).",
    )
    timeout: float = sending_field(
        EngineSettings.timeout,
        **BOUNDS["timeout"],
        allow_inf_nan=False,
        description="Seconds one attempt may take.",
    )
    runs_dir: Path = storing_field(Path("runs"), description="Where run directories go.")
    cache: Path | None = storing_field(
        None, description="Response cache file [default: RUNS_DIR/cache.sqlite]."
    )
    replay: bool = storing_field(
        EngineSettings.replay, description="Answer only from the cache; never touch the network."
    )
    fresh: bool = storing_field(
        False, description="Ask the model afresh, never reading cached answers (re-audits)."
    )
    workers: int = sending_field(
        EngineSettings.workers,
        **BOUNDS["workers"],
        description="Processes sharing the requests; one drives about one core "
        "(worth it above a few hundred requests per second).",
    )
    batch: bool = sending_field(
        EngineSettings.batch,
        description="Send the uncached requests through the provider's batch API (openai/, "
        "anthropic/): half price, answers within 24 h; run the same command again to resume.",
    )
    batch_poll: Annotated[float, Flag(metavar="SECONDS")] = sending_field(
        EngineSettings.batch_poll,
        **BOUNDS["batch_poll"],
        allow_inf_nan=False,
        description="Seconds before a batch's first status check; doubles up to 60 s.",
    )

    @model_validator(mode="before")
    @classmethod
    def _several_models(cls, data: Any) -> Any:
        # `--model` given again, or a spec's `models: [...]`: the first is `model`, all of
        # them `models` (one model: no `models`).
        if not isinstance(data, dict):
            return data
        model, models = data.get("model"), data.get("models")
        if isinstance(model, list | tuple):
            if models:
                raise ValueError("give model or models, not both")
            given = list(model)
            model, models = (given[0] if given else None), given
        if isinstance(models, list | tuple) and models:
            names = [_model_name(m) for m in models]
            if not all(isinstance(m, str) for m in names):
                return data  # the field's own check names the value
            if model is not None and model != names[0]:
                raise ValueError("give model or models, not both")
            repeated = sorted({m for m in names if names.count(m) > 1})
            if repeated:
                raise ValueError(f"models: {repeated[0]!r} is given twice")
            model = names[0]
            if len(models) == 1 and not isinstance(models[0], str):
                data = {**data, **_entry_fields(models[0])}
            models = tuple(models) if len(models) > 1 else ()
        found = {**data, "models": models} if "models" in data or models else dict(data)
        if model is not None:
            found["model"] = model
        return found

    @model_validator(mode="before")
    @classmethod
    def _local_mapping(cls, data: Any) -> Any:
        # A spec's `local: {n_ctx, n_threads, parallel}` is these fields, grouped.
        if isinstance(data, dict) and isinstance(data.get("local"), dict):
            data = dict(data)
            group = data.pop("local")
            unknown = sorted(set(group) - {"n_ctx", "n_threads", "parallel"})
            if unknown:
                raise ValueError(
                    f"local: unknown setting {unknown[0]!r} (n_ctx, n_threads, parallel)"
                )
            for name, value in group.items():
                data.setdefault(name, value)
        return data

    @model_validator(mode="after")
    def _local_only(self) -> Self:
        given = [name for name in ("n_ctx", "n_threads") if getattr(self, name) is not None]
        given += ["parallel"] if self.parallel != 1 else []
        models = self.model_names
        if given and not all(m.startswith("local/") for m in models):
            other = next(m for m in models if not m.startswith("local/"))
            raise ValueError(
                f"{given[0]} sets up a local/ model's server; {other} is not a local/ model"
            )
        return self

    @field_validator("base_url", mode="before")
    @classmethod
    def _one_url_is_a_string(cls, value: Any) -> Any:
        if isinstance(value, list | tuple) and len(value) == 1:
            return value[0]
        return value

    @field_validator("headers", mode="before")
    @classmethod
    def _header_list(cls, value: Any) -> Any:
        # The command line gives NAME=VALUE strings; a spec, a mapping.
        if isinstance(value, list | tuple) and all(isinstance(pair, str) for pair in value):
            return header_pairs(value)
        return value

    @field_serializer("base_url", when_used="json")
    def _masked_urls(self, urls: str | tuple[str, ...] | None) -> str | list[str] | None:
        # Written to spec.json and used for a spec's identity: credentials never are.
        return redact_urls(urls)

    @field_serializer("headers", when_used="json")
    def _masked_headers(self, headers: dict[str, str] | None) -> dict[str, str] | None:
        return public_headers(headers)

    def for_model(self, model: str | ModelEntry) -> Self:
        """These options for one model of ``models`` (with its own endpoint, where the
        entry gives one): the same in all else."""
        found = {**self.model_dump(), "models": ()}
        if isinstance(model, ModelEntry):
            found |= {k: v for k, v in model.model_dump().items() if v is not None}
        else:
            found["model"] = model
        return self.model_validate(found)

    @property
    def model_names(self) -> tuple[str, ...]:
        """The models of the run: ``models``' names, else ``model``."""
        return tuple(_model_name(m) for m in self.models) or (self.model,)

    @property
    def cache_path(self) -> Path:
        """The cache file in use: ``cache``, or ``cache.sqlite`` in ``runs_dir``."""
        return self.cache or Path(self.runs_dir) / "cache.sqlite"

    def resolve_provider(self, *, need_key: bool | None = None) -> Provider:
        """The provider ``model`` names, pooled for ``concurrency``.

        The API key is read now (unless the run sends nothing: a replay, or
        ``need_key=False``), so a missing key fails before anything is written.
        """
        return resolve_model(
            self.model,
            base_url=self.base_url,
            api_key_env=self.api_key_env,
            max_connections=self.concurrency,
            need_key=not self.replay if need_key is None else need_key,
            headers=self.headers,
            local={"n_ctx": self.n_ctx, "n_threads": self.n_threads, "parallel": self.parallel},
        )

    def engine_settings(self) -> EngineSettings:
        """These options as the engine takes them."""
        # Every engine setting that is also an option, by its name (the options take their
        # defaults from EngineSettings); --fresh is the engine's read_cache turned round.
        shared = {f.name for f in fields(EngineSettings)} & set(type(self).model_fields)
        return EngineSettings(
            **{name: getattr(self, name) for name in shared}, read_cache=not self.fresh
        )


def _model_name(entry: Any) -> Any:
    """A ``models`` entry's model name (as given, where it is not one)."""
    if isinstance(entry, ModelEntry):
        return entry.model
    if isinstance(entry, dict):
        return entry.get("model")
    return entry


def _entry_fields(entry: Any) -> dict[str, Any]:
    found = entry.model_dump() if isinstance(entry, ModelEntry) else dict(entry)
    return {k: v for k, v in found.items() if v is not None}
