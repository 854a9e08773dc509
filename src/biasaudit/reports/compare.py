"""``biasaudit compare RUN_A RUN_B``: did anything change between two runs of one audit?

Three questions, each answered with statistics:

- **Model version.** The versions (dated snapshot names) and system
  fingerprints each endpoint reported, from the manifests; changed when the
  sets differ.
- **Metrics.** One test of "no change" per figure, each with the difference
  B - A and its confidence interval:

  - allocation runs, per group against the reference: RABBI and the average
    gap δ (headlines: candidate-weighted means of the subtasks) by a bootstrap
    of the units that vary, names within groups and items within subtasks
    (:func:`~biasaudit.metrics.headline_replicates`, from ``scores.csv``),
    paired when both runs scored the same candidates (the usual case: same
    spec, same seed), independent otherwise: a percentile interval, and a
    two-sided z-test of the difference on its bootstrap standard error. ΔDP
    and ΔEO at each k by a normal approximation whose standard errors come
    from each run's own interval over units (width / 2z), the runs taken as
    independent (conservative when they are paired);
  - Grade Score runs: mean Grade Score, entropy and choice scores by a paired
    t-test over the items both runs scored (``items.csv``);
  - RUTEd runs: neutrality, skew and stereotype per context by the normal
    approximation from each run's intervals.

  The p-values are adjusted for the number of tests (Holm), so that a figure
  that moved within its noise is not called drift.
- **Verdict.** ``changed`` when any adjusted p-value is below ``alpha``;
  ``model version changed without measurable change`` when only the reported
  version did; ``no change`` otherwise. Runs that did not ask the same thing
  (:func:`different_settings`: prompt, items or candidates, method, scoring
  path, random option, design seed...) get no verdict, unless told
  ``--allow-different-settings``, and then one that names every difference.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import NDArray
from scipy import stats

from biasaudit.errors import UsageError
from biasaudit.kinds.registry import AUDIT_KINDS, read_metrics
from biasaudit.metrics import Resamples, headline_replicates
from biasaudit.store.runs import Manifest, read_manifest, read_responses

__all__ = [
    "NO_CHANGE",
    "VERSION_ONLY",
    "ChangeTest",
    "Comparison",
    "VersionChange",
    "compare_runs",
    "comparison_lines",
    "read_comparison",
    "write_comparison",
]

CHANGED = "changed"
NO_CHANGE = "no change"
VERSION_ONLY = "model version changed without measurable change"
NOT_COMPARABLE = "no verdict: the runs did not ask the same thing"
# Spec fields that say how a run was sent or stored, not what it asked.
_RUN_ONLY = frozenset(
    {
        "model", "base_url", "api_key_env", "headers", "concurrency", "rpm", "max_retries",
        "timeout", "runs_dir", "cache", "replay", "fresh", "workers", "batch", "batch_poll",
        "bootstrap", "gap_bootstrap", "replicas",
    }
)  # fmt: skip
FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
_RUTED_METRICS = ("neutrality", "skew", "stereotype")
_GRADE_SCORES = {"grade_score": "grade", "entropy": "entropy", "choice": "choice"}


@dataclass(frozen=True)
class ChangeTest:
    """One test of "no change" of one figure between run A and run B."""

    metric: str
    group: str | None
    before: float | None
    after: float | None
    difference: float
    ci: tuple[float, float]
    p_value: float
    method: str
    p_adjusted: float = 1.0

    def changed(self, alpha: float) -> bool:
        return self.p_adjusted < alpha

    @property
    def label(self) -> str:
        return f"{self.group} {self.metric}" if self.group else self.metric


@dataclass(frozen=True)
class VersionChange:
    """What each run's endpoint reported about the model behind the name."""

    versions_a: tuple[str, ...]
    versions_b: tuple[str, ...]
    fingerprints_a: tuple[str, ...]
    fingerprints_b: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return set(self.versions_a) != set(self.versions_b) or set(self.fingerprints_a) != set(
            self.fingerprints_b
        )


