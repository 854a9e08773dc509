"""The ``biasaudit`` command: a thin shell over the library.

This is the only place where an exception becomes a message and an exit code:
0 success, 1 some requests failed or the run stopped, 2 a usage or input error,
130 interrupted (143 by SIGTERM, 129 by SIGHUP: 128 and the signal's number). Set
``BIASAUDIT_DEBUG=1`` to get the traceback instead.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import os
import sys
import textwrap
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import click

from biasaudit._version import __version__
from biasaudit.cli.flags import no_report_option, no_report_param, runs_dir_option
from biasaudit.errors import BiasauditError
from biasaudit.secrets import RedactingFilter, redact

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
            from biasaudit.engine.loop import stopping_signal
            from biasaudit.errors import signal_name

            signum = stopping_signal()
            click.echo(
                f"interrupted ({signal_name(signum)}): answers received so far are in the cache",
                err=True,
            )
            sys.exit(128 + signum)

    return wrapper  # type: ignore[return-value]


class _Group(click.Group):
    """A group that lists each command by its whole first sentence, wrapped, where click
    cuts it at the terminal's width with "..." (the CLI reference reads the same)."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = []
        for name in self.list_commands(ctx):
            summary = self.summary(ctx, name)
            if summary is not None:
                rows.append((name, summary))
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def summary(self, ctx: click.Context, name: str) -> str | None:
        """A command's first sentence, whole; None for a hidden one."""
        command = self.get_command(ctx, name)
        if command is None or command.hidden:
            return None
        return command.get_short_help_str(limit=_WHOLE)


_WHOLE = 10_000  # no command's first sentence is longer: never cut


