"""``biasaudit ll144 DATA.csv``: the summary of results of a Local Law 144 bias audit.

New York City's Local Law 144 asks an independent bias audit of an automated
employment decision tool, published as a summary (6 RCNY §5-300 ff.). The auditor
most often receives the employer's own historical data: one row per person the tool
assessed, with their sex, race/ethnicity and the tool's outcome (selected or not, or
a score). This module reads that file, maps its labels to the rule's categories,
computes every rate and impact ratio (:func:`biasaudit.metrics.ll144_rates`) and
writes the summary as Markdown, HTML, CSV and JSON.

Labels are read case-insensitively: the rule's own names, the common short forms
(``M``, ``Black``, ``Hispanic``, ``Two or more``, ...) and the employer's own through
``labels`` (``{"W": "White"}``). A blank or ``unknown`` / ``declined`` label is the
rule's unknown category: counted, left out of that dimension. A row without an
outcome is left out of the audit and counted as such. Anything else stops the run
before anything is written, naming the line and the field.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from biasaudit._version import __version__
from biasaudit.errors import InputError, UsageError
from biasaudit.kinds._evidence import Evidence, View, link
from biasaudit.metrics import (
    HISPANIC,
    RACE_CATEGORIES,
    SEX_CATEGORIES,
    SMALL_SHARE,
    CategoryRate,
    LL144Rates,
    intersectional_category,
    ll144_rates,
)
from biasaudit.metrics._ll144 import race_label
from biasaudit.render.document import Document, Paragraph, Section, Table, to_html, to_markdown
from biasaudit.reports.evidence import EVIDENCE_FILE, evidence_page, page_data
from biasaudit.textfiles import a_run, brief, read_table

__all__ = [
    "Outcomes",
    "Source",
    "SummaryInfo",
    "file_source",
    "outcomes_evidence",
    "read_outcomes",
    "run_rates",
    "summarise",
    "write_summary",
]

UNKNOWN = "unknown"
_UNKNOWN_LABELS = frozenset(
    {"", "unknown", "declined", "decline to state", "declined to state", "not disclosed",
     "prefer not to say", "not specified", "n/a", "na", "none", "missing", "other/unknown"}
)  # fmt: skip
_SEX_LABELS = {"male": "Male", "m": "Male", "man": "Male", "men": "Male",
               "female": "Female", "f": "Female", "woman": "Female", "women": "Female"}  # fmt: skip
_RACE_LABELS = {
    "hispanic": HISPANIC, "latino": HISPANIC, "latina": HISPANIC, "latinx": HISPANIC,
    "hispanic/latino": HISPANIC, "hispanic or latinx": HISPANIC,
    "black": "Black or African American", "african american": "Black or African American",
    "native hawaiian or other pacific islander": "Native Hawaiian or Pacific Islander",
    "pacific islander": "Native Hawaiian or Pacific Islander",
    "nhpi": "Native Hawaiian or Pacific Islander",
    "american indian or alaska native": "Native American or Alaska Native",
    "american indian or alaskan native": "Native American or Alaska Native",
    "native american": "Native American or Alaska Native",
    "aian": "Native American or Alaska Native",
    "two or more": "Two or More Races", "multiracial": "Two or More Races",
    "two or more races (not hispanic or latino)": "Two or More Races",
}  # fmt: skip
_YES = frozenset({"1", "true", "yes", "y", "selected", "hispanic", "hispanic or latino"})
_NO = frozenset({"0", "false", "no", "n", "not selected", "rejected", "not hispanic",
                 "not hispanic or latino", "non-hispanic"})  # fmt: skip
_NOT_HISPANIC_SUFFIX = " (not hispanic or latino)"


@dataclass(frozen=True)
class Outcomes:
    """The individuals of an employer's file, as the rule's categories (None: unknown)."""

    path: Path
    sex: list[str | None]
    race: list[str | None]
    outcome: list[float]
    kind: Literal["selection", "scoring"]
    column: str
    rows: int
    left_out: int
    """Rows without an outcome: not assessed by the tool, left out of the audit."""
    lines: list[int] = field(default_factory=list)
    """The file's line of each individual assessed (the header is line 1)."""
    given: list[tuple[str, str]] = field(default_factory=list)
    """Each individual's sex and race as the file gives them (before they were read)."""
    left_out_lines: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class Source:
    """Where a summary's figures come from, as the summary states it."""

    name: str
    """The file or the run directory."""
    rows: int
    left_out: int
    left_out_why: str
    counted: str | None
    """The heading of the column of counts (``Selected``), None where a rate is not a
    count of people (an audit's simulated screening)."""
    description: str = ""
    """What the data are, when the source can say it itself (an audit's run)."""
    simulated: bool = False
    unit: str = "Individuals"
    """What each counted row is: a person, or an audit's candidate (a name with a resume)."""


def file_source(outcomes: Outcomes) -> Source:
    """The facts of an employer's file."""
    counted = "Selected" if outcomes.kind == "selection" else "Scored above the median"
    why = f"no outcome recorded in '{outcomes.column}': not assessed by the tool"
    return Source(str(outcomes.path), outcomes.rows, outcomes.left_out, why, counted)


