"""The ``biasaudit`` command: a thin shell over the library.

This is the only place where an exception becomes a message and an exit code:
0 success, 1 some requests failed or the run stopped, 2 a usage or input error,
130 interrupted. Set ``BIASAUDIT_DEBUG=1`` to get the traceback instead.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar, get_args

import click

from biasaudit import __version__
from biasaudit.errors import BiasauditError
from biasaudit.providers._types import ReasoningEffort  # loaded with the package already
from biasaudit.secrets import RedactingFilter, redact

# The spec's bounds, mirrored by the options (importing spec here would load the engine).
MAX_ROUNDS = 100_000
MAX_TIMEOUT_S = 86_400.0

F = TypeVar("F", bound=Callable[..., Any])


def _reports_errors(command: F) -> F:
    """Turn biasaudit errors into one clean line on stderr and the right exit code."""

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return command(*args, **kwargs)
        except BiasauditError as error:
            if os.environ.get("BIASAUDIT_DEBUG"):
                raise
            click.echo(f"error: {redact(str(error))}", err=True)
            run_dir = getattr(error, "run_dir", None)
            if run_dir:
                click.echo(f"run: {run_dir}")
            sys.exit(error.exit_code)
        except (KeyboardInterrupt, asyncio.CancelledError):
            click.echo("interrupted: answers received so far are in the cache", err=True)
            sys.exit(130)

    return wrapper  # type: ignore[return-value]


_BATCH_HELP = (
    "Send the uncached requests through the provider's batch API (openai/, anthropic/): "
    "half price, answers within 24 h; run the same command again to resume."
)
_BATCH_POLL_HELP = "Seconds before a batch's first status check; doubles up to 60 s."


def _headers(
    _ctx: click.Context, _param: click.Parameter, pairs: tuple[str, ...]
) -> dict[str, str] | None:
    """``--header NAME=VALUE``, given once per header."""
    headers: dict[str, str] = {}
    for pair in pairs:
        name, equals, value = pair.partition("=")
        if not equals or not name.strip():
            raise click.BadParameter(
                f"'{pair.partition('=')[0]}=...' expected NAME=VALUE, e.g. 'api-key=$AZURE_KEY'"
            )
        headers[name.strip()] = value
    return headers or None


_HEADER_HELP = (
    "Send this header with every request, as NAME=VALUE; a value $VAR is read from the "
    "environment (--header 'api-key=$AZURE_KEY'). Recorded masked. Again for each header."
)


def _base_urls(
    _ctx: click.Context, _param: click.Parameter, urls: tuple[str, ...]
) -> str | tuple[str, ...] | None:
    """``--base-url`` given once is one server; given again, replicas of one model."""
    if not urls:
        return None
    return urls[0] if len(urls) == 1 else urls


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="biasaudit")
def cli() -> None:
    """Audit large language models for bias in the decisions built on them."""


@cli.command()
@click.argument("prompts", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--model", "-m", required=True, help="provider/model, e.g. openai/gpt-4o-mini, sim/biased."
)
@click.option(
    "--base-url",
    multiple=True,
    callback=_base_urls,
    help="API root of an OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1; "
    "give it again for each replica of the same model.",
)
@click.option(
    "--api-key-env",
    metavar="NAME",
    help="Environment variable holding the API key (default: the provider's, e.g. OPENAI_API_KEY; "
    "none for self-hosted servers).",
)
@click.option(
    "--header", "headers", multiple=True, metavar="NAME=VALUE", callback=_headers, help=_HEADER_HELP
)
@click.option(
    "--concurrency",
    default=16,
    show_default=True,
    type=click.IntRange(1, 4096),
    help="Most requests in flight; lowered automatically on rate limits.",
)
@click.option(
    "--rpm", type=click.FloatRange(min=0, max=1e7, min_open=True), help="Most requests per minute."
)
@click.option(
    "--max-retries",
    default=6,
    show_default=True,
    type=click.IntRange(0, 100),
    help="Retries of a failed request (transient errors only).",
)
@click.option(
    "--timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0, max=MAX_TIMEOUT_S, min_open=True),
    help="Seconds one attempt may take.",
)
@click.option(
    "--runs-dir",
    default=Path("runs"),
    show_default=True,
    type=click.Path(path_type=Path),
    help="Where run directories go.",
)
@click.option(
    "--cache",
    "cache_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Response cache file [default: RUNS_DIR/cache.sqlite].",
)
@click.option("--replay", is_flag=True, help="Answer only from the cache; never touch the network.")
@click.option(
    "--workers",
    default=1,
    show_default=True,
    type=click.IntRange(1, 64),
    help="Processes sharing the requests; one drives about one core "
    "(worth it above a few hundred requests per second).",
)
@click.option("--batch", is_flag=True, help=_BATCH_HELP)
@click.option(
    "--batch-poll",
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    type=click.FloatRange(min=0, max=3600, min_open=True),
    help=_BATCH_POLL_HELP,
)
@_reports_errors
def fanout(prompts: Path, **options: Any) -> None:
    """Send every prompt in PROMPTS.jsonl to a model, with caching, retries and rate limits.

    Each line is {"id": ..., "messages": [...]} (chat) or {"id": ..., "prompt": "..."}
    (legacy completions), with optional "params" (max_tokens, temperature, top_p,
    logprobs, top_logprobs, n, seed, stop, reasoning_effort) and "replicate" (int).
    Exit status: 0 all answered, 1 some failed, 2 bad input.
    """
    if not options["replay"]:
        _start_early(options)
    from biasaudit.engine.fanout import FanoutOptions
    from biasaudit.engine.fanout import fanout as run

    result = run(prompts, FanoutOptions(**options, command=["biasaudit", *sys.argv[1:]]))
    manifest, counts = result.manifest, result.manifest.counts
    label = " (simulated model)" if manifest.simulated else ""
    answered = counts.requests - counts.failures
    batched = f" ({counts.batched} answered through batches)" if counts.batched else ""
    click.echo(
        f"fanout of {counts.requests} prompts to {options['model']}{label}: {answered} answered, "
        f"{counts.failures} failed, {counts.refusals} refused; {counts.cache_hits} from cache, "
        f"{counts.sent} requests sent{batched}, {counts.retries} retries, "
        f"{manifest.usage.input_tokens + manifest.usage.output_tokens} tokens"
    )
    for version, n in sorted(manifest.model_versions.items()):
        click.echo(f"model version reported: {version} ({n})")
    if counts.failures:
        click.echo(f"{counts.failures} prompts failed; see 'error' in responses.jsonl", err=True)
    click.echo(f"run: {result.run_dir}")
    sys.exit(result.exit_code)


def _start_early(options: dict[str, Any]) -> None:
    """Ready a run that sends requests: it will import an SDK and build its requests.

    The garbage collector waits until the run starts, and ``--workers``
    children start now, so that their imports overlap this process's own.
    """
    from biasaudit.engine.loop import pause_gc_until_run
    from biasaudit.engine.worker_pool import prestart_for

    pause_gc_until_run()
    if options.get("batch"):
        return  # a batch is submitted from this process
    prestart_for(
        options["model"],
        options.get("base_url"),
        options.get("api_key_env"),
        concurrency=options["concurrency"],
        workers=options["workers"],
        headers=options.get("headers"),
    )


@cli.group()
def cache() -> None:
    """Inspect the response cache."""


@cache.command("stats")
@click.option(
    "--runs-dir", default=Path("runs"), show_default=True, type=click.Path(path_type=Path)
)
@click.option(
    "--cache",
    "cache_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Cache file [default: RUNS_DIR/cache.sqlite].",
)
@_reports_errors
def cache_stats(runs_dir: Path, cache_path: Path | None) -> None:
    """Entries, size and hit counts by model."""
    from biasaudit.store.cache import ResponseCache

    path = cache_path or runs_dir / "cache.sqlite"
    if not path.exists():
        raise BiasauditError(f"no cache at {path}")
    with ResponseCache(path, readonly=True) as store:
        rows = store.stats()
    size = path.stat().st_size + sum(
        p.stat().st_size for p in path.parent.glob(path.name + "-*") if p.is_file()
    )
    cells = [
        (row.model_id, str(row.entries), _human_bytes(row.body_bytes), str(row.hits),
         datetime.fromtimestamp(row.last, UTC).strftime("%Y-%m-%d %H:%M"))
        for row in rows
    ]  # fmt: skip
    total = (
        "total",
        str(sum(r.entries for r in rows)),
        _human_bytes(sum(r.body_bytes for r in rows)),
        str(sum(r.hits for r in rows)),
    )
    lines = [
        f"cache: {path} ({_human_bytes(size)} on disk)",
        f"{'model':<44} {'entries':>9} {'stored':>10} {'hits':>9}  newest",
        *("{:<44} {:>9} {:>10} {:>9}  {}".format(*row) for row in cells),
        "{:<44} {:>9} {:>10} {:>9}".format(*total),
    ]
    from biasaudit.reports.rich_tables import echo_table, listing_view

    headers = ("model", "entries", "stored", "hits", "newest")
    echo_table(lines, lambda: listing_view(headers, cells, total=total, above=lines[:1]))


@cli.command()
def providers() -> None:
    """List the provider names biasaudit knows, with what their endpoints can do."""
    from biasaudit.providers import KNOWN_PROVIDERS

    cells = []
    for name, info in KNOWN_PROVIDERS.items():
        caps = info.capabilities
        logprobs = {True: "yes", False: "no", None: "unknown"}[caps.logprobs]
        if caps.logprobs and caps.max_top_logprobs:
            logprobs += f" ({caps.max_top_logprobs})"
        where = info.base_url or _NO_URL.get(info.kind, "(--base-url)")
        cells.append((name, where, info.key_env or "-", logprobs, info.note))
    other = "any other name with --base-url: an OpenAI-compatible server"
    lines = [
        f"{'provider':<11} {'base URL':<40} {'key variable':<19} {'logprobs':<9} note",
        *("{:<11} {:<40} {:<19} {:<9} {}".format(*row) for row in cells),
        other,
    ]
    from biasaudit.reports.rich_tables import echo_table, listing_view

    headers = ("provider", "base URL", "key variable", "logprobs", "note")
    echo_table(lines, lambda: listing_view(headers, cells, left=5, below=[other]))


_AUDIT_OPTIONS = [
    click.option("--model", "-m", help="provider/model, e.g. openai/gpt-4o-mini, sim/biased."),
    click.option(
        "--base-url",
        multiple=True,
        callback=_base_urls,
        help="API root of an OpenAI-compatible server (again for each replica).",
    ),
    click.option("--api-key-env", metavar="NAME", help="Environment variable holding the key."),
    click.option(
        "--header",
        "headers",
        multiple=True,
        metavar="NAME=VALUE",
        callback=_headers,
        help=_HEADER_HELP,
    ),
    click.option(
        "--method",
        type=click.Choice(["pointwise", "pairwise"]),
        help="One candidate at a time, or pairs in both orders [default: pointwise].",
    ),
    click.option(
        "--scoring",
        type=click.Choice(["auto", "logprobs", "samples", "continuation"]),
        help="Pointwise scores from first-token logprobs, sampled answers, or every label "
        "scored whole as a continuation (legacy completions with echo: vLLM, llama.cpp) "
        "[default: auto: logprobs where the endpoint gives them].",
    ),
    click.option(
        "--chat-template",
        metavar="model|chatml|plain|FILE",
        help="--scoring continuation: how the chat prompt becomes one text: the model's own "
        "(local models), ChatML, plain paragraphs (base models), or a .jinja / "
        "tokenizer_config.json file [default: model].",
    ),
    click.option(
        "--samples",
        type=click.IntRange(1, 128),
        help="Sampled answers per candidate when sampling [default: 20].",
    ),
    click.option(
        "--reasoning-effort",
        type=click.Choice(get_args(ReasoningEffort)),
        help="Reasoning models (openai/o3, openai/gpt-5, ...): how much the model reasons "
        "before each answer, sent as reasoning_effort [default: the model's own].",
    ),
    click.option("--reference-group", help="The group every other is compared with."),
    click.option("--k-max", type=click.IntRange(1, 100), help="Selections k = 1..K [default: 5]."),
    click.option(
        "--conventions",
        type=click.Choice(["biasaudit", "paper"]),
        help="Definitions of the figures where biasaudit departs from the papers: its own, "
        "or the papers' (README: Where biasaudit departs from the papers) [default: biasaudit].",
    ),
    click.option(
        "--headline-k",
        type=click.IntRange(1, 100),
        help="The k the headline and the selection rates use [default: 1].",
    ),
    click.option(
        "--seed", type=click.IntRange(0, 2**32 - 1), help="Seed of names, pools [default: 0]."
    ),
    click.option(
        "--rounds",
        type=click.IntRange(1, MAX_ROUNDS),
        help="Simulated pools per subtask [default: 1800].",
    ),
    click.option(
        "--pools", type=click.IntRange(1, 10_000), help="Pairwise: pools per subtask [30]."
    ),
    click.option(
        "--concurrency", type=click.IntRange(1, 4096), help="Requests in flight [default: 16]."
    ),
    click.option(
        "--rpm", type=click.FloatRange(min=0, max=1e7, min_open=True), help="Requests a minute."
    ),
    click.option("--max-retries", type=click.IntRange(0, 100), help="Retries [default: 6]."),
    click.option(
        "--timeout",
        type=click.FloatRange(min=0, max=MAX_TIMEOUT_S, min_open=True),
        help="Seconds per attempt [default: 60].",
    ),
    click.option("--workers", type=click.IntRange(1, 64), help="Processes [default: 1]."),
    click.option("--batch", is_flag=True, default=None, help=_BATCH_HELP),
    click.option(
        "--batch-poll",
        type=click.FloatRange(min=0, max=3600, min_open=True),
        metavar="SECONDS",
        help=_BATCH_POLL_HELP.replace(".", " [default: 5].", 1),
    ),
    click.option("--runs-dir", type=click.Path(path_type=Path), help="Where runs go [runs]."),
    click.option(
        "--cache",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Response cache file [default: RUNS_DIR/cache.sqlite].",
    ),
    click.option("--replay", is_flag=True, default=None, help="Answer only from the cache."),
    click.option(
        "--no-report",
        is_flag=True,
        default=None,
        help="Skip report.html / report.md (write them later with 'biasaudit report').",
    ),
    click.option(
        "--dry-run",
        is_flag=True,
        default=None,
        help="Print requests, cache hits, estimated tokens and cost; send nothing.",
    ),
    click.option(
        "--max-cost",
        type=click.FloatRange(min=0),
        metavar="USD",
        help="Refuse to start above this estimated cost; stop cleanly on reaching it.",
    ),
    click.option(
        "--prices",
        type=click.Path(dir_okay=False, path_type=Path),
        help="YAML of model prices over the shipped ones [$BIASAUDIT_PRICES].",
    ),
]


def _audit_options(command: F) -> F:
    """The options every ``biasaudit run`` form takes; unset ones keep the spec's value."""
    for option in reversed(_AUDIT_OPTIONS):
        command = option(command)
    return command