class _LazyGroup(_Group):
    """A group some of whose commands are made only when they run or show their help
    (their options come from pydantic models), listed meanwhile by their short help."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy: dict[str, tuple[str, Callable[[], click.Command]]] = {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy and name not in self.commands:
            self.add_command(self.lazy[name][1](), name)
        return super().get_command(ctx, name)

    def summary(self, ctx: click.Context, name: str) -> str | None:
        if name in self.lazy and name not in self.commands:
            return self.lazy[name][0]
        return super().summary(ctx, name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="biasaudit")
def cli() -> None:
    """Audit large language models for bias in the decisions built on them."""


def _fanout_command() -> click.Command:
    """``biasaudit fanout``: its options are :class:`~biasaudit.engine.fanout.FanoutOptions`."""
    from biasaudit.cli.options import field_options
    from biasaudit.engine.fanout import FanoutOptions

    prompts = click.Argument(["prompts"], type=click.Path(dir_okay=False, path_type=Path))
    return click.Command(
        "fanout",
        params=[prompts, *field_options(FanoutOptions)],
        callback=_reports_errors(fanout),
        help=fanout.__doc__,
    )


def fanout(prompts: Path, **fields: Any) -> None:
    """Send every prompt in PROMPTS.jsonl to a model, with caching, retries and rate limits.

    Each line is {"id": ..., "messages": [...]} (chat) or {"id": ..., "prompt": "..."}
    (legacy completions), with optional "params" (max_tokens, temperature, top_p,
    logprobs, top_logprobs, n, seed, stop, reasoning_effort) and "replicate" (int).
    Exit status: 0 all answered, 1 some failed, 2 bad input.
    """
    from biasaudit.cli.options import given
    from biasaudit.engine.fanout import FanoutOptions, fanout as run
    from biasaudit.spec import validated

    command = ["biasaudit", *sys.argv[1:]]
    options = validated(FanoutOptions, {**given(fields), "command": command}, "command line")
    if not options.replay:
        _start_early(options.model_dump())
    result = run(prompts, options)
    manifest, counts = result.manifest, result.manifest.counts
    label = " (simulated model)" if manifest.simulated else ""
    answered = counts.requests - counts.failures
    batched = f" ({counts.batched} answered through batches)" if counts.batched else ""
    click.echo(
        f"fanout of {counts.requests} prompts to {options.model}{label}: {answered} answered, "
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


cli.lazy["fanout"] = ((fanout.__doc__ or "").strip().splitlines()[0], _fanout_command)


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


@cli.group(cls=_Group)
def cache() -> None:
    """Inspect the response cache."""


@cache.command("stats")
@runs_dir_option("The runs folder whose cache to read.", default=Path("runs"), show_default=True)
@click.option(
    "--cache",
    "cache_path",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Cache file [default: RUNS_DIR/cache.sqlite].",
)
@_reports_errors
def cache_stats(runs_dir: Path, cache_path: Path | None) -> None:
    """Entries, size and hit counts by model."""
    from biasaudit.errors import UsageError
    from biasaudit.store.cache import ResponseCache

    path = cache_path or runs_dir / "cache.sqlite"
    if not path.exists():
        raise UsageError(
            f"no cache at {path} (a run keeps its answers in the cache of its --runs-dir, "
            "runs/cache.sqlite by default, relative to where it ran; give --runs-dir or --cache)"
        )
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
    """List the provider names biasaudit knows, with what their endpoints can do, and
    the providers that installed packages add (entry points 'biasaudit.providers')."""
    from biasaudit.providers import KNOWN_PROVIDERS, ProviderInfo, provider_plugins

    def row(name: str, info: ProviderInfo, note: str) -> tuple[str, str, str, str, str]:
        caps = info.capabilities
        logprobs = {True: "yes", False: "no", None: "unknown"}[caps.logprobs]
        if caps.logprobs and caps.max_top_logprobs:
            logprobs += f" ({caps.max_top_logprobs})"
        where = info.base_url or _NO_URL.get(info.kind, "(--base-url)")
        return (name, where, info.key_env or "-", logprobs, note)

    cells = [row(name, info, info.note) for name, info in KNOWN_PROVIDERS.items()]
    for name, (plugin, package) in provider_plugins().items():
        if isinstance(plugin, BaseException):
            cells.append((name, "-", "-", "-", f"plugin of {package}: could not be loaded "
                          f"({type(plugin).__name__}: {redact(str(plugin))})"))  # fmt: skip
        elif name in KNOWN_PROVIDERS:
            cells.append((name, "-", "-", "-", f"plugin of {package}: the built-in name wins"))
        else:
            kind = "plugin" if plugin.build is not None else "openai"
            info = ProviderInfo(kind, plugin.base_url, plugin.key_env, plugin.capabilities)
            own = "its own API" if plugin.build is not None else "OpenAI-compatible"
            note = f"plugin of {package} ({own})" + (f"; {plugin.note}" if plugin.note else "")
            cells.append(row(name, info, note))
    other = "any other name with --base-url: an OpenAI-compatible server"
    headers = ("provider", "base URL", "key variable", "logprobs", "note")
    widths = [max(len(h), *(len(cell[i]) for cell in cells)) for i, h in enumerate(headers[:4])]
    line = " ".join(f"{{:<{width}}}" for width in widths) + " {}"
    lines = [line.format(*headers), *(line.format(*cell) for cell in cells), other]
    from biasaudit.reports.rich_tables import echo_table, listing_view

    echo_table(lines, lambda: listing_view(headers, cells, left=5, below=[other]))


_RUN_ONLY = [
    no_report_param(
        "Skip report.html / report.md (write them later with 'biasaudit report').", default=None
    ),
    click.Option(
        ["--dry-run", "dry_run"],
        is_flag=True,
        default=None,
        help="Print requests, cache hits, estimated tokens and cost; send nothing.",
    ),
    click.Option(
        ["--max-cost", "max_cost"],
        type=click.FloatRange(min=0),
        metavar="USD",
        help="Refuse to start above this estimated cost; stop cleanly on reaching it.",
    ),
    click.Option(
        ["--prices", "prices"],
        type=click.Path(dir_okay=False, path_type=Path),
        help="YAML of model prices over the shipped ones [$BIASAUDIT_PRICES].",
    ),
]
"""The options of ``biasaudit run`` that are not the spec's: what to do with it."""


