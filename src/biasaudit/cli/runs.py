"""Commands on finished runs: ``replay``, ``compare``, ``reaudit`` and ``history``.

A thin shell like :mod:`biasaudit.cli`, which adds these commands to its
group with :func:`register` (and lends its error handler, so exceptions
become messages and exit codes in one place).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, cast

import click

from biasaudit.cli.flags import (
    alpha_option,
    bootstrap_option,
    no_report_option,
    no_such_spec_file,
    runs_dir_option,
)

if TYPE_CHECKING:
    from biasaudit.pricing import BudgetedProvider
    from biasaudit.reports.history import FailOn
    from biasaudit.spec import AuditSpec

__all__ = ["COST_NOTICE_ENV", "check_budget", "check_budgets", "register"]

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]
COST_NOTICE_ENV = "BIASAUDIT_COST_NOTICE"
"""Estimated US dollars above which a run prints its estimate before it starts (default 1)."""


def check_budget(
    spec: AuditSpec,
    *,
    dry_run: bool = False,
    max_cost: float | None = None,
    prices: Path | None = None,
) -> BudgetedProvider | None:
    """Before ``biasaudit run``: the dry run, the cost notice, and the budget.

    Returns None when the run goes ahead as usual, or, given ``max_cost``, the
    provider that keeps the run within it (the caller runs the audit through it
    and reports what it spent); a ``dry_run`` prints the estimate and exits 0.
    Free models (sim, local, self-hosted) skip the estimate unless asked.

    Raises
    ------
    UsageError
        The estimate exceeds ``max_cost``, or the model has no price and
        ``max_cost`` is given; nothing is sent.
    """
    from biasaudit.engine.loop import run_async
    from biasaudit.errors import UsageError
    from biasaudit.pricing import BudgetedProvider, estimate_spec_cost, load_prices
    from biasaudit.textfiles import env_number

    notice = env_number(COST_NOTICE_ENV, 1.0)  # refused up front when malformed
    table = load_prices(prices)
    price = table.price(spec.model, base_url=spec.base_url)
    if not dry_run and max_cost is None and (price is None or price.input == price.output == 0):
        return None
    provider = spec.resolve_provider(need_key=not dry_run)
    try:
        estimate = estimate_spec_cost(spec, provider, table)
    except BaseException:
        run_async(provider.aclose())
        raise
    if dry_run:
        try:
            lines = estimate.lines() + _power_lines(spec, provider, table)
        finally:
            run_async(provider.aclose())
        for line in lines:
            click.echo(line)
        sys.exit(0)
    cost = estimate.cost
    if max_cost is not None and (cost is None or cost > max_cost):
        run_async(provider.aclose())
        why = "its price is unknown" if cost is None else f"the estimate is ${cost:.4f}"
        raise UsageError(
            f"--max-cost ${max_cost:g}: not started, {why} "
            f"({estimate.to_send} requests to send); nothing was sent"
        )
    if max_cost is not None or (cost or 0.0) > notice:
        for line in estimate.lines()[1:]:
            click.echo(line, err=True)
    if max_cost is None:
        run_async(provider.aclose())
        return None
    assert estimate.price is not None
    return BudgetedProvider(provider, estimate.price, max_cost)


def _power_lines(spec: AuditSpec, provider: Any, table: Any) -> list[str]:
    """The dry run's planning lines where the spec asks (``--detect``, ``--until``) and its
    kind plans them."""
    if getattr(spec, "detect", None) is None and getattr(spec, "until", None) is None:
        return []
    from biasaudit.kinds.registry import kind_of_spec
    from biasaudit.pricing import estimate_spec_cost

    kind = kind_of_spec(spec)

    def cost_at(sized: AuditSpec) -> tuple[int, float | None]:
        estimate = estimate_spec_cost(sized, provider, table)
        return estimate.to_send, estimate.cost

    found: list[str] = []
    if getattr(spec, "until", None) is not None:
        from biasaudit.kinds._rounds import growth_for, until_lines

        found += until_lines(spec, growth_for(kind, spec), cost_at)
    like = getattr(spec, "like", None)
    if getattr(spec, "detect", None) is not None and like is not None:
        click.echo(f"planning from {like} (a refit of its figures: seconds to a minute)",
                   err=True)  # fmt: skip
    found += kind.plan_power(spec, cost_at)
    return found


def check_budgets(
    specs: list[AuditSpec],
    *,
    dry_run: bool = False,
    max_cost: float | None = None,
    prices: Path | None = None,
) -> list[Any]:
    """:func:`check_budget` for the runs of several models at once: the provider each
    run goes through (None: resolved by the run as usual).

    Every model's provider is resolved first, so an unknown provider or a missing key
    stops them all before anything is sent. A dry run prints each model's estimate and
    their total, and exits 0. ``max_cost`` holds for the whole: it is shared among
    the models in proportion to their estimates.

    Raises
    ------
    UsageError
        An unknown provider or missing key; the total estimate exceeds ``max_cost``, or
        a model has no price and ``max_cost`` is given; nothing is sent.
    """
    from biasaudit.engine.loop import run_async
    from biasaudit.errors import UsageError
    from biasaudit.pricing import BudgetedProvider, estimate_spec_cost, load_prices

    if specs[0].replay:
        return [None] * len(specs)
    for spec in specs:
        try:
            run_async(spec.resolve_provider(need_key=not dry_run).aclose())
        except UsageError as error:
            raise UsageError(f"{spec.model}: {error}") from None
    if not dry_run and max_cost is None:
        return [None] * len(specs)
    table = load_prices(prices)
    estimates = []
    for spec in specs:
        provider = spec.resolve_provider(need_key=not dry_run)
        try:
            estimates.append((provider, estimate_spec_cost(spec, provider, table)))
        except BaseException:
            run_async(provider.aclose())
            raise
    costs = [estimate.cost for _, estimate in estimates]
    known = None if any(cost is None for cost in costs) else sum(c or 0.0 for c in costs)
    if dry_run:
        for spec, (provider, estimate) in zip(specs, estimates, strict=True):
            run_async(provider.aclose())
            click.echo(f"{spec.model}:")
            for line in estimate.lines():
                click.echo(f"  {line}")
        total = "unknown (a model has no price)" if known is None else f"${known:.4f}"
        click.echo(f"all {len(specs)} models: {total}")
        sys.exit(0)
    assert max_cost is not None
    if known is None or known > max_cost:
        for provider, _ in estimates:
            run_async(provider.aclose())
        why = "a model's price is unknown" if known is None else f"the estimate is ${known:.4f}"
        raise UsageError(
            f"--max-cost ${max_cost:g}: not started, {why} for the {len(specs)} models; "
            "nothing was sent"
        )
    budgeted: list[Any] = []
    for (provider, estimate), cost in zip(estimates, costs, strict=True):
        assert estimate.price is not None and cost is not None
        share = max_cost * (cost / known) if known > 0 else max_cost / len(specs)
        budgeted.append(BudgetedProvider(provider, estimate.price, share))
    return budgeted


def register(group: click.Group, reports_errors: Decorator) -> None:
    """Add the commands of this module to ``group``."""
    for build in (_replay_command, _compare_command, _reaudit_command, _history_command):
        group.add_command(build(reports_errors))


_NO_REPORT = no_report_option("Skip report.html / report.md ('biasaudit report' later).")


def _write_reports(write: Callable[[], list[Path]], label: str | None = None) -> None:
    """Write reports after the command's output, naming the HTML files on stderr
    (``label``: a spinner while they are drawn, for the longer ones).

    A report that cannot be drawn is a warning: the run or comparison is done and kept.
    """
    from contextlib import nullcontext

    from biasaudit.engine.progress import phase
    from biasaudit.errors import BiasauditError
    from biasaudit.secrets import redact

    try:
        with phase(label) if label else nullcontext():
            paths = write()
    except (BiasauditError, ImportError, OSError, ValueError) as error:
        click.echo(f"warning: no report written: {redact(str(error))}", err=True)
        return
    for path in paths:
        if path.suffix == ".html":
            click.echo(f"report: {path}", err=True)


def _replay_experiment(folder: Path, cache: Path | None, no_report: bool) -> None:
    """``biasaudit replay`` of a mitigation experiment's folder: every arm replayed, the
    experiment analysed again; exits 0 reproduced, 1 something differs."""
    from biasaudit.experiments.runner import replay_experiment
    from biasaudit.reports.experiment import experiment_blocks
    from biasaudit.reports.rich_tables import echo_blocks

    result, differences = replay_experiment(folder, cache=cache)
    echo_blocks(experiment_blocks(result.experiment))
    if differences:
        shown = ", ".join(differences[:10])
        more = f" and {len(differences) - 10} more" if len(differences) > 10 else ""
        click.echo(f"replay: differs from {folder} at {shown}{more}", err=True)
    else:
        click.echo(f"replay: every arm's metrics and every effect identical to {folder}")
    if not no_report:
        from biasaudit.reports.html import write_report

        _write_reports(lambda: write_report(result.folder))
    click.echo(f"experiment: {result.folder}")
    sys.exit(1 if differences else 0)


def _replay_command(reports_errors: Decorator) -> click.Command:
    from biasaudit.kinds import KINDS

    @click.command(
        "replay",
        help="""Rebuild a run's scores, metrics and table from the cache; sends nothing.

        Works for runs of every audit kind ("""
        + ", ".join(KINDS)
        + """), for fanout runs, and for a mitigation experiment's folder (every arm
        replayed, the experiment analysed again). The replay is a new run (its manifest names the
        original in 'replay_of'); it checks that the metrics come out as the original's.
        Exit status: 0 reproduced, 1 the metrics differ, 2 something is missing (named).
        """,
    )
    @click.argument("run_dir", type=click.Path(file_okay=False, path_type=Path))
    @click.option(
        "--cache",
        "cache_path",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Cache file [default: the run's, else one next to the run directory].",
    )
    @runs_dir_option("Where the replay's run goes [default: beside the original].")
    @_NO_REPORT
    @reports_errors
    def replay(
        run_dir: Path, cache_path: Path | None, runs_dir: Path | None, no_report: bool = False
    ) -> None:
        from biasaudit.replay import ROUNDING, replay_run

        if (run_dir / "experiment.json").is_file():
            _replay_experiment(run_dir, cache_path, no_report)
        result = replay_run(
            run_dir, cache=cache_path, runs_dir=runs_dir, command=["biasaudit", *sys.argv[1:]]
        )
        from biasaudit.kinds.registry import read_metrics
        from biasaudit.reports.rich_tables import audit_view, echo_table

        echo_table(
            result.table,
            None
            if result.kind == "fanout"
            else lambda: audit_view(
                read_metrics(result.run_dir, result.kind), result.run_dir, result.kind
            ),
        )
        if result.differences:
            shown = ", ".join(result.differences[:10])
            more = len(result.differences) - 10
            shown += f" and {more} more" if more > 0 else ""
            click.echo(f"replay: differs from {run_dir} at {shown}", err=True)
        else:
            what = "responses" if result.kind == "fanout" else "metrics"
            rounded = (
                f"; {len(result.rounded)} figures equal to within rounding (relative "
                f"{ROUNDING:g}: the last bits another CPU, BLAS or thread count gives)"
                if result.rounded
                else ""
            )
            click.echo(f"replay: {what} identical to {run_dir} (request counts aside{rounded})")
        if result.redefined:
            from biasaudit.replay import REDEFINED

            meanings = "; ".join(
                f"{path}: {REDEFINED[path.rpartition('.')[2]]}" for path in result.redefined
            )
            click.echo(
                f"replay: the original's metrics.json is of an older layout; not compared, "
                f"as their meaning changed since: {meanings}",
                err=True,
            )
        if result.added:
            click.echo(
                f"replay: the original's metrics.json is of an older layout; not compared, "
                f"as it has none: {', '.join(result.added[:10])}",
                err=True,
            )
        from biasaudit.kinds.registry import KINDS

        if not no_report and result.kind in KINDS:
            from biasaudit.reports.html import write_report

            _write_reports(lambda: write_report(result.run_dir))
        click.echo(f"run: {result.run_dir}")
        sys.exit(result.exit_code)

    return replay


def _compare_command(reports_errors: Decorator) -> click.Command:
    @click.command("compare")
    @click.argument("run_a", type=click.Path(file_okay=False, path_type=Path))
    @click.argument("run_b", type=click.Path(file_okay=False, path_type=Path))
    @alpha_option()
    @bootstrap_option()
    @click.option("--all", "show_all", is_flag=True, help="Show every figure, changed or not.")
    @click.option(
        "--json",
        "json_path",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Also write the comparison, every test included, to this JSON file.",
    )
    @click.option(
        "--report-dir",
        type=click.Path(file_okay=False, path_type=Path),
        help="Where compare.json and report.html / report.md go "
        "[default: a new folder beside RUN_B].",
    )
    @no_report_option("Print the comparison only; write no folder.")
    @click.option(
        "--allow-different-settings",
        is_flag=True,
        help="Give a verdict even when the runs asked differently (prompt, items, method, "
        "scoring path, seeds); the verdict names the differences.",
    )
    @reports_errors
    def compare(
        run_a: Path,
        run_b: Path,
        alpha: float,
        bootstrap: int,
        show_all: bool,
        json_path: Path | None,
        report_dir: Path | None = None,
        no_report: bool = False,
        allow_different_settings: bool = False,
    ) -> None:
        """What changed from RUN_A to RUN_B, with significance.

        Model versions and system fingerprints the endpoints reported; for each
        figure (per group for allocation runs) the difference B - A with its 95%
        interval and a test of no change, Holm-adjusted; and a verdict: no change,
        changed, or model version changed without measurable change. Runs that
        asked differently (prompt, items, method, ...) get no verdict unless
        --allow-different-settings. Unless --no-report, writes compare.json,
        report.html and report.md into a new folder beside RUN_B (named on
        stderr). Two experiments' folders (biasaudit experiment): each shared arm
        compared, and each intervention's effect tested for a change (the folder gets
        experiment-compare.json, and each arm's comparison in arm-NAME/). Exit
        status 0.
        """
        from biasaudit.engine.progress import phase
        from biasaudit.reports.compare import compare_runs, comparison_lines
        from biasaudit.store.experiments import EXPERIMENT_FILE

        if (run_a / EXPERIMENT_FILE).is_file() or (run_b / EXPERIMENT_FILE).is_file():
            from biasaudit.reports.experiment import compare_experiments, comparison_blocks
            from biasaudit.reports.rich_tables import echo_blocks

            with phase("comparing the experiments"):
                found = compare_experiments(run_a, run_b, alpha=alpha, bootstrap=bootstrap)
            echo_blocks(comparison_blocks(found))
            if json_path is not None:
                _write_json(json_path, found.to_json())
            if not no_report:
                from biasaudit.reports.html import write_experiment_compare_report

                _write_reports(
                    lambda: write_experiment_compare_report(found, report_dir=report_dir),
                    "writing the comparison's report",
                )
            return
        with phase("comparing the runs"):
            comparison = compare_runs(
                run_a, run_b, alpha=alpha, bootstrap=bootstrap,
                allow_different_settings=allow_different_settings,
            )  # fmt: skip
        from biasaudit.reports.rich_tables import comparison_view, echo_table

        lines = comparison_lines(comparison, show_all=show_all)
        echo_table(lines, lambda: comparison_view(comparison, show_all=show_all))
        if json_path is not None:
            _write_json(json_path, comparison.to_json())
        if not no_report:
            from biasaudit.reports.html import write_compare_report

            _write_reports(lambda: write_compare_report(comparison, report_dir=report_dir))

    return compare


def _write_json(path: Path, data: Any) -> None:
    """``--json FILE``: ``data`` written whole, or a usage error naming the file."""
    import json

    from biasaudit.errors import UsageError
    from biasaudit.store.files import write_text

    try:
        write_text(path, json.dumps(data, indent=2) + "\n")
    except OSError as error:
        raise UsageError(f"--json: cannot write {path} ({error.strerror or error})") from None


def _reaudit_command(reports_errors: Decorator) -> click.Command:
    @click.command("reaudit")
    @click.argument(
        "spec_file", metavar="SPEC.yaml", type=click.Path(dir_okay=False, path_type=Path)
    )
    @click.option(
        "--history",
        type=click.Path(file_okay=False, path_type=Path),
        help="Runs folder holding the past runs [default: the spec's runs_dir].",
    )
    @click.option(
        "--fail-on",
        type=click.Choice(["drift", "version", "any"]),
        help="Exit 3 when a figure changed, the model version changed, or either.",
    )
    @alpha_option()
    @_NO_REPORT
    @reports_errors
    def reaudit(
        spec_file: Path,
        history: Path | None,
        fail_on: str | None,
        alpha: float,
        no_report: bool = False,
    ) -> None:
        """Run SPEC.yaml afresh and compare it with its latest run in the history.

        The model is asked again (cached answers are not read, new ones are
        stored); the comparison is printed and kept in the new run as
        compare.json, with the run's report.html and the comparison's
        compare.html (unless --no-report). A spec that lists interventions is
        re-audited as a mitigation experiment: every arm afresh, compared with the
        latest experiment of the same audit and interventions, arm by arm and effect
        by effect (drift: an arm's audit or an intervention's effect changed). Exit
        status: 0, 1 some requests failed, 2 bad spec, 3 the --fail-on condition was
        met (for cron or a CI schedule).
        """
        from biasaudit.errors import StorageUnusableError
        from biasaudit.experiments.runner import load_experiment_spec
        from biasaudit.reports.compare import comparison_lines
        from biasaudit.reports.history import reaudit as run_reaudit

        if not spec_file.is_file():
            raise no_such_spec_file(spec_file)
        try:
            if load_experiment_spec(spec_file)[1]:  # it lists interventions: an experiment
                _reaudit_experiment(spec_file, history, cast("FailOn | None", fail_on), alpha,
                                    no_report)  # fmt: skip
            result = run_reaudit(
                spec_file,
                history=history,
                fail_on=cast("FailOn | None", fail_on),
                alpha=alpha,
                command=["biasaudit", *sys.argv[1:]],
            )
        except StorageUnusableError as error:  # its advice in this command's own options
            advice = str(error).replace(
                "give --runs-dir a folder, or --cache a file in a writable folder",
                "give --history a folder that may be written, or the spec's cache a file in one",
            )
            advice = advice.replace("give --runs-dir a folder", "give --history a folder")
            raise StorageUnusableError(advice) from None
        from biasaudit.reports.rich_tables import comparison_view, echo_blocks, echo_table

        finished = result.finished
        echo_blocks(finished.blocks)
        click.echo("")
        if result.comparison is None:
            click.echo("baseline: none (the first completed run of this spec here)")
        else:
            click.echo(f"baseline: {result.baseline}")
            comparison = result.comparison
            echo_table(comparison_lines(comparison), lambda: comparison_view(comparison))
        if result.alert:
            click.echo(f"alert: --fail-on {fail_on} met", err=True)
        if not no_report and (result.finished.run_dir / "metrics.json").is_file():
            from biasaudit.reports.html import write_report

            _write_reports(lambda: write_report(result.finished.run_dir))
        click.echo(f"run: {result.finished.run_dir}")
        sys.exit(result.exit_code)

    return reaudit


def _reaudit_experiment(
    spec_file: Path, history: Path | None, fail_on: FailOn | None, alpha: float, no_report: bool
) -> NoReturn:
    """``biasaudit reaudit`` of a spec that lists interventions: the experiment afresh,
    compared with its latest one (:func:`biasaudit.reports.history.reaudit_experiment`)."""
    from biasaudit.reports.experiment import comparison_blocks, experiment_blocks
    from biasaudit.reports.history import reaudit_experiment
    from biasaudit.reports.rich_tables import echo_blocks

    result = reaudit_experiment(
        spec_file, history=history, fail_on=fail_on, alpha=alpha,
        command=["biasaudit", *sys.argv[1:]], progress=lambda line: click.echo(line, err=True),
    )  # fmt: skip
    folder = result.finished.folder
    echo_blocks(experiment_blocks(result.finished.experiment))
    click.echo("")
    if result.comparison is None:
        click.echo("baseline: none (the first experiment of this spec and its interventions here)")
    else:
        click.echo(f"baseline: {result.baseline}")
        echo_blocks(comparison_blocks(result.comparison))
    if result.alert:
        click.echo(f"alert: --fail-on {fail_on} met", err=True)
    if not no_report:
        from biasaudit.reports.html import write_experiment_compare_report, write_report

        _write_reports(lambda: [p for p in write_report(folder) if p.parent == folder],
                       "writing the experiment's report")  # fmt: skip
        comparison = result.comparison
        if comparison is not None:
            _write_reports(lambda: write_experiment_compare_report(
                comparison, report_dir=folder / "compare")[:2],
                "writing the comparison's report")  # fmt: skip
    click.echo(f"experiment: {folder}")
    sys.exit(result.exit_code)


def _history_command(reports_errors: Decorator) -> click.Command:
    @click.command("history")
    @click.option(
        "--spec",
        "spec_file",
        metavar="SPEC.yaml",
        type=click.Path(dir_okay=False, path_type=Path),
        help="Only the runs of this spec (its runs_dir, unless --runs-dir).",
    )
    @runs_dir_option("The runs folder [default: the spec's runs_dir, else runs].")
    @reports_errors
    def history(spec_file: Path | None, runs_dir: Path | None) -> None:
        """Past audit runs, oldest first: date, status, model versions, headline figures."""
        from biasaudit.experiments.runner import arm_specs, load_experiment_spec
        from biasaudit.reports.history import experiment_history, list_history

        spec, interventions = (None, []) if spec_file is None else load_experiment_spec(
            spec_file)  # fmt: skip
        folder = runs_dir or (spec.runs_dir if spec is not None else Path("runs"))
        if spec is not None and interventions:  # an experiment's spec: its experiments
            resolved = [arm.intervention for _, arm in arm_specs(spec, interventions)[1:]]
            entries = experiment_history(folder, spec, resolved)
        else:
            entries = list_history(folder, spec)
        if not entries:
            where = (
                "" if folder.is_dir() else (" (a file)" if folder.exists() else " (no such folder)")
            )
            click.echo(f"no audit runs in {folder}{where}" + (" of this spec" if spec else ""))
            return
        from biasaudit.reports.history import history_table
        from biasaudit.reports.rich_tables import echo_table, history_view

        echo_table(history_table(entries), lambda: history_view(entries))

    return history
