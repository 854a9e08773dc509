"""``biasaudit experiment``: one audit under each intervention, paired
(:mod:`biasaudit.experiments`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from biasaudit.cli.flags import alpha_option, bootstrap_option, no_report_option, no_such_spec_file

__all__ = ["command"]


def command(reports_errors: Callable[[Any], Any]) -> click.Command:
    """The ``experiment`` command, its errors reported as every command's are."""

    @click.command("experiment")
    @click.argument("spec_file", type=click.Path(dir_okay=False, path_type=Path))
    @click.option(
        "-i",
        "--intervention",
        "interventions",
        multiple=True,
        metavar="NAME[=WHERE:TEXT]",
        help="An intervention to try (repeatable), after the spec's 'interventions': a "
        "built-in (illegal, ignore-demographics, really-dont-discriminate, fair-system, "
        "hide-names, initials) or NAME=system:TEXT, NAME=prepend:TEXT, NAME=append:TEXT, "
        "NAME=names:placeholder, NAME=names:initials.",
    )
    @alpha_option()
    @bootstrap_option()
    @click.option(
        "--dry-run",
        is_flag=True,
        help="Print what each arm would send and cost (the cache counted), send nothing.",
    )
    @click.option("--all", "show_all", is_flag=True, help="Print every figure of every arm.")
    @no_report_option("Print the tables only; write no report.html / report.md.")
    @reports_errors
    def experiment(
        spec_file: Path,
        interventions: tuple[str, ...],
        alpha: float,
        bootstrap: int,
        dry_run: bool,
        show_all: bool,
        no_report: bool,
    ) -> None:
        """Run the audit SPEC_FILE describes as it is and under each intervention, and
        show what each one removed of the bias beside what it cost.

        Every arm is an ordinary run asking the same units with the same draws, orders
        and seeds, so each intervention's effect on each figure is paired unit by unit
        (Holm-adjusted over every intervention and figure); beside it, the shift of the
        decisions, their spread and validity, irregular answers and tokens. An
        intervention that removes bias by flattening the decisions is labelled so. The
        spec's 'interventions' lists interventions as --intervention takes them, or as
        mappings (name, system, prepend, append, names). Writes experiment.json,
        report.html, report.md and evidence.html (every answer under every arm side by
        side) into a new folder in the runs folder.
        """
        from biasaudit.engine.progress import phase
        from biasaudit.experiments.runner import (
            arm_specs,
            load_experiment_spec,
            read_interventions,
            run_experiment,
        )
        from biasaudit.reports.experiment import experiment_blocks
        from biasaudit.reports.rich_tables import echo_blocks

        if not spec_file.is_file():
            raise no_such_spec_file(spec_file)
        spec, listed = load_experiment_spec(spec_file)
        listed += read_interventions(list(interventions), "--intervention")
        if dry_run:
            from biasaudit.pricing import estimate_spec_cost, load_prices

            arms, prices = arm_specs(spec, listed), load_prices()
            total_send, total_cost, known = 0, 0.0, True
            for name, arm in arms:
                estimate = estimate_spec_cost(arm, arm.resolve_provider(need_key=False), prices)
                click.echo(f"arm {name}:")
                for line in estimate.lines():
                    click.echo(f"  {line}")
                total_send += estimate.to_send
                known = known and estimate.cost is not None
                total_cost += estimate.cost or 0.0
            money = f"${total_cost:.4f}" if known else "unknown"
            click.echo(f"experiment: {len(arms)} arms, {total_send} requests to send, "
                       f"estimated cost {money}; nothing was sent")  # fmt: skip
            return
        result = run_experiment(
            spec, listed, stderr=None, alpha=alpha, bootstrap=bootstrap,
            progress=lambda line: click.echo(line, err=True),
        )  # fmt: skip
        echo_blocks(experiment_blocks(result.experiment, everything=show_all))
        if not no_report:
            from biasaudit.reports.html import write_report

            with phase("writing the experiment's report"):
                for path in write_report(result.folder):
                    if path.suffix == ".html" and path.parent == result.folder:
                        click.echo(f"report: {path}", err=True)
        click.echo(f"experiment: {result.folder}")
        if result.exit_code:  # some arm's requests failed: as a run's exit status
            raise SystemExit(result.exit_code)

    return experiment