def _run_audit(fields: dict[str, Any], *, spec_file: Path | None = None) -> None:
    """Validate the spec, run the audit (whatever its kind), print its table and
    ``run: <dir>``, and exit 0, or 1 when some requests got no answer."""
    from biasaudit.cli.options import given
    from biasaudit.kinds.registry import run_spec
    from biasaudit.reports.rich_tables import echo_blocks
    from biasaudit.spec import load_spec, parse_spec

    spec_fields = given(fields)
    report = not spec_fields.pop("no_report", False)
    budget = {name: spec_fields.pop(name) for name in ("dry_run", "max_cost", "prices")
              if name in spec_fields}  # fmt: skip
    if spec_file is not None:
        if "model" in spec_fields:  # the command line's models replace the spec's
            spec_fields["models"] = ()
        spec = load_spec(spec_file, spec_fields)
    else:
        if "model" not in spec_fields:
            raise click.UsageError("Missing option '--model' / '-m'.")
        spec = parse_spec(spec_fields, source="command line")
    if not budget.get("dry_run") and not spec.replay:
        _note_unused_planning(spec)
    if spec.models:
        _run_many(spec, budget, report)
        return
    budgeted = None
    if not spec.replay:
        from biasaudit.cli.runs import check_budget

        if not budget.get("dry_run"):
            _start_early(spec.model_dump())
        budgeted = check_budget(spec, **budget)  # exits after a dry run
    finished = run_spec(spec, provider=budgeted, command=["biasaudit", *sys.argv[1:]])
    echo_blocks(finished.blocks)
    if budgeted is not None:
        click.echo(f"spent: ${budgeted.spent:.4f} of ${budgeted.max_cost:g}")
    _write_report(finished.run_dir, report and finished.run_dir.joinpath("metrics.json").is_file())
    click.echo(f"run: {finished.run_dir}")
    sys.exit(finished.exit_code)


def _note_unused_planning(spec: Any) -> None:
    """A note for planning options this run does not read: ``--detect``, ``--like`` and
    ``--pilot`` plan with ``--dry-run`` (and the first two steer ``--until``); without
    either, the audit runs at the size asked, which a user who forgot ``--dry-run`` pays
    for in full."""
    if getattr(spec, "until", None) is not None:
        unused = ["--pilot"] if getattr(spec, "pilot", None) is not None else []
    else:
        unused = [f"--{name}" for name in ("detect", "like", "pilot")
                  if getattr(spec, name, None) is not None]  # fmt: skip
    if unused:
        named = " and ".join([", ".join(unused[:-1]), unused[-1]] if len(unused) > 1 else unused)
        click.echo(
            f"note: {named} plan{'s' if len(unused) == 1 else ''} with "
            "--dry-run (--detect and --like also steer --until); this run uses neither, "
            "and runs at the size asked",
            err=True,
        )


def _run_many(spec: Any, budget: Any, report: bool) -> None:
    """The audit ``spec`` describes on each of its ``models`` at once (one thread and
    event loop each, so a slow endpoint does not hold up the others; one cache; one
    progress board), each run's table and report, the study across them, and last the
    ``run:`` line of each model, in the order given (as a single run ends with its own).
    Exit 0, or 1 when a run stopped or some requests got no answer."""
    import functools

    from biasaudit.cli.runs import check_budgets
    from biasaudit.engine.loop import Interrupted, run_in_threads
    from biasaudit.engine.progress import ProgressBoard
    from biasaudit.errors import RunAbortedError
    from biasaudit.kinds.registry import FinishedAudit, run_spec
    from biasaudit.reports.rich_tables import echo_blocks

    specs = [spec.for_model(model) for model in spec.models]
    providers = check_budgets(specs, **budget)  # exits after a dry run
    command = ["biasaudit", *sys.argv[1:]]
    board = ProgressBoard()
    jobs = [
        functools.partial(run_spec, one, provider=provider, stderr=board.stream(one.model),
                          command=command)
        for one, provider in zip(specs, providers, strict=True)
    ]  # fmt: skip
    try:
        results = run_in_threads(jobs)
    except Interrupted as interrupted:
        board.close()
        for result in interrupted.results:
            run_dir = getattr(result, "run_dir", None)
            if run_dir:
                click.echo(f"run: {run_dir}")
        raise
    finally:
        board.close()
    code = 0
    finished: list[FinishedAudit] = []
    run_lines: list[str] = []  # printed last, one a model, as a single run ends with its own
    for one, provider, result in zip(specs, providers, results, strict=True):
        if isinstance(result, BiasauditError):
            click.echo(f"error: {one.model}: {redact(str(result))}", err=True)
            run_dir = getattr(result, "run_dir", None)
            if run_dir:
                run_lines.append(f"run: {run_dir}")
            code = max(code, 1 if isinstance(result, RunAbortedError) else result.exit_code)
            continue
        if isinstance(result, BaseException):
            raise result
        echo_blocks(result.blocks)
        if provider is not None and hasattr(provider, "spent"):
            click.echo(f"spent: ${provider.spent:.4f} of ${provider.max_cost:g}")
        metrics = result.run_dir.joinpath("metrics.json").is_file()
        _write_report(result.run_dir, report and metrics)
        click.echo("")
        run_lines.append(f"run: {result.run_dir}")
        code = max(code, result.exit_code)
        if metrics:
            finished.append(result)
    if len(finished) >= 2:
        from biasaudit.kinds.registry import audit_kind

        kind = audit_kind(finished[0].kind)
        run_dirs = tuple(r.run_dir for r in finished)
        echo_blocks(kind.study_blocks(kind.study(run_dirs, ndcg_at=3)))
        _write_study_report(run_dirs, finished[0].kind, 3, None, report)
    for line in run_lines:
        click.echo(line)
    sys.exit(code)