@dataclass(frozen=True)
class Comparison:
    """The comparison of two runs; see the module docstring."""

    run_a: str
    run_b: str
    kind: str
    model_a: str
    model_b: str
    versions: VersionChange
    tests: list[ChangeTest]
    alpha: float
    notes: list[str] = field(default_factory=list)
    different_settings: list[str] = field(default_factory=list)
    allow_different_settings: bool = False

    @property
    def changed_tests(self) -> list[ChangeTest]:
        return [test for test in self.tests if test.changed(self.alpha)]

    @property
    def changed_groups(self) -> list[str]:
        """Groups with at least one changed figure, in order of first appearance."""
        return list(dict.fromkeys(t.group for t in self.changed_tests if t.group))

    @property
    def drift(self) -> bool:
        return self.comparable and bool(self.changed_tests)

    @property
    def comparable(self) -> bool:
        """Whether a verdict may be given: same settings, or told to go ahead."""
        return not self.different_settings or self.allow_different_settings

    @property
    def verdict(self) -> str:
        if not self.comparable:
            return NOT_COMPARABLE
        unchanged = VERSION_ONLY if self.versions.changed else NO_CHANGE
        found = CHANGED if self.drift else unchanged
        if self.different_settings:
            return f"{found}, across different settings ({'; '.join(self.different_settings)})"
        return found

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["versions"]["changed"] = self.versions.changed
        data["verdict"], data["changed_groups"] = self.verdict, self.changed_groups
        for test, row in zip(self.tests, data["tests"], strict=True):
            row["changed"] = test.changed(self.alpha)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Comparison:
        """The comparison :meth:`to_json` wrote; its derived fields are recomputed, not read."""
        versions = {name: tuple(v) for name, v in data["versions"].items() if name != "changed"}
        rows = [{k: v for k, v in row.items() if k != "changed"} for row in data["tests"]]
        tests = [ChangeTest(**{**row, "ci": tuple(row["ci"])}) for row in rows]
        named = {name: data[name] for name in ("run_a", "run_b", "kind", "model_a", "model_b")}
        return cls(
            **named,
            versions=VersionChange(**versions),
            tests=tests,
            alpha=float(data["alpha"]),
            notes=list(data.get("notes", [])),
            different_settings=list(data.get("different_settings", [])),
            allow_different_settings=bool(data.get("allow_different_settings", False)),
        )


def compare_runs(
    run_a: str | Path,
    run_b: str | Path,
    *,
    alpha: float = 0.05,
    bootstrap: int = 1000,
    seed: int = 0,
    allow_different_settings: bool = False,
) -> Comparison:
    """Compare two runs of the same kind; see the module docstring.

    Runs that did not ask the same thing (another prompt, other items or
    candidates, method, scoring path, random option, design seed: see
    :func:`different_settings`) get no verdict unless
    ``allow_different_settings``, and then a verdict that names them.

    Raises
    ------
    UsageError
        A path is not a run, the runs are of different kinds, or have no metrics.
    """
    path_a, path_b = Path(run_a), Path(run_b)
    manifest_a, manifest_b = _manifest(path_a), _manifest(path_b)
    if manifest_a.kind != manifest_b.kind:
        raise UsageError(
            f"compare: {path_a} is a '{manifest_a.kind}' run and {path_b} a "
            f"'{manifest_b.kind}' run; compare runs of one audit"
        )
    kind = manifest_a.kind
    if kind not in AUDIT_KINDS:
        raise UsageError(f"compare: runs of kind '{kind}' have no metrics to compare")
    metrics_a, metrics_b = read_metrics(path_a, kind), read_metrics(path_b, kind)
    notes: list[str] = []
    rng = np.random.default_rng(seed)
    if kind == "allocation":
        tests = _allocation_tests(path_a, path_b, metrics_a, metrics_b, rng, bootstrap, notes)
    elif kind == "grade-score":
        tests = _grade_tests(path_a, path_b, notes)
    else:
        tests = _ruted_tests(metrics_a, metrics_b)
    if metrics_a.model != metrics_b.model:
        notes.append(f"the runs audit different models: {metrics_a.model}, {metrics_b.model}")
    return Comparison(
        run_a=str(path_a),
        run_b=str(path_b),
        kind=kind,
        model_a=metrics_a.model,
        model_b=metrics_b.model,
        versions=_versions(manifest_a, manifest_b),
        tests=_holm(tests),
        alpha=alpha,
        notes=notes,
        different_settings=different_settings(path_a, path_b, metrics_a, metrics_b),
        allow_different_settings=allow_different_settings,
    )