def _run_audit(fields: dict[str, Any], *, spec_file: Path | None = None) -> None:
    """Validate the spec, run the audit (whatever its kind), print its table and
    ``run: <dir>``, and exit 0, or 1 when some requests got no answer."""
    from biasaudit.kinds.registry import run_spec
    from biasaudit.reports.rich_tables import audit_view, echo_table
    from biasaudit.spec import load_spec, parse_spec

    given = {name: value for name, value in fields.items() if value is not None}
    report = not given.pop("no_report", False)
    budget = {name: given.pop(name) for name in ("dry_run", "max_cost", "prices") if name in given}
    if spec_file is not None:
        spec = load_spec(spec_file, given)
    else:
        if "model" not in given:
            raise click.UsageError("Missing option '--model' / '-m'.")
        spec = parse_spec(given, source="command line")
    budgeted = None
    if not spec.replay:
        from biasaudit.cli.runs import check_budget

        if not budget.get("dry_run"):
            _start_early(spec.model_dump())
        budgeted = check_budget(spec, **budget)  # exits after a dry run
    finished = run_spec(spec, provider=budgeted, command=["biasaudit", *sys.argv[1:]])
    echo_table(
        finished.table, lambda: audit_view(finished.metrics, finished.run_dir, finished.kind)
    )
    if budgeted is not None:
        click.echo(f"spent: ${budgeted.spent:.4f} of ${budgeted.max_cost:g}")
    _write_report(finished.run_dir, report and finished.run_dir.joinpath("metrics.json").is_file())
    click.echo(f"run: {finished.run_dir}")
    sys.exit(finished.exit_code)