def _write_report(run_dir: Path, wanted: bool) -> None:
    """Write the run's report.html and report.md, naming them on stderr (stdout stays the table).

    A report that cannot be drawn is a warning: the audit itself is done and kept.
    """
    if not wanted:
        return
    from biasaudit.engine.progress import phase
    from biasaudit.reports.html import write_report

    try:
        with phase("writing the report"):
            paths = write_report(run_dir)
    except (BiasauditError, ImportError, OSError, ValueError) as error:
        click.echo(f"warning: no report written: {redact(str(error))}", err=True)
        return
    click.echo(f"report: {paths[0]}", err=True)


class _TaskOrSpec(_Group):
    """``biasaudit run TASK [OPTIONS]``, or ``biasaudit run SPEC.yaml [OPTIONS]``.

    Each task's command is made from its kind's declaration when it is asked for:
    its options are its spec's fields (:mod:`biasaudit.cli.options`).
    """

    def list_commands(self, ctx: click.Context) -> list[str]:
        from biasaudit.kinds.registry import command_specs

        return list(command_specs())

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        from biasaudit.kinds.registry import command_specs

        if name == "spec":
            return _spec_command()
        spec_class = command_specs().get(name)
        return None if spec_class is None else _task_command(name, spec_class)

    def format_help_text(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The help, each built-in task's usage line from its declaration (``TaskInfo``)."""
        from biasaudit.kinds.registry import TASKS

        width = max((formatter.width or 80) - formatter.current_indent - 2, 40)
        usages = "\n".join(
            textwrap.fill(info.usage, width, initial_indent="    ", subsequent_indent="        ")
            for info in TASKS.values() if "SPEC.yaml" not in info.usage
        )  # fmt: skip
        text = inspect.cleandoc(self.help or "").replace("    TASK USAGES", usages)
        formatter.write_paragraph()
        with formatter.indentation():
            formatter.write_text(text)

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        if args and not args[0].startswith("-") and args[0] not in self.list_commands(ctx):
            return "SPEC", _spec_command(), args
        return super().resolve_command(ctx, args)


class _TaskCommand(click.Command):
    """A task's command: an option of another task is named as such."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as error:
            from biasaudit.spec import owner_of

            field = error.option_name.lstrip("-").replace("-", "_")
            owner = owner_of(field, self.name)
            if owner is None:
                raise
            raise click.UsageError(f"{error.option_name} is {owner}", ctx) from None


def _task_command(task: str, spec_classes: tuple[type[Any], ...]) -> click.Command:
    """``biasaudit run <task>``: one option a field of the task's specs (several where
    several kinds take the task, told apart by ``--method``)."""
    from biasaudit.cli.options import field_options, merged_options

    def run_task(**fields: Any) -> None:
        _run_audit({**fields, "task": task})

    if len(spec_classes) == 1:
        params = field_options(spec_classes[0], skip=("task",))
    else:
        params = merged_options(spec_classes, skip=("task",), required=True)
    return _TaskCommand(
        task,
        params=[*params, *_RUN_ONLY],
        callback=_reports_errors(run_task),
        help=spec_classes[0].__doc__,
    )


def _spec_command() -> click.Command:
    """``biasaudit run SPEC.yaml``: the options of every spec, checked by the file's."""
    from biasaudit.cli.options import merged_options
    from biasaudit.kinds.registry import TASK_NAMES, VARIANTS

    specs = [found for classes in VARIANTS.values() for found in classes]

    def run_file(spec_file: Path, **fields: Any) -> None:
        if not spec_file.is_file():
            import difflib

            tasks = list(run.list_commands(click.get_current_context()))
            near = difflib.get_close_matches(str(spec_file), tasks, n=1, cutoff=0.8)
            from biasaudit.errors import UsageError

            hint = f"Did you mean '{near[0]}'? " if near else ""
            what = "a folder, " if spec_file.is_dir() else ""
            looks_like_a_file = len(spec_file.parts) > 1 or spec_file.suffix in (
                ".yaml", ".yml", ".json")  # fmt: skip
            if looks_like_a_file and not spec_file.exists():
                from biasaudit.cli.flags import no_such_spec_file

                raise no_such_spec_file(spec_file)
            raise UsageError(
                f"{hint}'{spec_file}' is {what}neither a built-in task ({', '.join(tasks)}) "
                f"nor a spec file; a spec's task is one of {', '.join(TASK_NAMES)}"
            )
        _run_audit(fields, spec_file=spec_file)

    spec_file = click.Argument(["spec_file"], metavar="SPEC.yaml", type=click.Path(path_type=Path))
    return click.Command(
        "spec",
        params=[spec_file, *merged_options(specs, skip=("task",)), *_RUN_ONLY],
        callback=_reports_errors(run_file),
        help="Run the audit SPEC.yaml describes; options given here override the file.",
        hidden=True,
    )