def different_settings(path_a: Path, path_b: Path, metrics_a: Any, metrics_b: Any) -> list[str]:
    """What the two runs asked differently, one phrase each; empty when they asked alike.

    Compared: every field of ``spec.json`` but those of sending and storing
    (model, endpoint, concurrency, ...), the scoring path an allocation run
    took, and the requests themselves by id (items, candidates, orders).
    """
    found = []
    spec_a, spec_b = _spec(path_a), _spec(path_b)
    # A field only one spec has was added by a later biasaudit: runs written before it
    # asked with its default, so it is no difference of settings.
    for key in sorted((set(spec_a) & set(spec_b)) - _RUN_ONLY):
        if spec_a.get(key) != spec_b.get(key):
            found.append(f"{key}: {_shown(spec_a.get(key))} vs {_shown(spec_b.get(key))}")
    path = (getattr(getattr(m, "scoring", None), "path", None) for m in (metrics_a, metrics_b))
    path_a_, path_b_ = path
    if path_a_ != path_b_:
        found.append(f"scoring path: {path_a_} vs {path_b_}")
    asked_a, asked_b = _asked(path_a), _asked(path_b)
    if asked_a is not None and asked_b is not None and asked_a != asked_b:
        found.append(
            f"requests: {len(asked_a - asked_b)} only in A, {len(asked_b - asked_a)} only in B "
            "(items, candidates or orders differ)"
        )
    return found


def _spec(path: Path) -> dict[str, Any]:
    try:
        data = json.loads((path / "spec.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def _asked(path: Path) -> set[tuple[str, int]] | None:
    try:
        return {(record.id, record.replicate) for record in read_responses(path)}
    except (OSError, ValueError):
        return None


def _manifest(path: Path) -> Manifest:
    if not (path / "manifest.json").is_file():
        raise UsageError(f"compare: {path} is not a run directory (no manifest.json)")
    return read_manifest(path)


def _versions(a: Manifest, b: Manifest) -> VersionChange:
    return VersionChange(
        tuple(sorted(a.model_versions)),
        tuple(sorted(b.model_versions)),
        tuple(sorted(a.system_fingerprints)),
        tuple(sorted(b.system_fingerprints)),
    )


def _holm(tests: list[ChangeTest]) -> list[ChangeTest]:
    """Holm's step-down adjustment: p_(i) x (m - i + 1), made monotone, capped at 1."""
    order = sorted(range(len(tests)), key=lambda i: tests[i].p_value)
    adjusted = [1.0] * len(tests)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, tests[index].p_value * (len(tests) - rank)))
        adjusted[index] = running
    return [replace(test, p_adjusted=p) for test, p in zip(tests, adjusted, strict=True)]


def _normal_test(
    metric: str,
    group: str | None,
    a: float | None,
    a_ci: Sequence[float] | None,
    b: float | None,
    b_ci: Sequence[float] | None,
    confidence: float,
) -> ChangeTest | None:
    """Difference of two independent estimates whose intervals give their standard errors."""
    if a is None or b is None or not a_ci or not b_ci:
        return None
    z = float(stats.norm.ppf(0.5 + confidence / 2))
    se = math.hypot((a_ci[1] - a_ci[0]) / (2 * z), (b_ci[1] - b_ci[0]) / (2 * z))
    diff = b - a
    p = _two_sided(diff, se, stats.norm.sf)
    method = "normal, from the runs' intervals"
    return ChangeTest(metric, group, a, b, diff, (diff - z * se, diff + z * se), p, method)


def _two_sided(diff: float, se: float, survival: Callable[[float], Any]) -> float:
    """Two-sided p-value of ``diff`` against 0; a difference with no spread is exact."""
    if se == 0:
        return 1.0 if diff == 0 else 0.0
    return float(2 * survival(abs(diff) / se))


