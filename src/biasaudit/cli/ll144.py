"""``biasaudit ll144``: the summary of results of a NYC Local Law 144 bias audit, from an
employer's file of outcomes (:mod:`biasaudit.reports.ll144`)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from biasaudit.errors import UsageError

__all__ = ["command"]


def _date(value: str | None, option: str) -> dt.date | None:
    if value is None:
        return None
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise UsageError(f"{option} {value[:40]!r}: write the date as YYYY-MM-DD") from None


def command(reports_errors: Callable[[Any], Any]) -> click.Command:
    """The ``ll144`` command, its errors reported as every command's are."""

    @click.command("ll144")
    @click.argument("data", type=click.Path(path_type=Path))
    @click.option(
        "--sex",
        "sex",
        default="sex",
        show_default=True,
        metavar="COLUMN",
        help="The column of each person's sex.",
    )
    @click.option(
        "--race",
        "race",
        default="race",
        show_default=True,
        metavar="COLUMN",
        help="The column of each person's race/ethnicity (the EEO-1 categories).",
    )
    @click.option(
        "--ethnicity",
        metavar="COLUMN",
        help="A column saying whether each person is Hispanic or Latino (yes/no), "
        "where the race column holds the race alone.",
    )
    @click.option(
        "--selected",
        metavar="COLUMN",
        help="The tool selects or classifies: the column of its outcome (1 selected, "
        "0 not) [default: a column named 'selected'].",
    )
    @click.option(
        "--score",
        metavar="COLUMN",
        help="The tool scores: the column of its score; rates are the shares above "
        "the median [default: a column named 'score'].",
    )
    @click.option(
        "--label",
        "labels",
        multiple=True,
        metavar="RAW=CATEGORY",
        help="Read your file's label RAW as the rule's CATEGORY (or 'unknown'), "
        "e.g. --label 'W=White'. Again for each label.",
    )
    @click.option(
        "--data",
        "data_kind",
        type=click.Choice(["historical", "test"]),
        help="The tool's historical data (§5-302(a)), or test data where too little "
        "exists (§5-302(b)) [default: historical for a file, test for an audit's run].",
    )
    @click.option(
        "--scoring",
        is_flag=True,
        help="A pointwise audit's run: scoring rates (the share above the median score) "
        "instead of the selection rates of its pools' top K.",
    )
    @click.option(
        "--k",
        "k",
        type=click.IntRange(1, 1000),
        metavar="K",
        help="An audit's run: the rates of the top K places [default: its headline k].",
    )
    @click.option(
        "--source",
        default="",
        metavar="TEXT",
        help="Where the data came from and why it was used; for test data, how it "
        "was made. Printed in the summary.",
    )
    @click.option("--tool", default="", metavar="NAME", help="The tool audited.")
    @click.option(
        "--distribution-date",
        metavar="YYYY-MM-DD",
        help="When the tool was first distributed or used.",
    )
    @click.option("--audit-date", metavar="YYYY-MM-DD", help="[default: today]")
    @click.option(
        "--exclude-small",
        "small",
        default="",
        metavar="JUSTIFICATION",
        help="Leave categories under 2% of the data out of the impact ratios "
        "(§5-301(d)), for this stated reason; their counts and rates stay.",
    )
    @click.option(
        "--confidence",
        type=click.FloatRange(0.5, 0.999),
        default=0.95,
        show_default=True,
        help="Of every interval.",
    )
    @click.option(
        "--out",
        type=click.Path(file_okay=False, path_type=Path),
        default=Path("ll144-summary"),
        show_default=True,
        help="Where summary.md, .html, .csv and .json are written (replaced).",
    )
    @reports_errors
    def ll144(
        data: Path, sex: str, race: str, ethnicity: str | None, selected: str | None,
        score: str | None, labels: tuple[str, ...], data_kind: str | None, source: str,
        tool: str,
        distribution_date: str | None, audit_date: str | None, small: str,
        confidence: float, out: Path, k: int | None, scoring: bool,
    ) -> None:  # fmt: skip
        """The summary of results of a Local Law 144 bias audit.

        DATA is an employer's CSV file with one row per person the tool assessed (their
        sex, their race/ethnicity and the tool's outcome: selected or not, or a score),
        or the run directory of an allocation or listwise audit (test data: its
        candidates are invented; its rates are those of the top K places). Writes the
        selection (or scoring) rate and the impact ratio of every sex, race/ethnicity and
        intersectional category, each with its interval and the four-fifths flag, the
        number of individuals of an unknown category and the facts the rule asks the
        summary to state. A label that is none of the rule's categories stops it before
        anything is written, naming the line and the field.
        """
        from biasaudit.reports.ll144 import (
            SummaryInfo,
            counted_words,
            file_source,
            no_category_known,
            nobody_counted,
            outcomes_evidence,
            parse_labels,
            read_outcomes,
            run_evidence,
            run_rates,
            summarise,
            write_summary,
        )

        if selected and score:
            raise UsageError("give --selected or --score, not both")
        is_run = data.is_dir()
        if is_run and not (data / "manifest.json").is_file():
            from biasaudit.kinds.registry import selecting_audit_in_words

            raise UsageError(
                f"{data} is a folder but not a run directory (no manifest.json): DATA is an "
                f"employer's outcomes CSV file or the run directory of {selecting_audit_in_words()}"
            )
        info = SummaryInfo(
            data=data_kind or ("test" if is_run else "historical"),  # type: ignore[arg-type]
            source=source,
            tool=tool,
            distribution_date=_date(distribution_date, "--distribution-date"),
            audit_date=_date(audit_date, "--audit-date") or dt.date.today(),
            small_justification=small,
            confidence=confidence,
        )
        from biasaudit.engine.progress import phase

        with phase("reading the outcomes and computing the rates"):
            if is_run:
                if selected or score or ethnicity or labels or small:
                    raise UsageError(
                        f"{data} is a run directory: --selected, --score, --ethnicity, --label and "
                        "--exclude-small read an employer's file"
                    )
                rates, found = run_rates(data, k, scoring=scoring)
                evidence = run_evidence(data)
            else:
                if k is not None or scoring:
                    raise UsageError(
                        "--k and --scoring read an audit's run; an employer's file has its outcome "
                        "(--selected or --score)"
                    )
                outcomes = read_outcomes(
                    data, sex=sex, race=race, ethnicity=ethnicity, selected=selected,
                    score=score, labels=parse_labels(list(labels)),
                )  # fmt: skip
                rates, found = summarise(outcomes, info), file_source(outcomes)
                evidence = outcomes_evidence(outcomes, rates)
        unnamed = [f"{what} ({option})" for option, value, what in (
            ("--tool", tool, "the tool audited"),
            ("--source", source or is_run, "where the data came from"),  # a run says itself
        ) if not value]  # fmt: skip
        if unnamed:
            click.echo(f"warning: the summary does not name {' nor '.join(unnamed)}; give "
                       f"{'them' if len(unnamed) > 1 else 'it'} before publishing the summary",
                       err=True)  # fmt: skip
        with phase("writing the summary"):
            paths = write_summary(rates, found, info, out, evidence)
        flagged = sum(bool(row.below_four_fifths) for row in rates.rows)
        beyond = sum(row.beyond_noise for row in rates.rows)
        verdict = f"{flagged} categories under four fifths, {beyond} beyond noise"
        if no_category_known(rates) and not nobody_counted(rates):
            verdict = (
                f"{counted_words(rates)}; no impact ratio: no individual's sex or "
                "race/ethnicity is known"
            )
        elif nobody_counted(rates):
            nobody = "nobody selected" if rates.kind == "selection" else "nobody above the median"
            verdict = f"no impact ratio: {nobody}, so every rate is 0"
        click.echo(
            f"{rates.assessed:,} individuals assessed ({found.left_out:,} left out); {verdict}"
        )
        for path in paths:
            click.echo(f"{'evidence' if path.name == 'evidence.html' else 'summary'}: {path}")

    return ll144