@cli.group(cls=_TaskOrSpec)
def run() -> None:
    """Run an audit: a built-in task, or any task described in SPEC.yaml.

    \b
        TASK USAGES
        biasaudit run SPEC.yaml [--model M]

    Each task's help lists its own options ('biasaudit run TASK --help'). The
    last line printed is the run directory.
    Exit status: 0 all answered, 1 some requests failed, 2 bad spec or input.
    """


class _Scorers(_Group):
    """``biasaudit score <kind> FILE``: a command per kind."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        from biasaudit.kinds.registry import KINDS

        return [name for name in KINDS if _scores(name)]

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        return _score_command(name) if _scores(name) else None


def _scores(name: str) -> bool:
    """Whether kind ``name`` declares score options (an optional step): asks its class,
    importing none of its modules."""
    from biasaudit.kinds.registry import KINDS, audit_kind

    return name in KINDS and audit_kind(name).declares("score_options")


@cli.group(cls=_Scorers)
def score() -> None:
    """Audit outputs produced elsewhere (another harness, released data, logs)."""


def _score_command(name: str) -> click.Command:
    """``biasaudit score <name> FILE``: one option a field of the kind's score options."""
    from biasaudit.cli.options import field_options
    from biasaudit.kinds.registry import audit_kind

    kind = audit_kind(name)
    model = kind.score_options()
    assert model is not None  # only kinds that declare it have a command (_scores)

    def score_file(path: Path, no_report: bool, **fields: Any) -> None:
        from biasaudit.cli.options import given
        from biasaudit.engine.progress import phase
        from biasaudit.reports.rich_tables import echo_blocks
        from biasaudit.spec import validated

        options = validated(model, given(fields), "command line")
        with phase(f"reading {path.name} and computing the figures"):
            result = kind.score(path, options, command=["biasaudit", *sys.argv[1:]])
        echo_blocks(kind.run_blocks(result.metrics, result.run_dir))
        _write_report(result.run_dir, not no_report)
        click.echo(f"run: {result.run_dir}")

    path = click.Argument(
        ["path"], metavar=kind.score_argument, type=click.Path(dir_okay=False, path_type=Path)
    )
    no_report = no_report_param("Print the table only; write no report.")
    return click.Command(
        name,
        params=[path, *field_options(model), no_report],
        callback=_reports_errors(score_file),
        help=kind.score_help,
    )


@cli.command()
@click.argument("folder", required=False, default="examples",
                type=click.Path(file_okay=False, path_type=Path))  # fmt: skip