def _allocation_tests(
    path_a: Path,
    path_b: Path,
    metrics_a: Any,
    metrics_b: Any,
    rng: np.random.Generator,
    bootstrap: int,
    notes: list[str],
) -> list[ChangeTest]:
    reference = metrics_a.reference_group
    if metrics_b.reference_group != reference:
        raise UsageError("compare: the runs have different reference groups")
    scores_a, scores_b = _scores(path_a), _scores(path_b)
    paired = _same_candidates(scores_a, scores_b)
    if not paired:
        notes.append("the runs scored different candidates: bootstraps are independent")
    tests: list[ChangeTest] = _score_tests(
        scores_a, scores_b, reference, paired, int(rng.integers(2**31)), bootstrap, notes
    )
    for group in metrics_a.groups:
        if group not in metrics_b.groups:
            continue
        figures_a, figures_b = metrics_a.groups[group], metrics_b.groups[group]
        for gap in ("dp_gap", "eo_gap"):
            values_a, values_b = getattr(figures_a, gap), getattr(figures_b, gap)
            cis_a, cis_b = getattr(figures_a, f"{gap}_ci"), getattr(figures_b, f"{gap}_ci")
            for k in values_a:
                test = _normal_test(
                    f"{gap} k={k}",
                    group,
                    values_a.get(k),
                    cis_a.get(k),
                    values_b.get(k),
                    cis_b.get(k),
                    metrics_a.confidence,
                )
                if test is not None:
                    tests.append(test)
    return tests


def _scores(path: Path) -> pd.DataFrame:
    frame = pd.read_csv(path / "scores.csv")
    return frame[frame["score"].notna()]


