"""Audit specs: what ``biasaudit run`` runs, from a YAML file or from the command line.

A spec is one flat mapping: the task, the model, the method and its options,
and the task's own fields. ``biasaudit run resume-screening --model M ...``
builds the same spec that ``biasaudit run SPEC.yaml`` reads, so the two run
identically, and the resolved spec is kept in the run as ``spec.json``::

    task: resume-screening        # or essay-grading, or allocation (your own task)
    model: openai/gpt-4o-mini
    method: pointwise             # or pairwise
    names_per_group: 100
    jobs: [software-engineer, retail-associate]

A bad spec fails before anything is sent, naming the field at fault.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from biasaudit.engine.core import EngineSettings
from biasaudit.errors import UsageError
from biasaudit.providers import Provider, resolve_model
from biasaudit.providers._types import ReasoningEffort
from biasaudit.secrets import public_headers, redact_urls
from biasaudit.textfiles import brief, load_yaml

__all__ = [
    "AllocationTaskSpec",
    "AuditSpec",
    "EssayGradingSpec",
    "GradeScoreSpec",
    "PoolSpec",
    "PromptSpec",
    "QualifiedSpec",
    "ResumeScreeningSpec",
    "RutedSpec",
    "Spec",
    "load_spec",
    "parse_spec",
]

Method = Literal["pointwise", "pairwise"]
MAX_ROUNDS = 100_000
MAX_TIMEOUT_S = 86_400.0


class RunSpec(BaseModel):
    """Fields every audit spec has: the model and its endpoint, the engine, the run's
    options and the statistics every kind shares (seed, confidence, conventions).
    Each kind's spec adds its own (:class:`AllocationSpec`, :class:`GradeScoreSpec`,
    :class:`RutedSpec`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str = Field(description="provider/model, e.g. openai/gpt-4o-mini or sim/biased.")
    base_url: str | tuple[str, ...] | None = Field(
        None, description="API root of an OpenAI-compatible server; several for replicas."
    )
    api_key_env: str | None = Field(None, description="Environment variable holding the key.")
    headers: dict[str, str] | None = Field(
        None,
        description="Sent with every request; a value $NAME is read from the environment. "
        "Recorded masked (spec.json keeps $NAME references, every other value is ***).",
    )
    temperature: float = Field(
        1.0, gt=0.0, le=2.0, allow_inf_nan=False, description="Of sampled answers and texts."
    )
    conventions: Literal["biasaudit", "paper"] = Field(
        "biasaudit",
        description="Which definitions the figures that depart from the papers follow: "
        "biasaudit's, or the papers' (README: Where biasaudit departs from the papers).",
    )
    seed: int = Field(
        0, ge=0, le=2**32 - 1, description="Seeds name sampling, pools and bootstraps."
    )
    confidence: float = Field(0.95, gt=0.0, lt=1.0, allow_inf_nan=False)
    concurrency: int = Field(16, ge=1, le=4096)
    rpm: float | None = Field(None, gt=0.0, le=1e7, allow_inf_nan=False)
    max_retries: int = Field(6, ge=0, le=100)
    timeout: float = Field(60.0, gt=0.0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    runs_dir: Path = Path("runs")
    cache: Path | None = None
    replay: bool = False
    fresh: bool = Field(
        False, description="Ask the model afresh, never reading cached answers (re-audits)."
    )
    workers: int = Field(1, ge=1, le=64, description="Processes sharing the requests.")
    batch: bool = Field(
        False, description="Through the provider's batch API (openai, anthropic): half price."
    )
    batch_poll: float = Field(
        5.0,
        gt=0.0,
        le=3600.0,
        allow_inf_nan=False,
        description="Seconds before a batch's first check.",
    )
    reasoning_effort: ReasoningEffort | None = Field(
        None,
        description="Reasoning models: how much the model reasons before each answer "
        "(OpenAI's reasoning_effort), part of every request and its cache key; unset: "
        "the model's default.",
    )

    @model_validator(mode="before")
    @classmethod
    def _base_urls(cls, data: Any) -> Any:
        # `base_urls: [...]` (replicas of one model) is another spelling of a list base_url.
        if isinstance(data, dict) and "base_urls" in data:
            data = dict(data)
            urls = data.pop("base_urls")
            if data.get("base_url") is not None:
                raise ValueError("give base_url or base_urls, not both")
            data["base_url"] = urls
        return data

    @field_validator("base_url", mode="before")
    @classmethod
    def _one_url_is_a_string(cls, value: Any) -> Any:
        if isinstance(value, list | tuple) and len(value) == 1:
            return value[0]
        return value

    @field_serializer("base_url", when_used="json")
    def _masked_urls(self, urls: str | tuple[str, ...] | None) -> str | list[str] | None:
        # Written to spec.json and used for a spec's identity: credentials never are.
        return redact_urls(urls)

    @field_serializer("headers", when_used="json")
    def _masked_headers(self, headers: dict[str, str] | None) -> dict[str, str] | None:
        return public_headers(headers)

    @property
    def cache_path(self) -> Path:
        return self.cache or self.runs_dir / "cache.sqlite"

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
        )

    def engine_settings(self) -> EngineSettings:
        return EngineSettings(
            concurrency=self.concurrency,
            rpm=self.rpm,
            max_retries=self.max_retries,
            timeout=self.timeout,
            replay=self.replay,
            read_cache=not self.fresh,
            workers=self.workers,
            batch=self.batch,
            batch_poll=self.batch_poll,
        )


