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
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from biasaudit.errors import UsageError
from biasaudit.metrics import ChangeTest
from biasaudit.render.text import format_p
from biasaudit.store.files import write_text
from biasaudit.store.runs import Manifest, read_manifest, read_responses, read_run_json
from biasaudit.textfiles import a_run

__all__ = [
    "NOT_TESTED",
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
NOT_TESTED = "no verdict: no figure could be tested (too few units behind the figures)"
FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


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
    def version_changed(self) -> bool:
        """An endpoint reported another model version or fingerprint."""
        return self.versions.changed

    @property
    def comparable(self) -> bool:
        """Whether a verdict may be given: same settings, or told to go ahead."""
        return not self.different_settings or self.allow_different_settings

    @property
    def verdict(self) -> str:
        if not self.comparable:
            return NOT_COMPARABLE
        if not self.tests:
            return NOT_TESTED
        unchanged = VERSION_ONLY if self.versions.changed else NO_CHANGE
        found = CHANGED if self.drift else unchanged
        if self.different_settings:
            return f"{found}, across different settings ({'; '.join(self.different_settings)})"
        return found

    def to_json(self) -> dict[str, Any]:
        """The record ``compare.json`` holds (:class:`~biasaudit.store.comparisons.
        ComparisonRecord`), with the verdict and each test's outcome."""
        from biasaudit.store.comparisons import ComparisonRecord

        data = asdict(self)
        data["versions"]["changed"] = self.versions.changed
        data["verdict"], data["changed_groups"] = self.verdict, self.changed_groups
        for test, row in zip(self.tests, data["tests"], strict=True):
            row["changed"] = test.changed(self.alpha)
        return ComparisonRecord.model_validate(data).model_dump(mode="json")

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Comparison:
        """The comparison :meth:`to_json` wrote; its derived fields are recomputed, not read.

        Raises
        ------
        ValueError
            Not such a record (pydantic's ValidationError, naming the field).
        """
        from biasaudit.store.comparisons import SCHEMA_VERSION, ComparisonRecord

        record = ComparisonRecord.model_validate(data)
        if record.schema_version > SCHEMA_VERSION:
            raise UsageError(
                f"a comparison of schema_version {record.schema_version}, newer than this "
                f"biasaudit reads ({SCHEMA_VERSION}): upgrade biasaudit to read it"
            )
        versions = record.versions
        return cls(
            record.run_a, record.run_b, record.kind, record.model_a, record.model_b,
            versions=VersionChange(tuple(versions.versions_a), tuple(versions.versions_b),
                                   tuple(versions.fingerprints_a),
                                   tuple(versions.fingerprints_b)),
            tests=[ChangeTest(**test.model_dump(exclude={"changed"})) for test in record.tests],
            alpha=record.alpha, notes=record.notes,
            different_settings=record.different_settings,
            allow_different_settings=record.allow_different_settings,
        )  # fmt: skip


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
    from biasaudit.kinds.common import RunPair
    from biasaudit.kinds.registry import AUDIT_KINDS, audit_kind, read_metrics

    path_a, path_b = Path(run_a), Path(run_b)
    manifest_a, manifest_b = _manifest(path_a), _manifest(path_b)
    if manifest_a.kind != manifest_b.kind:
        raise UsageError(
            f"compare: {path_a} is {a_run(manifest_a.kind)} and {path_b} "
            f"{a_run(manifest_b.kind)}; compare runs of one audit"
        )
    kind = manifest_a.kind
    if kind not in AUDIT_KINDS:
        raise UsageError(f"compare: runs of kind '{kind}' have no metrics to compare")
    metrics_a, metrics_b = read_metrics(path_a, kind), read_metrics(path_b, kind)
    notes: list[str] = []
    rng = np.random.default_rng(seed)
    pair = RunPair(path_a, path_b, metrics_a, metrics_b, rng, bootstrap, notes)
    tests = audit_kind(kind).change_tests(pair)
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
    found: list[str] = []
    spec_a, spec_b = _spec(path_a, "A", found), _spec(path_b, "B", found)
    # A field only one spec has was added by a later biasaudit: runs written before it
    # asked with its default, so it is no difference of settings.
    from biasaudit.kinds.registry import spec_fields_in_roles

    run_only = spec_fields_in_roles("model", "sending", "storing", "computing")
    for key in sorted((set(spec_a) & set(spec_b)) - run_only):
        if spec_a.get(key) != spec_b.get(key):
            found.append(f"{key}: {_shown(spec_a.get(key))} vs {_shown(spec_b.get(key))}")
    path = (getattr(getattr(m, "scoring", None), "path", None) for m in (metrics_a, metrics_b))
    path_a_, path_b_ = path
    if path_a_ != path_b_:
        found.append(f"scoring path: {path_a_} vs {path_b_}")
    asked_a, asked_b = _asked(path_a, "A", found), _asked(path_b, "B", found)
    if asked_a is not None and asked_b is not None and asked_a != asked_b:
        found.append(
            f"requests: {len(asked_a - asked_b)} only in A, {len(asked_b - asked_a)} only in B "
            "(items, candidates or orders differ)"
        )
    return found


def _spec(path: Path, name: str, found: list[str]) -> dict[str, Any]:
    """The run's ``spec.json``; where it is damaged, a phrase in ``found`` says its
    settings are unknown (so no verdict is given unless asked for)."""
    try:
        return read_run_json(path / "spec.json")
    except UsageError:
        found.append(f"{name}'s spec.json is damaged: what it asked is unknown")
        return {}


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."


def _asked(path: Path, name: str, found: list[str]) -> set[tuple[str, int]] | None:
    """The requests the run answered (None without ``responses.jsonl``: an import); where
    that file is damaged, a phrase in ``found`` says its requests are unknown."""
    try:
        return {(record.id, record.replicate) for record in read_responses(path)}
    except OSError:
        return None
    except UsageError:
        found.append(f"{name}'s responses.jsonl is damaged: what it asked is unknown")
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
    """Each test with its Holm-adjusted p-value (:func:`biasaudit.metrics.holm_adjust`)."""
    from biasaudit.metrics import holm_adjust

    adjusted = holm_adjust([test.p_value for test in tests])
    return [
        replace(test, p_adjusted=1.0 if p is None else p)
        for test, p in zip(tests, adjusted, strict=True)
    ]


def _models(comparison: Comparison) -> str:
    """The model both runs audit, or each run's where they differ."""
    if comparison.model_a == comparison.model_b:
        return comparison.model_a
    return f"A {comparison.model_a} and B {comparison.model_b}"


def comparison_lines(comparison: Comparison, *, show_all: bool = False) -> list[str]:
    """What ``biasaudit compare`` prints."""
    versions = comparison.versions
    lines = [
        f"compare {comparison.kind} runs of {_models(comparison)}: "
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
        f"{format_p(test.p_adjusted):>10}  {test.method}"
    )


def write_comparison(comparison: Comparison, path: Path) -> None:
    """Write the comparison as JSON (``compare --json``, and a reaudit's ``compare.json``)."""
    write_text(path, json.dumps(comparison.to_json(), indent=2) + "\n")


def read_comparison(path: Path) -> Comparison:
    """Read a comparison :func:`write_comparison` wrote."""
    return Comparison.from_json(json.loads(path.read_text(encoding="utf-8")))