def _same_candidates(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    ids_a, ids_b = a["candidate_id"].astype(str), b["candidate_id"].astype(str)
    return ids_a.is_unique and ids_b.is_unique and set(ids_a) == set(ids_b)


def _score_tests(
    scores_a: pd.DataFrame,
    scores_b: pd.DataFrame,
    reference: str,
    paired: bool,
    seed: int,
    bootstrap: int,
    notes: list[str],
) -> list[ChangeTest]:
    """RABBI and δ of every group, B - A, with intervals over the units that vary.

    Both runs are resampled as their own figures are (names within groups and
    items within subtasks, each headline the candidate-weighted mean of the
    subtasks); paired runs share one resample of their common candidates.
    """
    a_found, weights = _replicates(scores_a, reference, bootstrap, seed, None)
    if paired:
        order = scores_a["candidate_id"].astype(str)
        scores_b = scores_b.set_index(scores_b["candidate_id"].astype(str)).loc[order]
        b_found, _ = _replicates(
            scores_b.reset_index(drop=True), reference, bootstrap, seed, weights
        )
    else:
        b_found, _ = _replicates(scores_b, reference, bootstrap, seed + 1, None)
    method = f"{'paired' if paired else 'independent'} bootstrap over units ({bootstrap})"
    missing = sorted(set(scores_a["group"]) - set(a_found) - {reference})
    if missing:
        notes.append(
            f"too few names (or items) for a test of RABBI and δ: {', '.join(map(str, missing))}"
        )
    tests = []
    for group, figures in a_found.items():
        for name, (before, before_draws) in figures.items():
            if group not in b_found:
                continue
            after, after_draws = b_found[group][name]
            spread = after_draws - before_draws
            spread = spread[~np.isnan(spread)]
            if spread.size < 20:
                continue
            low, high = np.quantile(spread, [0.025, 0.975])
            # A z-test on the bootstrap standard error: counting replicates past 0 would
            # floor p at 2 / (B + 1), which no multiple-test adjustment could pass.
            p = _two_sided(after - before, float(spread.std(ddof=1)), stats.norm.sf)
            tests.append(
                ChangeTest(
                    name, str(group), before, after, after - before, (float(low), float(high)),
                    p, method,
                )
            )  # fmt: skip
    return tests


def _replicates(
    scores: pd.DataFrame,
    reference: str,
    bootstrap: int,
    seed: int,
    resamples: Resamples | None,
) -> tuple[dict[Any, dict[str, tuple[float, FloatArray]]], Resamples]:
    names = scores["name"] if "name" in scores.columns and scores["name"].notna().all() else None
    items = next(
        (scores[c] for c in ("resume_id", "essay_id", "item") if c in scores.columns), None
    )
    return headline_replicates(
        scores["score"], scores["group"], reference=reference, subtasks=scores["subtask"],
        names=names, items=items, n_bootstrap=bootstrap, seed=seed, resamples=resamples,
    )  # fmt: skip


def _grade_tests(path_a: Path, path_b: Path, notes: list[str]) -> list[ChangeTest]:
    items_a = pd.read_csv(path_a / "items.csv").set_index("item_id")
    items_b = pd.read_csv(path_b / "items.csv").set_index("item_id")
    tests = []
    for metric, column in _GRADE_SCORES.items():
        both = pd.concat([items_a[column], items_b[column]], axis=1, join="inner").dropna()
        if len(both) < 2:
            notes.append(f"{metric}: fewer than two items scored in both runs; not tested")
            continue
        before, after = both.iloc[:, 0].to_numpy(float), both.iloc[:, 1].to_numpy(float)
        diffs = after - before
        diff = float(diffs.mean())
        se = float(diffs.std(ddof=1) / math.sqrt(len(diffs)))
        t = float(stats.t.ppf(0.975, len(diffs) - 1))
        p = _two_sided(diff, se, stats.t(len(diffs) - 1).sf)
        interval = (diff - t * se, diff + t * se)
        method = f"paired t over {len(diffs)} items"
        mean_a, mean_b = float(before.mean()), float(after.mean())
        tests.append(ChangeTest(metric, None, mean_a, mean_b, diff, interval, p, method))
    return tests


def _ruted_tests(metrics_a: Any, metrics_b: Any) -> list[ChangeTest]:
    tests = []
    for context, figures_a in metrics_a.contexts.items():
        figures_b = metrics_b.contexts.get(context)
        if figures_b is None:
            continue
        for metric in _RUTED_METRICS:
            test = _normal_test(
                metric,
                context,
                getattr(figures_a, metric),
                getattr(figures_a, f"{metric}_ci"),
                getattr(figures_b, metric),
                getattr(figures_b, f"{metric}_ci"),
                metrics_a.confidence,
            )
            if test is not None:
                tests.append(test)
    return tests


def comparison_lines(comparison: Comparison, *, show_all: bool = False) -> list[str]:
    """What ``biasaudit compare`` prints."""
    versions = comparison.versions
    lines = [
        f"compare {comparison.kind} runs of {comparison.model_a}: "
        f"A {comparison.run_a}  ->  B {comparison.run_b}",
        _version_line("model version", versions.versions_a, versions.versions_b),
        _version_line("system fingerprint", versions.fingerprints_a, versions.fingerprints_b),
        f"{len(comparison.tests)} tests of no change, Holm-adjusted, alpha {comparison.alpha:g}",
    ]
    shown = comparison.tests if show_all else comparison.changed_tests
    if shown:
        lines.append(
            f"{'figure':<22} {'A':>8} {'B':>8} {'B - A [95% CI]':>28} {'p (adj.)':>10}  method"
        )
        lines += [_test_row(test) for test in shown]
    quiet = len(comparison.tests) - len(comparison.changed_tests)
    if quiet and not show_all:
        lines.append(f"{quiet} other figures within noise (--all shows them)")
    lines += [f"note: {note}" for note in comparison.notes]
    if comparison.different_settings and not comparison.comparable:
        lines += [f"settings differ: {item}" for item in comparison.different_settings]
        lines.append(
            "the runs did not ask the same thing: a difference may come from the settings, "
            "not the model (--allow-different-settings gives a verdict all the same)"
        )
    groups = comparison.changed_groups
    detail = f" ({', '.join(groups)})" if groups else ""
    lines.append(f"verdict: {comparison.verdict}{detail}")
    return lines


def _version_line(what: str, a: Sequence[str], b: Sequence[str]) -> str:
    before, after = ", ".join(a) or "(none reported)", ", ".join(b) or "(none reported)"
    if set(a) == set(b):
        return f"{what}: {before} (unchanged)"
    return f"{what}: {before} -> {after} (CHANGED)"


def _test_row(test: ChangeTest) -> str:
    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:+.3f}"

    interval = f"{test.difference:+.3f} [{test.ci[0]:+.3f}, {test.ci[1]:+.3f}]"
    return (
        f"{test.label:<22} {number(test.before):>8} {number(test.after):>8} {interval:>28} "
        f"{test.p_adjusted:>10.2g}  {test.method}"
    )


def write_comparison(comparison: Comparison, path: Path) -> None:
    """Write the comparison as JSON (``compare --json``, and a reaudit's ``compare.json``)."""
    path.write_text(json.dumps(comparison.to_json(), indent=2) + "\n", encoding="utf-8")


def read_comparison(path: Path) -> Comparison:
    """Read a comparison :func:`write_comparison` wrote."""
    return Comparison.from_json(json.loads(path.read_text(encoding="utf-8")))