class AllocationSpec(RunSpec):
    """An allocation audit's own fields: the method and its scoring, the reference group,
    the selection simulated (k, pools, rounds) and its bootstraps."""

    method: Method = "pointwise"
    scoring: Literal["auto", "logprobs", "samples", "continuation"] = Field(
        "auto",
        description="Pointwise: first-token logprobs, sampled replicates, auto, or every "
        "label scored whole as a continuation (legacy completions with echo).",
    )
    chat_template: str | None = Field(
        None,
        description="Continuation scoring: how the chat prompt becomes one text: 'model' "
        "(the model's own, where it can be read: local GGUF models), 'chatml', 'plain', or a "
        ".jinja / tokenizer_config.json file [default: model].",
    )
    samples: int = Field(20, ge=1, le=128, description="Sampled replicates per candidate.")
    top_logprobs: int | None = Field(
        None, ge=1, le=20, description="Alternatives asked for (default: 3 per label, >= 10)."
    )
    reference_group: str | None = None
    k_max: int = Field(5, ge=1, le=100, description="Selections simulated: k = 1..k_max.")
    headline_k: int = Field(
        1, ge=1, le=100, description="The k the report's headline and rates use (<= k_max)."
    )
    # Upper bounds are checked with the spec, before anything is sent: far beyond any
    # useful audit, and well within memory (rounds x pools, bootstrap replicates).
    rounds: int = Field(
        1800, ge=1, le=MAX_ROUNDS, description="Simulated selection pools per subtask."
    )
    pools: int = Field(30, ge=1, le=10_000, description="Pairwise: pools compared per subtask.")
    bootstrap: int = Field(2000, ge=100, le=100_000, description="Bootstrap replicates of RABBI.")
    gap_bootstrap: int = Field(
        200, ge=20, le=10_000, description="Bootstrap replicates of the gaps."
    )


AuditSpec = RunSpec
"""Any audit's spec (every kind's spec is a :class:`RunSpec`)."""