@dataclass(frozen=True)
class SummaryInfo:
    """What the summary states besides the figures (§5-303, §5-302)."""

    data: Literal["historical", "test"] = "historical"
    source: str = ""
    """Where the data came from and why it was used (and, for test data, how it was made)."""
    tool: str = ""
    distribution_date: dt.date | None = None
    audit_date: dt.date = field(default_factory=dt.date.today)
    small_justification: str = ""
    """Why the categories under 2% of the data are left out of the impact ratios; empty:
    none is."""
    confidence: float = 0.95


def _category(value: str, table: Mapping[str, str], canonical: tuple[str, ...],
              labels: Mapping[str, str]) -> str | None:  # fmt: skip
    """The rule's category of a label; None where unknown; raises KeyError where no
    category matches."""
    key = value.strip().casefold()
    if key in labels:
        found = labels[key]
        return None if found == UNKNOWN else found
    if key in _UNKNOWN_LABELS:
        return None
    key = key.removesuffix(_NOT_HISPANIC_SUFFIX)
    for name in canonical:
        if name.casefold() == key:
            return name
    if key in table:
        return table[key]
    raise KeyError(value)


def parse_labels(pairs: list[str]) -> dict[str, str]:
    """``RAW=CATEGORY`` pairs (``--label``) as a mapping of lower-cased labels.

    Raises
    ------
    UsageError
        A pair without ``=``, or a category the rule does not have.
    """
    known = {c.casefold(): c for c in (*SEX_CATEGORIES, *RACE_CATEGORIES)}
    found = {}
    for pair in pairs:
        raw, sep, category = pair.partition("=")
        if not sep or not raw.strip():
            raise UsageError(f"--label {brief(pair)}: write it RAW=CATEGORY, e.g. 'W=White'")
        key = category.strip().casefold()
        if key != UNKNOWN and key not in known:
            names = ", ".join([*SEX_CATEGORIES, *RACE_CATEGORIES, UNKNOWN])
            raise UsageError(f"--label {brief(pair)}: {brief(category)} is none of: {names}")
        found[raw.strip().casefold()] = UNKNOWN if key == UNKNOWN else known[key]
    return found