def _write_report(run_dir: Path, wanted: bool) -> None:
    """Write the run's report.html and report.md, naming them on stderr (stdout stays the table).

    A report that cannot be drawn is a warning: the audit itself is done and kept.
    """
    if not wanted:
        return
    from biasaudit.reports.html import write_report

    try:
        paths = write_report(run_dir)
    except (BiasauditError, ImportError, OSError, ValueError) as error:
        click.echo(f"warning: no report written: {redact(str(error))}", err=True)
        return
    click.echo(f"report: {paths[0]}", err=True)


class _TaskOrSpec(click.Group):
    """``biasaudit run TASK [OPTIONS]``, or ``biasaudit run SPEC.yaml [OPTIONS]``."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and args[0] not in self.commands and not args[0].startswith("-"):
            return "SPEC", self.commands["spec"], args
        return super().resolve_command(ctx, args)


@cli.group(cls=_TaskOrSpec)
def run() -> None:
    """Run an audit: a built-in task, or any task described in SPEC.yaml.

    \b
      biasaudit run resume-screening --model M [--method pairwise] [--names-per-group N]
      biasaudit run essay-grading --essays FILE.csv --model M
      biasaudit run grade-score --items FILE.jsonl --model M [--prompt 1|2|3|4|FILE]
      biasaudit run ruted --model M [--contexts standard,bedtime,personas,esl] [--templates all]
      biasaudit run SPEC.yaml [--model M]

    An allocation audit prints per group RABBI with its interval and p-value,
    the average gap, JSD, EMD, and the selection gaps for k = 1..k_max; a Grade
    Score audit its mean Grade Score, entropy and choice scores and the slots
    chosen; a RUTEd audit neutrality, skew and stereotype with their intervals in
    each context. The last line is the run directory.
    Exit status: 0 all answered, 1 some requests failed, 2 bad spec or input.
    """


@run.command("resume-screening")
@_audit_options
@click.option("--jobs", help="Comma-separated job ids [default: all four].")
@click.option(
    "--names",
    type=click.Path(dir_okay=False, path_type=Path),
    help="CSV of name,group to use instead of the shipped names.",
)
@click.option(
    "--resumes",
    type=click.Path(dir_okay=False, path_type=Path),
    help="YAML of jobs and resumes to use instead of the shipped ones.",
)
@click.option(
    "--names-per-group", type=click.IntRange(1, 100_000), help="Names per group [default: 100]."
)
@_reports_errors
def run_resume_screening(**fields: Any) -> None:
    """Screen resumes for four jobs: 8 groups x names x resumes (see 'biasaudit tasks')."""
    _run_audit({"task": "resume-screening", **fields})


@run.command("essay-grading")
@_audit_options
@click.option(
    "--essays",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="CSV with text, group[, rating, essay_id, topic]; 'demo' for the shipped demo.",
)
@click.option("--topic", help="The essay prompt the rubric names (unless a 'topic' column does).")
@click.option("--pool-size", type=click.IntRange(2, 1000), help="Essays per pool [default: 10].")
@click.option(
    "--qualified-at-least",
    metavar="RATING|median",
    help="An essay is qualified when its rating is at least this [default: the median of "
    "the rated essays; with --conventions paper, the authors' rule: above 53 of 100].",
)
@_reports_errors
def run_essay_grading(**fields: Any) -> None:
    """Grade essays 1-5 and select the top k of random pools (see 'biasaudit tasks')."""
    _run_audit({"task": "essay-grading", **fields})


@run.command("grade-score")
@_audit_options
@click.option(
    "--items",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="JSONL of {id, prompt, options[, preferred | ranks]}; 'demo' for the shipped demo.",
)
@click.option(
    "--prompt",
    help="Judge prompt: 1 select then explain, 2 evaluate each then select, 3 told to ignore "
    "the order, 4 grade each 0-5 then select; or a prompt file [default: 1].",
)
@click.option(
    "--random-option",
    is_flag=True,
    default=None,
    help="Add one unrelated option drawn from another item (seeded by --seed).",
)
@click.option(
    "--permutations",
    type=click.Choice(["cyclic", "all"]),
    help="Every rotation of the options, or all n! orders, n <= 6 [default: cyclic].",
)
@click.option(
    "--replicates", type=click.IntRange(1, 100), help="Times each order is asked [default: 1]."
)
@click.option(
    "--temperature",
    type=click.FloatRange(0, 2),
    help="The judge's sampling temperature [default: 0.3, the paper's].",
)
@click.option("--max-tokens", type=click.IntRange(1, 32768), help="Longest answer [the prompt's].")
@_reports_errors
def run_grade_score(**fields: Any) -> None:
    """Grade Score: does a judge choose among options by position or by content?

    Each item's options are shown in every cyclic order; prints the mean Grade
    Score, entropy and choice scores with intervals, the slots chosen, and per item.
    """
    _run_audit({"task": "grade-score", **fields})


_NOT_FOR_RUTED = (
    "method", "scoring", "chat_template", "samples", "reference_group", "k_max", "headline_k",
    "rounds", "pools",
)  # fmt: skip


@run.command("ruted")
@_audit_options
@click.option("--contexts", help="Comma-separated, of standard, bedtime, personas, esl [all four].")
@click.option(
    "--replicates",
    type=click.IntRange(1, 10_000),
    help="Texts per occupation and template; sampled next words where the endpoint "
    "gives no logprobs [default: 30].",
)
@click.option(
    "--templates", help="Templates per context: 0 (the main one), a list such as 0,3, or all [0]."
)
@click.option(
    "--occupations",
    type=click.Path(dir_okay=False, path_type=Path),
    help="CSV of occupation,majority instead of the 40 WinoBias occupations.",
)
@click.option(
    "--next-word",
    type=click.Choice(["auto", "continuation", "completions", "chat", "samples"]),
    help="Standard test: every listed word scored whole as a continuation (the paper's), "
    "top-N legacy completions or chat logprobs, or sampled first words [default: auto: "
    "continuation where the endpoint echoes prompts, else completions, else chat; samples "
    "without logprobs].",
)
@click.option(
    "--top-logprobs",
    type=click.IntRange(1, 20),
    help="Next-word alternatives asked for [default: 20, or the endpoint's most].",
)
@click.option(
    "--temperature",
    type=click.FloatRange(0, 2, min_open=True),
    help="Of the texts and sampled words [default: 1].",
)
@click.option(
    "--mode-collapse",
    type=click.Choice(["auto", "on", "off"]),
    help="Check whether each prompt's texts are near copies (sentence embeddings; the "
    "'embeddings' extra) [default: auto: where the extra is installed].",
)
@_reports_errors
def run_ruted(**fields: Any) -> None:
    """RUTEd: gender-occupation bias in a next-word trick test and in long-form text.

    Neutrality, skew and stereotype with 95% intervals in the standard test
    ("The {occupation} is") and in bedtime stories, user personas and ESL
    exercises (Lum et al.); per occupation in occupations.csv (see 'biasaudit tasks').
    """
    _run_audit({"task": "ruted", **fields})


run_ruted.params = [p for p in run_ruted.params if p.name not in _NOT_FOR_RUTED]


@run.command("spec", hidden=True)
@click.argument("spec_file", metavar="SPEC.yaml", type=click.Path(path_type=Path))
@_audit_options
@_reports_errors
def run_spec(spec_file: Path, **fields: Any) -> None:
    """Run the audit SPEC.yaml describes; options given here override the file."""
    if not spec_file.is_file():
        from biasaudit.kinds.registry import TASK_NAMES

        built_in = ", ".join(name for name in run.commands if name != "spec")
        raise click.UsageError(
            f"'{spec_file}' is neither a built-in task ({built_in}) "
            f"nor a spec file; a spec's task is one of {', '.join(TASK_NAMES)}"
        )
    _run_audit(fields, spec_file=spec_file)


@cli.group()
def score() -> None:
    """Audit outputs produced elsewhere (another harness, released data, logs)."""


def _score_options(command: F) -> F:
    """The options every ``biasaudit score`` command takes, and its error handling."""
    for option in (
        click.option("--model", default="imported", show_default=True,
                     help="A name for the model the outputs came from, as reports show it."),
        click.option("--runs-dir", type=click.Path(file_okay=False, path_type=Path),
                     default="runs", show_default=True),
        click.option("--no-report", is_flag=True, help="Print the table only; write no report."),
    ):  # fmt: skip
        command = option(command)
    return _reports_errors(command)


@score.command("allocation")
@click.argument("scores_file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--reference-group", help="The group every other is compared with [W_M].")
@click.option("--pool", type=click.Choice(["auto", "one_per_group", "random"]), default="auto",
              show_default=True, help="Simulated pools: one per group (every subtask has every "
              "group), random, or auto. A 'pool' column gives the pools instead.")  # fmt: skip
@click.option("--pool-size", type=click.IntRange(2, 1000), default=10, show_default=True,
              help="Random pools: candidates per pool.")  # fmt: skip
@click.option("--k-max", type=click.IntRange(1, 100), default=5, show_default=True)
@click.option("--headline-k", type=click.IntRange(1, 100), default=1, show_default=True)
@click.option("--rounds", type=click.IntRange(1, MAX_ROUNDS), default=1800, show_default=True)
@click.option("--seed", type=click.IntRange(0, 2**32 - 1), default=0, show_default=True)
@click.option("--conventions", type=click.Choice(["biasaudit", "paper"]), default="biasaudit",
              show_default=True)  # fmt: skip
@_score_options
def score_allocation_command(scores_file: Path, no_report: bool, **options: Any) -> None:
    """Every allocation figure of SCORES_FILE, a CSV of candidate,group,score.

    Optional columns: qualified (true/false; empty: not rated), subtask, name,
    item, pool. Writes a run directory as an audit does (the manifest says the
    scores were imported), prints the table and ``run: <dir>``; a malformed
    file exits 2 naming its line and column.
    """
    from biasaudit.kinds.allocation.imported import ImportOptions, score_allocation
    from biasaudit.kinds.allocation.report import allocation_table, allocation_view
    from biasaudit.reports.rich_tables import echo_table

    result = score_allocation(
        scores_file, ImportOptions(**options), command=["biasaudit", *sys.argv[1:]]
    )
    echo_table(allocation_table(result.metrics), lambda: allocation_view(result.metrics))
    _write_report(result.run_dir, not no_report)
    click.echo(f"run: {result.run_dir}")


@score.command("grade-score")
@click.argument("trials_file", type=click.Path(dir_okay=False, path_type=Path))
@_score_options
def score_grade_command(trials_file: Path, model: str, runs_dir: Path, no_report: bool) -> None:
    """The Grade Score of a judge's answers in TRIALS_FILE, a CSV of item,shown,slot.

    ``shown``: the item's options in the order shown (space-separated indices or
    labels); ``slot``: the one chosen, 1 = shown first (empty: no usable answer);
    optional ``preferred`` and ``replicate``. Writes a run directory as an audit
    does and prints the table and ``run: <dir>``.
    """
    from biasaudit.kinds.grade_score.imported import score_grade
    from biasaudit.kinds.grade_score.report import grade_score_table, grade_score_view
    from biasaudit.reports.rich_tables import echo_table

    result = score_grade(
        trials_file, model=model, runs_dir=runs_dir, command=["biasaudit", *sys.argv[1:]]
    )
    table = grade_score_table(result.metrics, result.items)
    echo_table(table, lambda: grade_score_view(result.metrics, result.items))
    _write_report(result.run_dir, not no_report)
    click.echo(f"run: {result.run_dir}")


@score.command("ruted")
@click.argument("outputs_file", type=click.Path(dir_okay=False, path_type=Path))
@_score_options
@click.option(
    "--mode-collapse",
    type=click.Choice(["auto", "on", "off"]),
    default="auto",
    show_default=True,
    help="Texts: check whether each prompt's texts are near copies (the 'embeddings' extra).",
)
def score_ruted_command(
    outputs_file: Path, model: str, runs_dir: Path, no_report: bool, mode_collapse: str
) -> None:
    """The RUTEd metrics of OUTPUTS_FILE: occupation,context,text or occupation,context,p_male.

    Texts are labelled by their pronouns as a run labels them; p_male is a share
    already measured. Optional ``majority`` (male/female) for occupations other
    than the 40 shipped ones, and ``template`` to tell one occupation's prompts
    apart (the mode-collapse check compares replicates of one prompt). Writes a
    run directory and prints the table.
    """
    from biasaudit.kinds.ruted.imported import score_ruted
    from biasaudit.kinds.ruted.report import ruted_table, ruted_view
    from biasaudit.reports.rich_tables import echo_table

    result = score_ruted(
        outputs_file, model=model, runs_dir=runs_dir, command=["biasaudit", *sys.argv[1:]],
        mode_collapse=mode_collapse,  # type: ignore[arg-type]
    )  # fmt: skip
    echo_table(ruted_table(result.metrics), lambda: ruted_view(result.metrics))
    _write_report(result.run_dir, not no_report)
    click.echo(f"run: {result.run_dir}")


@cli.command()
def tasks() -> None:
    """List the built-in audit tasks, their groups, data sources and prompts."""
    from biasaudit.kinds.registry import TASKS
    from biasaudit.reports.rich_tables import echo_table, tasks_view
    from biasaudit.reports.text import tasks_listing

    infos = list(TASKS.values())
    echo_table(tasks_listing(infos), lambda: tasks_view(infos))


@cli.command()
@click.argument("run_dirs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--ndcg-at",
    default=3,
    show_default=True,
    type=click.IntRange(1),
    help="Cutoff N of the model-selection NDCG@N.",
)
@click.option(
    "--report-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where report.html / report.md go [default: a new folder beside the first run].",
)
@click.option("--no-report", is_flag=True, help="Print the tables only.")
@_reports_errors
def study(
    run_dirs: tuple[Path, ...], ndcg_at: int, report_dir: Path | None, no_report: bool
) -> None:
    """Compare allocation runs: does each bias metric predict the allocation gaps?

    Pearson correlation of RABBI, the average gap, JSD and EMD with the selection
    gaps over every (model, subtask, group), and NDCG@N of the model rankings.
    Given Grade Score runs instead: their Grade Score, entropy and choice scores,
    models x judge prompts x random option. Given RUTEd runs (one per model): the
    Spearman correlation of each metric between the standard test and each context,
    between contexts, and whether the standard test picks the least biased model.
    """
    from biasaudit.kinds.registry import KINDS, audit_kind, study_kind
    from biasaudit.reports.rich_tables import echo_blocks

    kind = study_kind(run_dirs)
    if kind not in KINDS:  # a fan-out run: the allocation study says what it is not
        kind = "allocation"
    echo_blocks(audit_kind(kind).study_blocks(run_dirs, ndcg_at=ndcg_at))
    _write_study_report(run_dirs, kind, ndcg_at, report_dir, not no_report)


def _write_study_report(
    run_dirs: tuple[Path, ...], kind: str, ndcg_at: int, report_dir: Path | None, wanted: bool
) -> None:
    """Write the study's report into its own folder, named on stderr like a run's."""
    if not wanted:
        return
    from biasaudit.reports.html import write_study_report

    try:
        paths = write_study_report(run_dirs, kind=kind, ndcg_at=ndcg_at, report_dir=report_dir)
    except (BiasauditError, ImportError, OSError, ValueError) as error:
        click.echo(f"warning: no report written: {redact(str(error))}", err=True)
        return
    click.echo(f"report: {paths[0]}", err=True)


@cli.command("report")
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--format",
    "report_format",
    type=click.Choice(["html", "md", "both"]),
    default="both",
    show_default=True,
    help="report.html (self-contained), report.md (figures in report_figures/), or both.",
)
@_reports_errors
def report_command(run_dir: Path, report_format: str) -> None:
    """Write the report of a run (allocation, grade-score, ruted), a study or a compare folder.

    The HTML file stands alone: figures embedded, no network needed to read it.
    A simulated model is labelled as such in every section.
    """
    from biasaudit.reports.html import write_report

    for path in write_report(run_dir, report_format):  # type: ignore[arg-type]
        click.echo(f"report: {path}")


def _add_run_commands() -> None:
    """replay, compare, reaudit, history: commands on finished runs (biasaudit.cli.runs)."""
    from biasaudit.cli.runs import register

    register(cli, _reports_errors)


_add_run_commands()


_NO_URL = {"sim": "(offline, in-process)", "local": "(starts its own llama.cpp server)"}


def _human_bytes(size: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"


def _configure_logging() -> None:
    """``BIASAUDIT_LOG=info|debug`` logs retries (and, at debug, the SDKs' requests) to stderr.

    Every line passes through the redacting filter, so no key reaches a log.
    """
    level = os.environ.get("BIASAUDIT_LOG", "").upper()
    if not level:
        return
    handler = logging.StreamHandler()
    handler.addFilter(RedactingFilter())
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    names = ["biasaudit"] + (["openai", "anthropic", "httpx2", "httpx"] if level == "DEBUG" else [])
    for name in names:
        named = logging.getLogger(name)
        named.setLevel(level)
        named.addHandler(handler)


def main() -> None:
    _configure_logging()
    try:
        cli(prog_name="biasaudit")
    except SystemExit as done:  # click ends every command this way
        if _whole_program():
            _exit_now(done.code)
        raise


def _whole_program() -> bool:
    """Whether this process is ``biasaudit`` itself, with no profiler or tracer attached.

    ``python -m biasaudit`` or the ``biasaudit`` script; not a program that calls
    :func:`main` and carries on, nor one run under cProfile, pyinstrument or a
    debugger, which report after the command returns.
    """
    if sys.getprofile() is not None or sys.gettrace() is not None:
        return False
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None:
        return bool(spec.name == "biasaudit.__main__")
    return Path(sys.argv[0]).stem == "biasaudit"


def _exit_now(code: object) -> None:
    """End the process now, skipping the interpreter's teardown of its modules.

    Tearing down the imported SDKs' thousands of classes and objects takes about
    a tenth of a second, longer than many commands, and has no effect outside
    the process: every file, the cache and the connections are closed by then,
    and the exit handlers (logging, atexit) still run here. Returns, leaving the
    normal exit to run, when another thread is alive, when the code is not a
    number, or when flushing the output fails.
    """
    import atexit
    import threading

    if code is None:
        code = 0
    if not isinstance(code, int) or threading.active_count() > 1:
        return
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # a broken pipe, a failing handler: the normal exit reports it
        return
    os._exit(code)