@_reports_errors
def examples(folder: Path) -> None:
    """Copy the example files the README and the docs use into FOLDER (default:
    examples).

    The examples ship with the package, so the commands of the README and the docs
    (biasaudit run examples/my-task.yaml, ...) work after a plain pip install, in the
    folder the examples were copied into. A file of the same name that you have
    edited is kept, and named; running it again copies nothing new. The last line
    printed is the folder.
    """
    from biasaudit.store.files import copy_examples

    copied, kept = copy_examples(folder)
    for name in kept:
        click.echo(f"kept {folder / name}: it differs from the shipped one (yours is left as "
                   "it is; remove it to get the shipped one)", err=True)  # fmt: skip
    click.echo(f"{len(copied)} example files in {folder}")
    click.echo(f"examples: {folder}")


@cli.command()
def tasks() -> None:
    """List the built-in audit tasks, their groups, data sources and prompts."""
    from biasaudit.kinds.registry import TASKS
    from biasaudit.reports.rich_tables import echo_table, tasks_listing, tasks_view

    infos = list(TASKS.values())
    echo_table(tasks_listing(infos), lambda: tasks_view(infos))
    from biasaudit.kinds.registry import BROKEN_KINDS

    for name, why in BROKEN_KINDS.items():
        click.echo(f"warning: the installed kind '{name}' could not be loaded ({why}); "
                   "its tasks are left out", err=True)  # fmt: skip


@cli.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--what",
    type=click.Choice(["figures", "scores", "responses", "prompts"]),
    default="figures",
    show_default=True,
    help="figures: every figure, one row each (long form); scores: each run's per-unit "
    "results; responses: every answer; prompts: every request as it was sent.",
)
@click.option(
    "--format",
    "file_format",
    type=click.Choice(["csv", "parquet", "jsonl"]),
    default="csv",
    show_default=True,
    help="Parquet needs pyarrow (pip install 'biasaudit[parquet]').",
)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, path_type=Path),
    help="The file to write [default: ./biasaudit-WHAT.FORMAT].",
)
@_reports_errors
def export(runs: tuple[Path, ...], what: str, file_format: str, output: Path | None) -> None:
    """Write the runs' figures, scores or answers as one table (CSV, Parquet or JSON
    lines), with each row's run, kind, task and model: the same tables as
    biasaudit.load_runs, load_scores and load_responses.

    RUNS are run directories, folders of them (runs) or globs; what they also match
    and is not a run (the cache, study and compare folders) is skipped with a note.
    """
    from biasaudit.frames import export_runs

    target = output or Path(f"biasaudit-{what}.{file_format}")
    frame = export_runs(runs, target, what=what, format=file_format)  # type: ignore[arg-type]
    for note in frame.attrs.get("skipped", []):
        click.echo(f"note: skipped {note}", err=True)
    count = frame["run"].nunique()
    click.echo(f"{len(frame)} rows of {count} run{'s' if count != 1 else ''}: {target}")


@cli.command()
@click.argument("name", required=False)
@click.option(
    "--write",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write every schema into FOLDER as NAME.json instead of printing one.",
)
@_reports_errors
def schema(name: str | None, folder: Path | None) -> None:
    """Print the JSON Schema NAME: of the spec file or of a run file. Without NAME,
    list the schemas and where the package's copies lie.

    Editors validate a spec with the spec schema (in YAML: a first line
    '# yaml-language-server: $schema=PATH'); other tools read runs with the others.
    """
    import json

    from biasaudit.kinds.schemas import SCHEMA_NAMES, json_schema, shipped_schema, write_schemas

    if folder is not None:
        from biasaudit.errors import UsageError

        try:
            written = write_schemas(folder)
        except OSError as error:
            raise UsageError(f"{folder}: cannot write there ({error.strerror or error})") from None
        for path in written:
            click.echo(str(path))
    elif name is None:
        for known, what in SCHEMA_NAMES.items():
            click.echo(f"{known:<20} {what}")
        click.echo(f"\nshipped in {shipped_schema('spec').parent}")
    else:
        click.echo(json.dumps(json_schema(name), indent=2, ensure_ascii=False))


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
@no_report_option("Print the tables only.")
@_reports_errors
def study(
    run_dirs: tuple[Path, ...], ndcg_at: int, report_dir: Path | None, no_report: bool
) -> None:
    """Compare runs of one kind side by side: several models, prompts or settings.

    Allocation runs: does each bias metric predict the allocation gaps? Pearson
    correlation of RABBI, the average gap, JSD and EMD with the selection gaps over
    every (model, subtask, group), and NDCG@N of the model rankings. Grade Score
    runs: their Grade Score, entropy and choice scores, models x judge prompts x
    random option. RUTEd runs (one per model): the Spearman correlation of each
    metric between the standard test and each context, between contexts, and
    whether the standard test picks the least biased model. Listwise and decisions
    runs: their figures side by side, run by run.

    What a glob such as runs/* also matches (the cache file, earlier study and
    compare folders, fan-out runs) is skipped with a note; a missing path is an error.
    """
    from biasaudit.engine.progress import phase
    from biasaudit.kinds.registry import audit_kind, runs_to_study, study_kind
    from biasaudit.reports.rich_tables import echo_blocks

    found_runs, skipped = runs_to_study(run_dirs)
    for note in skipped:
        click.echo(f"note: {note}", err=True)
    run_dirs = tuple(found_runs)
    kind = study_kind(run_dirs)
    found = audit_kind(kind)
    with phase(f"studying {len(run_dirs)} runs"):
        result = found.study(run_dirs, ndcg_at=ndcg_at)
    echo_blocks(found.study_blocks(result))
    _write_study_report(run_dirs, kind, ndcg_at, report_dir, not no_report)