class ResumeScreeningSpec(AllocationSpec):
    """Resume screening: the shipped jobs, resumes and names, or your own files."""

    task: Literal["resume-screening"] = "resume-screening"
    jobs: tuple[str, ...] | None = Field(None, description="Job ids to audit (default: all).")
    names: Path | None = Field(None, description="CSV of name,group (default: the shipped one).")
    resumes: Path | None = Field(None, description="YAML of jobs and resumes.")
    names_per_group: int = Field(100, ge=1, le=100_000)

    @field_validator("jobs", mode="before")
    @classmethod
    def _split_jobs(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(job.strip() for job in value.split(",") if job.strip())
        return value


class EssayGradingSpec(AllocationSpec):
    """Essay grading on a corpus the user brings (or the shipped demo)."""

    task: Literal["essay-grading"] = "essay-grading"
    essays: Path = Field(
        description="CSV with text, group and optional rating; 'demo' for the shipped demo."
    )
    topic: str = Field(
        "It is important for college students to have a part-time job.",
        description="The essay prompt the rubric names (a 'topic' column overrides it).",
    )
    pool_size: int = Field(10, ge=2, le=1000)
    qualified_at_least: float | Literal["median"] | None = Field(
        None,
        description="An essay is qualified when its rating is at least this; 'median': the "
        "median of the rated essays. Unset: 'median', or with conventions: paper the "
        "authors' rule (above 53 of ICNALE's 0-100 overall rating, their 'Good' band).",
    )


class QualifiedSpec(BaseModel):
    """Who is qualified: a boolean column, or a number column at or above a threshold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    column: str
    at_least: float | Literal["median"] | None = Field(
        None, description="Qualified when the column is at least this (or its median)."
    )


class PromptSpec(BaseModel):
    """A prompt written in the spec; ``file`` reads it from a prompt file instead."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    file: Path | None = None
    system: str | None = None
    user: str | None = None
    candidate: str | None = None


class PoolSpec(BaseModel):
    """How candidates are pooled for selection."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    design: Literal["one_per_group", "random"] = "one_per_group"
    size: int | None = Field(None, ge=2, le=1000, description="Pool size of random pools.")


class AllocationTaskSpec(AllocationSpec):
    """An allocation task of your own: candidates in a CSV, prompts in the spec."""

    task: Literal["allocation"] = "allocation"
    name: str = Field("allocation", description="What reports call the task.")
    candidates: Path = Field(description="CSV with one row per candidate.")
    id_column: str | None = None
    group_column: str = "group"
    name_column: str | None = Field(None, description="Names pairwise answers may give.")
    subtask_column: str | None = None
    qualified: QualifiedSpec | str | None = None
    reference_group: str = Field(description="The group every other is compared with.")
    labels: dict[str, Annotated[float, Field(allow_inf_nan=False)]] = Field(
        default_factory=lambda: {"Yes": 1.0, "No": 0.0},
        min_length=2,
        description="Pointwise label values (at least two, not all the same).",
    )
    pointwise: PromptSpec | None = None
    pairwise: PromptSpec | None = None
    pool: PoolSpec = PoolSpec()
    noun: str = Field("Candidate", description="How the pairwise prompt labels its items.")
    context: dict[str, str] = Field(default_factory=dict, description="Extra placeholders.")

    @field_validator("labels", mode="before")
    @classmethod
    def _quoted_labels(cls, value: Any) -> Any:
        if isinstance(value, dict) and any(isinstance(key, bool) for key in value):
            raise ValueError(
                "YAML reads unquoted Yes/No as true/false: quote the labels, "
                'e.g. {"Yes": 1, "No": 0}'
            )
        return value

    @field_validator("labels")
    @classmethod
    def _labels_that_tell_apart(cls, value: dict[str, float]) -> dict[str, float]:
        if len(set(value.values())) < 2:
            raise ValueError(
                "every label has the same value, so every candidate would score the same; "
                "give the labels different values"
            )
        return value


ALLOCATION_ONLY_FIELDS = tuple(
    name for name in AllocationSpec.model_fields if name not in RunSpec.model_fields
)
"""The fields only an allocation audit has; another kind's spec names them as such."""
GRADE_SCORE_PROMPTS = ("1", "2", "3", "4")


class GradeScoreSpec(RunSpec):
    """Grade Score: a judge picks the best of each item's options, shown in every order.

    Iourovitski, "Grade Score: Quantifying LLM Performance in Option Selection" (2024).
    """

    task: Literal["grade-score"] = "grade-score"
    items: Path = Field(
        description="JSONL of {id, prompt, options[, preferred | ranks]}; 'demo' for the demo."
    )
    prompt: str = Field("1", description="Judge prompt: 1, 2, 3 or 4 (shipped), or a file.")
    random_option: bool = Field(False, description="Add one unrelated option from another item.")
    permutations: Literal["cyclic", "all"] = Field(
        "cyclic", description="Every rotation of the options, or all n! orders (n <= 6)."
    )
    replicates: int = Field(1, ge=1, le=100, description="Times each order is asked.")
    temperature: float = Field(
        0.3, ge=0.0, le=2.0, allow_inf_nan=False, description="Of the judge (the paper: 0.3)."
    )
    max_tokens: int | None = Field(
        None, ge=1, le=32768, description="Longest answer [default: the prompt's]."
    )

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt_number(cls, value: Any) -> Any:
        return str(value) if isinstance(value, int) and not isinstance(value, bool) else value


RutedContext = Literal["standard", "bedtime", "personas", "esl"]
RUTED_CONTEXTS: tuple[RutedContext, ...] = ("standard", "bedtime", "personas", "esl")


class RutedSpec(RunSpec):
    """RUTEd: gender-occupation bias in a next-word test and in three long-form contexts.

    Lum et al., "Bias in Language Models: Beyond Trick Tests and Towards RUTEd
    Evaluation" (ACL 2025). ``temperature`` is that of the generations (and of
    sampled next words); ``top_logprobs`` the alternatives of the next-word test.
    """

    task: Literal["ruted"] = "ruted"
    contexts: tuple[RutedContext, ...] = Field(
        RUTED_CONTEXTS, min_length=1, description="Of standard, bedtime, personas, esl."
    )
    replicates: int = Field(
        30, ge=1, le=10_000, description="Texts per occupation and template; sampled next words."
    )
    templates: tuple[Annotated[int, Field(ge=0)], ...] | Literal["all"] = Field(
        (0,), description="Templates per context: 0 (the main one), a list such as 0,3, or all."
    )
    occupations: Path | None = Field(
        None, description="CSV of occupation,majority [default: the 40 WinoBias occupations]."
    )
    next_word: Literal["auto", "continuation", "completions", "chat", "samples"] = Field(
        "auto",
        description="Standard test: every listed word scored as a continuation (the paper's; "
        "needs an endpoint that echoes prompts), top-N completions or chat logprobs, or "
        "sampled words.",
    )
    top_logprobs: int | None = Field(
        None, ge=1, le=20, description="Next-word alternatives asked for [default: 20]."
    )
    mode_collapse: Literal["auto", "on", "off"] = Field(
        "auto",
        description="The mode-collapse check of the long-form texts (RUTEd §4.4): mean "
        "similarity of each prompt's replicates from sentence embeddings; auto: where the "
        "embeddings extra is installed, on: require it, off: skip.",
    )

    @field_validator("contexts", mode="before")
    @classmethod
    def _split_contexts(cls, value: Any) -> Any:
        if isinstance(value, str):
            return tuple(name.strip() for name in value.split(",") if name.strip())
        return value

    @field_validator("templates", mode="before")
    @classmethod
    def _template_list(cls, value: Any) -> Any:
        if isinstance(value, str) and value.strip() == "all":
            return "all"
        parts = value.split(",") if isinstance(value, str) else value
        parts = parts if isinstance(parts, list | tuple) else [parts]
        numbers = [str(part).strip() for part in parts]
        if not numbers or not all(number.isdigit() for number in numbers):
            raise ValueError(f"must be 'all' or template numbers such as 0 or 0,3; got {value!r}")
        return tuple(int(number) for number in numbers)


Spec = Annotated[
    ResumeScreeningSpec | EssayGradingSpec | AllocationTaskSpec | GradeScoreSpec | RutedSpec,
    Field(discriminator="task"),
]
_SPEC: TypeAdapter[
    ResumeScreeningSpec | EssayGradingSpec | AllocationTaskSpec | GradeScoreSpec | RutedSpec
] = TypeAdapter(Spec)
_PATH_FIELDS = (
    "names", "resumes", "essays", "candidates", "items", "occupations", "runs_dir", "cache",
)  # fmt: skip
TASK_NAMES = ("resume-screening", "essay-grading", "allocation", "grade-score", "ruted")


def parse_spec(data: Mapping[str, Any], *, source: str = "spec") -> AuditSpec:
    """Validate a spec mapping, naming the field of the first problem.

    Raises
    ------
    UsageError
        ``<source>, field '<dotted.path>': <problem>``.
    """
    task = data.get("task", "")
    if not (isinstance(task, str) and task in TASK_NAMES):
        # Named here, not by pydantic: its message would spell out the value in full,
        # and a YAML alias can make that value billions of elements long.
        names = ", ".join(TASK_NAMES)
        raise UsageError(f"{source}, field 'task': must be one of {names}; got {brief(task)}")
    try:
        spec = _SPEC.validate_python(dict(data))
    except ValidationError as error:
        raise UsageError(_describe(error, data, source)) from None
    assert isinstance(spec, AuditSpec)
    return spec


def load_spec(path: str | Path, overrides: Mapping[str, Any] | None = None) -> AuditSpec:
    """Read a YAML spec; relative paths in it are relative to the file.

    ``overrides`` (options given on the command line) replace the file's values.

    Raises
    ------
    UsageError
        The file cannot be read, is not a YAML mapping, or fails validation.
    """
    spec_path = Path(path)
    data = load_yaml(spec_path, "spec")
    if not isinstance(data, dict):
        raise UsageError(f"spec {spec_path}: expected a mapping of fields, e.g. 'task: ...'")
    data = _relative_to(data, spec_path.parent)
    data.update({k: v for k, v in (overrides or {}).items() if v is not None})
    return parse_spec(data, source=str(spec_path))


def _relative_to(data: dict[str, Any], folder: Path) -> dict[str, Any]:
    resolved = dict(data)
    for key in _PATH_FIELDS:
        value = resolved.get(key)
        if isinstance(value, str) and value != "demo" and not Path(value).is_absolute():
            resolved[key] = str(folder / value)
    for key in ("pointwise", "pairwise"):
        prompt = resolved.get(key)
        if isinstance(prompt, dict) and isinstance(prompt.get("file"), str):
            resolved[key] = {**prompt, "file": str(folder / prompt["file"])}
    judge = resolved.get("prompt")
    if resolved.get("task") == "grade-score" and _is_relative_file(judge):
        resolved["prompt"] = str(folder / str(judge))
    return resolved


def _is_relative_file(prompt: Any) -> bool:
    """A grade-score judge prompt that names a file by a relative path."""
    return (
        isinstance(prompt, str)
        and prompt not in GRADE_SCORE_PROMPTS
        and not Path(prompt).is_absolute()
    )


def _suggestion(name: str) -> str:
    models: tuple[type[BaseModel], ...] = (
        ResumeScreeningSpec, EssayGradingSpec, AllocationTaskSpec, QualifiedSpec, PromptSpec,
        PoolSpec, GradeScoreSpec, RutedSpec,
    )  # fmt: skip
    known = sorted({field for model in models for field in model.model_fields})
    close = difflib.get_close_matches(name, known, n=1)
    return f"; did you mean '{close[0]}'?" if close else ""


def _describe(error: ValidationError, data: Mapping[str, Any], source: str) -> str:
    first = error.errors()[0]
    location = [str(part) for part in first["loc"]]
    if location and location[0] in TASK_NAMES:
        location = location[1:]  # the union's tag, which the user did not write
    kind = first["type"]
    problem = str(first["msg"]).removeprefix("Value error, ")
    if kind in ("union_tag_invalid", "union_tag_not_found"):
        names = ", ".join(TASK_NAMES)
        return f"{source}, field 'task': must be one of {names}; got {brief(data.get('task'))}"
    task = data.get("task")
    if kind == "extra_forbidden" and location and location[-1] in ALLOCATION_ONLY_FIELDS:
        problem = f"an allocation-audit option; {task} does not use it"
    elif kind == "extra_forbidden":
        problem = "unknown field" + _suggestion(location[-1] if location else "")
    elif kind == "missing":
        problem = "required"
    where = ".".join(location) or "(top level)"
    return f"{source}, field '{where}': {problem}"