def read_outcomes(
    path: Path,
    *,
    sex: str = "sex",
    race: str = "race",
    ethnicity: str | None = None,
    selected: str | None = None,
    score: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> Outcomes:
    """The employer's file as the rule's categories and the tool's outcomes.

    ``selected`` or ``score`` names the outcome's column (neither: the file's column
    named ``selected`` or ``score``). ``ethnicity``, where given, is a column saying
    whether each person is Hispanic or Latino (yes/no); ``race`` then holds the race.

    Raises
    ------
    UsageError
        A column is missing, or no outcome column can be told.
    InputError
        A label is none of the rule's categories, an outcome is not a number (or 0/1
        for selections), or the ethnicity and race columns disagree: line and field.
    """
    frame = read_table(path, "outcomes file")
    columns = set(frame.columns)
    problems = []  # every missing column at once, each with the option that names it
    for column, option in ((sex, "--sex"), (race, "--race"), (ethnicity, "--ethnicity")):
        if column and column not in columns:
            problems.append(f"no column {column!r} (name its column with {option} COLUMN)")
    if selected is None and score is None:
        present = [c for c in ("selected", "score") if c in columns]
        if len(present) == 1:
            selected, score = (present[0], None) if present[0] == "selected" else (None, present[0])
        else:
            problems.append("name the outcome's column with --selected COLUMN (1 selected, 0 "
                            "not) or --score COLUMN (a number)")  # fmt: skip
    outcome_column = selected if selected is not None else score
    if outcome_column is not None and outcome_column not in columns:
        option = "--selected" if selected is not None else "--score"
        problems.append(f"no column {outcome_column!r} (given with {option})")
    if problems:
        raise UsageError(
            f"outcomes file {path}: {'; '.join(problems)}; its columns: "
            f"{brief(', '.join(frame.columns))}"
        )
    assert outcome_column is not None
    labels = dict(labels or {})
    sexes: list[str | None] = []
    races: list[str | None] = []
    outcomes: list[float] = []
    lines: list[int] = []
    given: list[tuple[str, str]] = []
    left_out: list[int] = []
    for row, record in enumerate(frame.to_dict("records")):
        line = row + 2
        raw = str(record[outcome_column])
        if not raw:
            left_out.append(line)
            continue
        lines.append(line)
        given.append((str(record[sex]), str(record[race])))
        outcomes.append(_outcome(raw, selected is not None, str(path), line, outcome_column))
        sexes.append(_read(record, sex, _SEX_LABELS, SEX_CATEGORIES, labels, path, line))
        found = _read(record, race, _RACE_LABELS, RACE_CATEGORIES, labels, path, line)
        if ethnicity:
            found = _with_ethnicity(found, str(record[ethnicity]), str(path), line, ethnicity)
        races.append(found)
    if not outcomes:
        raise UsageError(f"outcomes file {path}: no row has an outcome in '{outcome_column}'")
    kind: Literal["selection", "scoring"] = "selection" if selected is not None else "scoring"
    return Outcomes(path, sexes, races, outcomes, kind, outcome_column, len(frame),
                    len(left_out), lines, given, left_out)  # fmt: skip


def _read(
    record: Mapping[str, Any],
    column: str,
    table: Mapping[str, str],
    canonical: tuple[str, ...],
    labels: Mapping[str, str],
    path: Path,
    line: int,
) -> str | None:
    value = str(record[column])
    try:
        return _category(value, table, canonical, labels)
    except KeyError:
        names = ", ".join(canonical)
        raise InputError(
            str(path), line, column,
            f"{brief(value)} is none of the rule's categories ({names}) nor unknown; "
            f"map it with --label {shlex.quote(value[:80] + '=CATEGORY')}",
        ) from None  # fmt: skip


def _with_ethnicity(race: str | None, value: str, path: str, line: int, column: str) -> str | None:
    key = value.strip().casefold()
    if key in _UNKNOWN_LABELS:
        return race if race == HISPANIC else None  # a race without its ethnicity is unknown
    if key in _YES:
        return HISPANIC
    if key in _NO:
        if race == HISPANIC:
            raise InputError(path, line, column, "not Hispanic or Latino, but the race says so")
        return race
    raise InputError(path, line, column, f"{brief(value)} is not yes/no (Hispanic or Latino)")


def _outcome(raw: str, selection: bool, path: str, line: int, column: str) -> float:
    key = raw.strip().casefold()
    if selection:
        if key in _YES:
            return 1.0
        if key in _NO:
            return 0.0
        raise InputError(path, line, column, f"{brief(raw)} is not 1/0 (selected or not)")
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise InputError(path, line, column, f"{brief(raw)} is not a finite number")
    return value


def summarise(outcomes: Outcomes, info: SummaryInfo) -> LL144Rates:
    """Every rate and impact ratio of ``outcomes``."""
    return ll144_rates(
        outcomes.sex,
        outcomes.race,
        outcomes.outcome,
        kind=outcomes.kind,
        confidence=info.confidence,
        exclude_small=bool(info.small_justification),
    )


def outcomes_evidence(outcomes: Outcomes, rates: LL144Rates) -> Evidence:
    """The rows of an employer's file behind each category's rate: every individual's
    line, sex and race as given and as the rule's categories, the outcome and whether
    it counts (selected, or scored above the median); the rows left out too."""
    scoring = outcomes.kind == "scoring"
    median = rates.median
    rows: list[dict[str, Any]] = []
    for i, line in enumerate(outcomes.lines):
        sex, race = outcomes.sex[i], outcomes.race[i]
        value = outcomes.outcome[i]
        counts = value > median if scoring and median is not None else value == 1.0
        rows.append({
            "line": line, "sex_given": outcomes.given[i][0], "race_given": outcomes.given[i][1],
            "sex": sex or "unknown", "race": race_label(race) if race else "unknown",
            "intersectional": intersectional_category(sex, race) if sex and race else "unknown",
            "outcome": value, "counted": "yes" if counts else "no", "flags": "",
        })  # fmt: skip
    rows += [{"line": line, "sex_given": "", "race_given": "", "sex": "", "race": "",
              "intersectional": "", "outcome": None, "counted": "",
              "flags": f"no outcome in '{outcomes.column}': left out"}
             for line in outcomes.left_out_lines]  # fmt: skip
    counted = "scored above the median" if scoring else "selected"
    view = View(
        "rows", "Individuals",
        f"Every row of {outcomes.path.name} with an outcome, as the summary read it: sex and "
        f"race as the file gives them and as the rule's categories, the outcome in "
        f"'{outcomes.column}' and whether it counts ({counted}); and the rows left out.",
        [("line", "line"), ("sex_given", "sex in the file"), ("race_given", "race in the file"),
         ("sex", "sex"), ("race", "race/ethnicity"), ("intersectional", "intersectional"),
         ("outcome", outcomes.column), ("counted", counted), ("flags", "left out")],
        rows, long=(), filters=("sex", "race", "intersectional", "counted"), flag="flags",
    )  # fmt: skip
    units: dict[str, str] = {}
    for dimension, column in (("sex", "sex"), ("race/ethnicity", "race"),
                              ("intersectional", "intersectional")):  # fmt: skip
        for row in rates.of(dimension):
            units[row.category] = link("rows", **{column: row.category})
    return Evidence(
        f"{len(outcomes.lines):,} individuals assessed, {len(outcomes.left_out_lines):,} "
        "left out.", [view],
        [("every individual of the file, as the summary read it", link("rows"))],
        units=units,
    )  # fmt: skip


def write_summary(
    rates: LL144Rates,
    source: Source,
    info: SummaryInfo,
    out: Path,
    evidence: Evidence | None = None,
) -> list[Path]:
    """Write ``summary.md``, ``summary.html``, ``summary.csv`` and ``summary.json`` in
    ``out`` (made if needed; earlier ones are replaced); with ``evidence``, also
    ``evidence.html``, the rows behind each rate, which the summary's categories link.

    Raises
    ------
    UsageError
        ``out`` cannot be made or written.
    """
    document = summary_document(source, info, rates)
    if evidence is not None:
        from biasaudit.reports.html import linked_document

        document = linked_document(document, evidence)
    try:
        return _write(document, rates, source, info, out, evidence)
    except OSError as error:  # a file where the folder goes, a read-only or full disk
        raise UsageError(
            f"cannot write the summary in {out} ({error.strerror or error}): give --out a "
            "folder that may be written"
        ) from None


def _write(
    document: Document,
    rates: LL144Rates,
    source: Source,
    info: SummaryInfo,
    out: Path,
    evidence: Evidence | None,
) -> list[Path]:
    import pandas as pd

    from biasaudit.store.files import replaced_together
    from biasaudit.store.tables import write_csv

    out.mkdir(parents=True, exist_ok=True)
    footer = f"biasaudit {__version__}"
    paths = [out / "summary.md", out / "summary.html", out / "summary.csv", out / "summary.json"]
    if evidence is not None:
        paths.append(out / EVIDENCE_FILE)
    table = pd.DataFrame([_csv_row(row, rates) for row in rates.rows])
    record = {
        "schema": "biasaudit LL144 summary", "tool_version": __version__,
        "info": {**asdict(info), "audit_date": info.audit_date.isoformat(),
                 "distribution_date": info.distribution_date.isoformat()
                 if info.distribution_date else None},
        "source": asdict(source), "kind": rates.kind, "assessed": rates.assessed,
        "unknown": rates.unknown, "median": rates.median, "at_median": rates.at_median,
        "counted": rates.counted, "intervals": rates.intervals, "verdicts": rates.verdicts,
        "categories": [_csv_row(row, rates) for row in rates.rows],
    }  # fmt: skip
    # the four files replace the earlier summary together, or not at all
    with replaced_together(paths) as written:
        written[0].write_text(to_markdown(document, figure_dir="", footer=footer), "utf-8")
        written[1].write_text(to_html(document, footer=footer), encoding="utf-8")
        with open(written[2], "w", encoding="utf-8", newline="") as handle:
            write_csv(table, handle)
        written[3].write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        if evidence is not None:
            data = page_data(evidence, run=source.name, model="", task="Local Law 144 summary",
                             simulated=source.simulated)  # fmt: skip
            written[4].write_text(evidence_page(data), encoding="utf-8")
    return paths


def _csv_row(row: CategoryRate, rates: LL144Rates) -> dict[str, Any]:
    return {
        "dimension": row.dimension, "category": row.category, "n": row.n,
        "selected" if rates.kind == "selection" else "above_median": row.selected,
        "rate": row.rate, "rate_low": row.low, "rate_high": row.high,
        "impact_ratio": row.ratio, "ratio_low": row.ratio_low, "ratio_high": row.ratio_high,
        "reference": row.reference, "below_four_fifths": row.below_four_fifths,
        "beyond_noise": row.beyond_noise, "share": row.share, "excluded_small": row.excluded,
    }  # fmt: skip


def _percent(value: float | None) -> str:
    return "—" if value is None else f"{100 * value:.1f}%"


def _rate_cell(row: CategoryRate) -> str:
    if row.rate is None:
        return "— (none assessed)"
    if row.low is None:
        return f"{_percent(row.rate)} (too few names for an interval)"
    return f"{_percent(row.rate)} [{_percent(row.low)}, {_percent(row.high)}]"


def _ratio_bound(value: float) -> str:
    """A ratio's bound to two places, or more where two would print 1.00 for a bound
    short of 1 (the verdict reads "short of 1": 0.996 must not read as 1.00)."""
    for places in (2, 3, 4):
        text = f"{value:.{places}f}"
        if value >= 1.0 or float(text) < 1.0:
            return text
    return "<1.0000"


def _ratio_cell(row: CategoryRate) -> str:
    if row.excluded:
        return "left out (under 2%)"
    if row.ratio is None:
        return "—" if row.rate is None else "— (every rate is 0)"
    bounds = ("" if row.ratio_low is None or row.ratio_high is None else
              f" [{_ratio_bound(row.ratio_low)}, {_ratio_bound(row.ratio_high)}]")  # fmt: skip
    if row.reference:  # an interval of [1, 1]: surely the highest, nothing to add
        return "1.00 (highest rate)" + (bounds if (row.ratio_low or 1.0) < 1.0 else "")
    return f"{row.ratio:.2f}{bounds}"


def _flag_cell(row: CategoryRate) -> str:
    if row.below_four_fifths is None:
        return ""
    if not row.below_four_fifths:
        return "no"
    return "yes, beyond noise" if row.beyond_noise else "yes (within noise)"


_TITLES = {
    "sex": "Sex categories",
    "race/ethnicity": "Race/ethnicity categories",
    "intersectional": "Intersectional categories",
}


def summary_document(source: Source, info: SummaryInfo, rates: LL144Rates) -> Document:
    """The summary of results as a document (Markdown and HTML render it)."""
    rate_name = "Selection rate" if rates.kind == "selection" else "Scoring rate"
    level = f"{rates.confidence:.0%}"
    sections = [Section("Summary of results", "summary", _facts(source, info, rates))]
    for dimension, title in _TITLES.items():
        rows = rates.of(dimension)
        headers = ["Category", source.unit, *([source.counted] if source.counted else []),
                   f"{rate_name} [{level} interval]", f"Impact ratio [{level} interval]",
                   "Under four fifths"]  # fmt: skip
        table = Table(
            headers,
            [[row.category, f"{row.n:,}",
              *([f"{row.selected or 0:,}"] if source.counted else []),
              _rate_cell(row), _ratio_cell(row), _flag_cell(row)] for row in rows],
            caption=f"{title}: {rate_name.lower()} and impact ratio (its rate over the "
            f"highest rate of the {title.lower()}); {rates.unknown[dimension]:,} "
            "individuals of an unknown category are not included.",
        )  # fmt: skip
        sections.append(Section(f"Impact ratios: {title.lower()}", _anchor(dimension), [table]))
    sections.append(Section("How these figures were computed", "method", _method(rates)))
    tool = f" of {info.tool}" if info.tool else ""
    return Document(
        title=f"Bias audit{tool}: summary of results (NYC Local Law 144)",
        subtitle=f"Audit of {info.audit_date.isoformat()}, {info.data} data, "
        f"{rates.assessed:,} individuals assessed",
        simulated=source.simulated,
        sections=sections,
    )


def nobody_counted(rates: LL144Rates) -> bool:
    """Whether no one was selected (or scored above the median) in any category: every
    rate is 0, and every impact ratio 0 over 0."""
    if rates.counted is not None:
        return rates.counted == 0
    return all(not row.rate for row in rates.rows)


def no_category_known(rates: LL144Rates) -> bool:
    """Whether no individual's sex or race/ethnicity is known: no category has a rate."""
    return all(row.n == 0 for row in rates.rows)


def counted_words(rates: LL144Rates) -> str:
    """``312 selected`` (or scored above the median), where the source says."""
    what = "selected" if rates.kind == "selection" else "scored above the median"
    return "" if rates.counted is None else f"{rates.counted:,} {what}"


def _anchor(dimension: str) -> str:
    return "impact-" + dimension.replace("/", "-")


def _facts(source: Source, info: SummaryInfo, rates: LL144Rates) -> list[Any]:
    described = info.source or source.description
    described = described or "not described (give --source: where the data came from and why)"
    distributed = (
        info.distribution_date.isoformat()
        if info.distribution_date
        else "not given (give --distribution-date)"
    )
    facts = [
        ["Date of this audit", info.audit_date.isoformat()],
        ["Tool audited", info.tool or "not named (give --tool)"],
        ["Distribution date of the tool", distributed],
        ["Data", f"{info.data} data: {described}"],
        ["Individuals assessed", f"{rates.assessed:,}"],
        ["Of an unknown sex", f"{rates.unknown['sex']:,}"],
        ["Of an unknown race/ethnicity", f"{rates.unknown['race/ethnicity']:,}"],
        ["Left out", f"{source.left_out:,} of {source.rows:,} ({source.left_out_why})"],
    ]  # fmt: skip
    blocks: list[Any] = [Table(["", ""], facts, left=frozenset({0, 1}))]
    if info.data == "test":
        blocks.append(
            Paragraph(
                "These are test data, not the tool's historical data: the rules allow them "
                "where too little historical data exists for a statistically significant "
                "audit (§5-302(b)); the source above says why and how they were made."
            )
        )
    if rates.kind == "scoring":
        blocks.append(
            Paragraph(
                f"The tool scores: a scoring rate is the share of a category scoring above "
                f"the median score of all {rates.assessed:,} individuals ({rates.median:g}); "
                f"{rates.at_median:,} scored exactly the median and count as not above it."
            )
        )
    small = [r for r in rates.rows if r.share < SMALL_SHARE and r.n > 0]
    if info.small_justification:
        names = ", ".join(sorted({r.category for r in small})) or "none"
        blocks.append(
            Paragraph(
                f"Categories under 2% of the data are left out of the impact ratios "
                f"(§5-301(d)), their counts and rates still shown: {names}. Why: "
                f"{info.small_justification}"
            )
        )
    elif small:
        blocks.append(
            Paragraph(
                f"{len(small)} categories hold under 2% of the data; they keep their impact "
                "ratios here (the rule allows leaving them out, with a justification: "
                "--exclude-small TEXT). Their intervals are wide."
            )
        )
    flagged = [r for r in rates.rows if r.below_four_fifths]
    beyond = [r for r in flagged if r.beyond_noise]
    if no_category_known(rates) and not nobody_counted(rates):
        blocks.append(
            Paragraph(
                f"{rates.assessed:,} individuals were assessed and {counted_words(rates)}, "
                "but no individual's sex or race/ethnicity is known (every one is of an "
                "unknown category), so no category has a rate and no impact ratio can be "
                "given. Check the sex and race columns (--sex, --race, --label RAW=CATEGORY).",
                strong=True,
            )
        )
        return blocks
    if nobody_counted(rates):
        nobody = "was selected" if rates.kind == "selection" else "scored above the median"
        blocks.append(
            Paragraph(
                f"No individual {nobody} in any category, so every rate is 0 and no impact "
                "ratio can be computed (each would be 0 over 0): the four-fifths comparison "
                "does not apply. Check the outcome column, or audit a period in which the "
                "tool selected people.",
                strong=True,
            )
        )
        return blocks
    blocks.append(
        Paragraph(
            f"{len(flagged)} categories have an impact ratio under four fifths, "
            f"{len(beyond)} of them beyond noise"
            + (": " + "; ".join(r.category for r in beyond) if beyond else "")
            + " (what 'beyond noise' means: How these figures were computed).",
            strong=True,
        )
    )
    return blocks + _reference_notes(rates, source.unit)


def _method(rates: LL144Rates) -> list[Any]:
    return [
        Paragraph(
            "Rates and impact ratios follow 6 RCNY §5-300 and §5-301: each category's "
            "rate, and its ratio to the highest rate of its dimension (sex, race/ethnicity, "
            "intersectional), computed separately for each dimension; individuals of an "
            "unknown category are counted and left out of that dimension."
        ),
        Paragraph(
            "biasaudit adds what the rule does not ask for, at "
            f"{rates.confidence:.0%}: {rates.intervals}. The four-fifths flag is the EEOC's "
            f"rule of thumb (29 CFR 1607.4(D)); {rates.verdicts}."
        ),
    ]


def _reference_notes(rates: LL144Rates, unit: str) -> list[Paragraph]:
    """Where a dimension's highest rate is that of a small category (under 2% of the
    data) or one whose rate is known only loosely: what that does to the ratios."""
    notes = []
    for dimension, title in _TITLES.items():
        for row in rates.of(dimension):
            if not row.reference or row.rate is None:
                continue
            loose = row.low is not None and row.high is not None and row.high - row.low > 0.2
            if row.share >= SMALL_SHARE and not loose:
                continue
            known = (
                f", whose rate is known only to within [{_percent(row.low)}, "
                f"{_percent(row.high)}]" if row.low is not None else ""
            )  # fmt: skip
            notes.append(Paragraph(
                f"The highest rate of the {title.lower()} is that of {row.category}, a "
                f"category of {row.n:,} {unit.lower()} ({row.share:.1%} of the data){known}: "
                "the other ratios are taken to a rate that may be high by chance, so they "
                "lean low. The intervals allow for this; the verdicts read them."
            ))  # fmt: skip
    return notes


def run_rates(
    run_dir: Path, k: int | None = None, *, scoring: bool = False
) -> tuple[LL144Rates, Source]:
    """The selection rates and impact ratios of an audit's run, as the rule's categories.

    An audit whose kind selects (:func:`~biasaudit.kinds.registry.selecting_kinds`:
    allocation, listwise) of names typical of each race and sex is test data
    (§5-302(b)): its candidates are invented. Its rates are the shares of the top ``k``
    places of the pools screened or ranked (default: the run's headline k), each with
    its interval over the units that vary (names, resumes, pools), as ``metrics.json``
    records them.

    Raises
    ------
    UsageError
        The run is of another kind, records no impact ratios at ``k``, or its groups are
        not the rule's sex and race/ethnicity categories.
    """
    from biasaudit.kinds.registry import read_metrics, selecting_audit_in_words, selecting_kinds
    from biasaudit.store.runs import read_manifest

    manifest = read_manifest(run_dir)
    selecting = selecting_kinds()
    if manifest.kind not in selecting:
        raise UsageError(
            f"{run_dir} is {a_run(manifest.kind)}: a Local Law 144 summary reads the "
            f"selection rates of {selecting_audit_in_words()}, or an employer's file"
        )
    metrics = read_metrics(run_dir, manifest.kind)
    if scoring:
        return _run_scoring(run_dir, manifest, metrics)
    k = k or int(metrics.headline_k)
    rows = [r for r in metrics.impact if getattr(r, "k", k) == k]
    if not rows:
        raise UsageError(f"{run_dir}: no impact ratio at k = {k} (its metrics.json has none)")
    found: dict[str, dict[str, Any]] = {"sex": {}, "race/ethnicity": {}, "intersectional": {}}
    group_names = _run_group_names(run_dir, manifest.kind, metrics,
                                   {r.value for r in rows if r.category == "group"})  # fmt: skip
    for row in rows:
        dimension, category = _run_category(row.category, row.value, group_names, run_dir)
        if dimension is not None:
            found[dimension][category] = row
    if not found["sex"] or not found["race/ethnicity"]:
        if getattr(metrics, "method", None) == "imported":
            raise UsageError(
                f"{run_dir}: an import of scores records impact ratios per group only; its "
                "scoring rates per category: --scoring (groups coded as the built-in names "
                "are, or race and sex columns); or give the file itself: biasaudit ll144 "
                "FILE --score score"
            )
        groups = ", ".join(sorted({r.value for r in rows if r.category == "group"}))
        raise UsageError(
            f"{run_dir}: its groups ({groups}) are not the rule's sex and race/ethnicity "
            "categories; a Local Law 144 summary needs names of both (the built-in resume "
            "screening's)"
        )
    total = sum(row.n for row in found["sex"].values())
    out: list[CategoryRate] = []
    for dimension, order in (
        ("sex", list(SEX_CATEGORIES)),
        ("race/ethnicity", [race_label(r) for r in RACE_CATEGORIES]),
        ("intersectional", [intersectional_category(s, r) for r in RACE_CATEGORIES
                            for s in SEX_CATEGORIES]),
    ):  # fmt: skip
        for category in order:
            row = found[dimension].get(category)
            if row is None:  # not in this audit's data
                out.append(_absent(dimension, category))
                continue
            rate_ci = getattr(row, "rate_ci", None) or [None, None]
            ci = row.ci or [None, None]
            reference = row.ratio == 1.0
            ratio_low, ratio_high = (None, None) if reference else (ci[0], ci[1])
            share = row.n / total if total else 0.0
            out.append(
                CategoryRate(
                    dimension,
                    category,
                    int(row.n),
                    None,
                    float(row.rate),
                    rate_ci[0],
                    rate_ci[1],
                    float(row.ratio),
                    ratio_low,
                    ratio_high,
                    share,
                    reference,
                    False,
                    bool(row.beyond_noise),
                )
            )
    confidence = float(metrics.confidence)
    rates = LL144Rates(
        "selection", total, dict.fromkeys(found, 0), tuple(out), confidence,
        intervals="the run's own intervals over the units that vary (names, resumes, pools), "
        f"at {confidence:.0%} each, as its metrics.json records them (not Wilson's or "
        "Koopman's, which would take each candidate for an independent person)",
        verdicts=_run_verdicts(rows),
    )  # fmt: skip
    return rates, Source(
        str(run_dir), total, 0, "none: every candidate was scored", None,
        _run_description(manifest, metrics, _selection_told(metrics, k)),
        bool(metrics.simulated),
        selecting[manifest.kind],
    )  # fmt: skip


def _run_verdicts(rows: list[Any]) -> str:
    """What "beyond noise" means in a run's summary: the verdict its metrics.json
    stores, adjusted over the family it names."""
    family = next((getattr(r, "family", "") for r in rows if getattr(r, "family", "")), "")
    if not family:
        return (
            "beyond noise: the run's whole interval under 0.8, unadjusted (the run was made "
            "by an older biasaudit; biasaudit replay RUN gives its adjusted verdicts)"
        )
    return (
        f"beyond noise: the run's own verdict, as its tables and metrics.json give it: "
        f"under 0.8 beyond noise (the test of 0.8 read off the run's interval) after Holm's "
        f"adjustment over {family}; an audit's ratios lean low near 1, so its verdict is "
        "against 0.8, not against the highest rate as an employer's file's is"
    )


def _run_group_names(run_dir: Path, kind: str, metrics: Any, groups: set[str]) -> dict[str, str]:
    """Each group's "race sex" name: the run's own, and where some of ``groups`` has
    none, the race and sex of its per-unit file (:func:`_group_categories`)."""
    names = dict(metrics.group_names)
    if groups - set(names):
        names.update(_group_categories(run_dir, kind))
    return names


def _group_categories(run_dir: Path, kind: str) -> dict[str, str]:
    """Each group's "race sex" from the run's per-unit file, where it has ``race`` and
    ``sex`` columns (an import of rankings or scores made elsewhere)."""
    from biasaudit.kinds.registry import audit_kind
    from biasaudit.store.tables import read_run_table

    path = run_dir / audit_kind(kind).scores_file
    if not path.is_file():
        return {}
    frame = read_run_table(path)
    if not {"group", "race", "sex"} <= set(frame.columns):
        return {}
    pairs = frame[["group", "race", "sex"]].astype(str).drop_duplicates()
    if pairs["group"].duplicated().any():
        return {}  # a group of several categories: no intersection to tell
    return {row.group: f"{row.race} {row.sex}" for row in pairs.itertuples()}


def _absent(dimension: str, category: str) -> CategoryRate:
    return CategoryRate(dimension, category, 0, None, None, None, None, None, None, None,
                        0.0, False, False)  # fmt: skip


def run_evidence(run_dir: Path) -> Evidence | None:
    """The run's evidence (its kind's), the first view's rows given each group's sex,
    race/ethnicity and intersectional category, so that each category of the summary
    links to exactly the candidates behind its rate; None where the run has none."""
    from dataclasses import replace

    from biasaudit.kinds.registry import read_metrics
    from biasaudit.reports.evidence import kind_evidence
    from biasaudit.store.runs import read_manifest

    found = kind_evidence(run_dir)
    if found is None or not found.views:
        return None
    manifest = read_manifest(run_dir)
    main = found.views[0]
    group_names = _run_group_names(run_dir, manifest.kind, read_metrics(run_dir, manifest.kind),
                                   {str(row.get("group", "")) for row in main.rows})  # fmt: skip
    categories: dict[str, tuple[str, str, str]] = {}
    for group in dict.fromkeys(str(row.get("group", "")) for row in main.rows):
        dimension, category = _run_category("group", group, group_names, run_dir)
        if dimension == "intersectional":
            race, _, sex = category.rpartition(", ")
            categories[group] = (sex, race, category)
    if not categories:
        return None
    rows = []
    for row in main.rows:
        sex, race, both = categories.get(str(row.get("group", "")), ("", "", ""))
        rows.append({**row, "sex": sex, "race": race, "intersectional": both})
    ours = ("sex", "race", "intersectional")  # the rule's categories replace the run's own
    kept = [column for column in main.columns if column[0] not in ours]
    at = next((i for i, (key, _) in enumerate(kept) if key == "group"), 0) + 1
    columns = [*kept[:at], ("sex", "sex"), ("race", "race/ethnicity"),
               ("intersectional", "intersectional"), *kept[at:]]  # fmt: skip
    units = {
        value: link(main.id, **{key: value})
        for sex, race, both in categories.values()
        for key, value in (("sex", sex), ("race", race), ("intersectional", both))
    }
    view = replace(main, rows=rows, columns=columns)
    return replace(found, views=[view, *found.views[1:]], units=units, links=[
        (f"every {main.title.lower()} of the audit, with its group's categories",
         link(main.id)),
    ])  # fmt: skip


def _run_category(
    category: str, value: str, group_names: Mapping[str, str], run_dir: Path
) -> tuple[str | None, str]:
    """The rule's dimension and category of an impact row of a run (None: not the rule's)."""
    try:
        if category == "sex":
            return "sex", str(_category(value, _SEX_LABELS, SEX_CATEGORIES, {}))
        if category == "race":
            return "race/ethnicity", race_label(str(_category(value, _RACE_LABELS,
                                                               RACE_CATEGORIES, {})))  # fmt: skip
        if category == "group":
            race, _, sex = group_names.get(value, value).rpartition(" ")
            found_sex = _category(sex, _SEX_LABELS, SEX_CATEGORIES, {})
            found_race = _category(race, _RACE_LABELS, RACE_CATEGORIES, {})
            if found_sex is not None and found_race is not None:
                return "intersectional", intersectional_category(found_sex, found_race)
    except KeyError:
        pass
    return None, value


def _selection_told(metrics: Any, k: int) -> str:
    """How the model made a run's selections, and what the rates are."""
    ties = (
        ". The unit of a rate is a candidate's appearance in a pool, not a candidate: each "
        "candidate appears in many pools, and the column of candidates counts each once. "
        "Candidates tied for the last selected place share it equally (two tied for one "
        "place count half each)"
    )
    how = {
        "pointwise": "scored each candidate on its own; the summary's rates are the shares of "
        "the top {k} places of pools of {pool} candidates drawn from them ({rounds:,} pools)"
        + ties,
        "pairwise": "compared candidates two at a time, in both orders; the rates are the "
        "shares of the top {k} places of the {rounds:,} pools compared" + ties,
    }
    method = getattr(metrics, "method", None)
    selection = getattr(metrics, "selection", None)
    if method in how and selection is not None:
        told = how[method].format(k=k, pool=selection.pool_size, rounds=selection.rounds)
    else:
        told = (
            f"ranked whole pools of candidates in one prompt each; the rates are the shares "
            f"of the top {k} places of its rankings"
        )
    return told


def _run_description(manifest: Any, metrics: Any, told: str) -> str:
    """What a run's candidates are and how the model treated them (``told``)."""
    model = f"{metrics.model}" + (" (a SIMULATED model)" if metrics.simulated else "")
    names = (
        "each candidate a name shown with a resume: names from biasaudit's list of names "
        "typical of each race and sex (data/names.csv), resumes written for biasaudit at "
        "three levels of fit per job"
        if metrics.task == "resume-screening"
        else "candidates of the task's own"
    )
    endpoint = manifest.endpoint or {}
    if endpoint.get("provider") == "imported":  # outputs produced elsewhere
        return (
            f"outputs of {model} produced elsewhere, imported with biasaudit score from "
            f"{endpoint.get('source', 'a file')} ({endpoint.get('rows', 0):,} rows; run "
            f"{manifest.run_id}): the model {told}. How its candidates were made is for "
            "the auditor to state (--source)"
        )
    return (
        f"an audit by biasaudit of {model} on {metrics.task} (run {manifest.run_id}), "
        f"{names}. The model {told}. The candidates are invented (test data): no applicant "
        "was assessed."
    )


def _run_scoring(run_dir: Path, manifest: Any, metrics: Any) -> tuple[LL144Rates, Source]:
    """Scoring rates of a pointwise audit: each category's share of candidates scoring
    above the median, with intervals over names and resumes (``ll144_unit_rates``)."""
    import numpy as np
    import pandas as pd

    from biasaudit.metrics import Units, ll144_unit_rates
    from biasaudit.store.tables import read_run_table

    if getattr(metrics, "method", None) not in ("pointwise", "imported"):
        raise UsageError(
            f"{run_dir}: --scoring reads the scores of a pointwise audit; this one is "
            f"{getattr(metrics, 'method', manifest.kind)} (its selection rates: leave out "
            "--scoring)"
        )
    from biasaudit.kinds.candidates.resume import GROUP_NAMES

    path = run_dir / "scores.csv"
    if not path.is_file():
        raise UsageError(f"{run_dir}: no scores.csv to read")
    frame = read_run_table(path, ("group", "score"))
    frame = frame[pd.to_numeric(frame["score"], errors="coerce").notna()]
    if frame.empty:
        raise UsageError(f"{run_dir}: no candidate was scored")
    # groups coded as the built-in names are (an import), or named by the run itself
    group_names = {**GROUP_NAMES, **_group_categories(run_dir, "allocation"),
                   **metrics.group_names}  # fmt: skip
    sexes, races = [], []
    for group in frame["group"].astype(str):
        race, _, sex = group_names.get(group, group).rpartition(" ")
        try:
            sexes.append(_category(sex, _SEX_LABELS, SEX_CATEGORIES, {}))
            races.append(_category(race, _RACE_LABELS, RACE_CATEGORIES, {}))
        except KeyError:
            raise UsageError(
                f"{run_dir}: its group {group} is not one of the rule's sex and "
                "race/ethnicity categories"
            ) from None
    codes = {
        c: pd.factorize(frame[c].astype(str))[0].astype(np.intp)
        if c in frame.columns
        else np.zeros(len(frame), dtype=np.intp)
        for c in ("group", "subtask")
    }
    items = next((c for c in ("resume_id", "item") if c in frame.columns), None)
    qualified = (
        frame["qualified"].astype(str).map({"True": 1, "False": 0}).fillna(-1)
        if "qualified" in frame.columns
        else pd.Series(-1, index=frame.index)
    )
    units = Units.of(
        codes["group"], codes["subtask"], qualified.to_numpy(np.intp),
        names=frame["name"].astype(str).to_numpy() if "name" in frame else None,
        items=frame[items].astype(str).to_numpy() if items else None,
    )  # fmt: skip
    rates = ll144_unit_rates(
        sexes, races, frame["score"].astype(float).to_numpy(), units,
        confidence=float(metrics.confidence),
    )  # fmt: skip
    told = (
        "scored each candidate; the summary's scoring rates are the shares of candidates "
        "scoring above the median score of all of them"
    )
    description = _run_description(manifest, metrics, told)
    return rates, Source(
        str(run_dir), len(frame), 0, "none: every candidate was scored",
        "Scored above the median", description, bool(metrics.simulated), "Candidates",
    )  # fmt: skip