def _write_study_report(
    run_dirs: tuple[Path, ...], kind: str, ndcg_at: int, report_dir: Path | None, wanted: bool
) -> None:
    """Write the study's report into its own folder, named on stderr like a run's."""
    if not wanted:
        return
    from biasaudit.engine.progress import phase
    from biasaudit.reports.html import write_study_report

    try:
        with phase("writing the study's report"):
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
    """Write the report of a run (any kind of audit), a study or a compare folder.

    The HTML file stands alone: figures embedded, no network needed to read it.
    A simulated model is labelled as such in every section.
    """
    from biasaudit.engine.progress import phase
    from biasaudit.reports.html import write_report

    with phase("writing the report"):
        paths = write_report(run_dir, report_format)  # type: ignore[arg-type]
    for path in paths:
        click.echo(f"report: {path}")


def _add_run_commands() -> None:
    """replay, compare, reaudit, history: commands on finished runs (biasaudit.cli.runs);
    ll144: the Local Law 144 summary (biasaudit.cli.ll144); experiment: an audit under
    each intervention (biasaudit.cli.experiment)."""
    from biasaudit.cli import experiment, ll144
    from biasaudit.cli.runs import register

    register(cli, _reports_errors)
    cli.add_command(ll144.command(_reports_errors))
    cli.add_command(experiment.command(_reports_errors))


_add_run_commands()


_NO_URL = {
    "sim": "(offline, in-process)",
    "local": "(starts its own llama.cpp server)",
    "plugin": "(the plugin's own)",
}


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


# What a terminal or file in a legacy encoding (Latin-1, Windows' cp1252, ASCII) gets
# for the characters of the tables it cannot show: a reading, not a crash or a '?'.
_PLAIN = {
    "Δ": "D", "δ": "delta", "±": "+/-", "≥": ">=", "≤": "<=", "≠": "!=", "≈": "~",
    "—": "-", "–": "-", "…": "...", "×": "x", "→": "->", "←": "<-", "½": "1/2", "²": "^2",  # noqa: RUF001
    "·": ".", "‘": "'", "’": "'", "“": '"', "”": '"', "•": "*", "√": "sqrt", "∞": "inf",  # noqa: RUF001
    "χ": "chi", "α": "alpha", "β": "beta", "μ": "mu", "σ": "sigma", "§": "S", "\u2009": " ",  # noqa: RUF001
}  # fmt: skip


def _plain(error: UnicodeError) -> tuple[str, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    text = error.object[error.start : error.end]
    return "".join(_PLAIN.get(character, "?") for character in text), error.end


def _streams_that_never_fail_to_encode() -> None:
    """Let stdout and stderr write what their encoding lacks in plain ASCII (``_PLAIN``)
    instead of raising UnicodeEncodeError: output redirected to a file on Windows, or a
    terminal in a Latin-1 locale, gets every table."""
    import codecs

    codecs.register_error("biasaudit-plain", _plain)
    for stream in (sys.stdout, sys.stderr):
        reconfigure = getattr(stream, "reconfigure", None)
        if reconfigure is not None and getattr(stream, "errors", None) == "strict":
            reconfigure(errors="biasaudit-plain")


def main() -> None:
    _streams_that_never_fail_to_encode()
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
