"""What an audit kind is: a folder under ``kinds/`` whose modules export fixed names.

Its ``kind.py`` declares a :class:`Kind`: the manifest's ``kind``, its specs, its
commands and how its reports name things. Every step of the pipeline is found by
name (:data:`STEPS`): the run in ``run.py`` as ``run``, the requests it would send
in ``plan.py`` as ``plan_requests``, and so on. The registry
(:mod:`biasaudit.kinds.registry`) and its callers reach a kind through these steps
only; each is imported on first use, so that listing the kinds (``biasaudit run
--help``) loads only their specs. Each step's signature is in the docstring of its
field below (``tests/test_layout.py`` checks the parameters' names). The steps of
:data:`OPTIONAL` may be left out, each replaced by its fallback: eight files make a
minimal kind.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from biasaudit.kinds.runspec import RunSpec

__all__ = ["OPTIONAL", "STEPS", "Kind", "Step"]


_REQUIRED: Any = object()


@dataclass(frozen=True)
class Step:
    """One step of a kind: ``attribute`` of its folder's ``module``, imported when first
    used. Calling it calls its target. An optional step a kind leaves out (no such
    module, or no such name in it) is its ``fallback`` (:data:`OPTIONAL`)."""

    package: str
    module: str
    attribute: str
    fallback: Any = field(default=_REQUIRED, compare=False)

    @property
    def target(self) -> str:
        return f"{self.package}.{self.module}:{self.attribute}"

    @property
    def optional(self) -> bool:
        return self.fallback is not _REQUIRED

    def declared(self) -> bool:
        """Whether the kind gives this step itself (its module exists and names it),
        without running more of the kind than that module."""
        try:
            return hasattr(importlib.import_module(f"{self.package}.{self.module}"),
                           self.attribute)  # fmt: skip
        except ModuleNotFoundError as error:
            if error.name != f"{self.package}.{self.module}":
                raise
            return False

    def load(self) -> Any:
        if self.optional and not self.declared():
            return self.fallback.make() if isinstance(self.fallback, _Made) else self.fallback
        return getattr(importlib.import_module(f"{self.package}.{self.module}"), self.attribute)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.load()(*args, **kwargs)


def _no_headline(metrics: Any) -> str:
    return ""


def _no_tests(*args: Any, **kwargs: Any) -> list[Any]:
    return []


def _no_evidence(run_dir: Any) -> None:
    return None


def _no_power(spec: Any, cost_at: Any) -> list[str]:
    return []


def _unsupported(what: str) -> Any:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        from biasaudit.errors import UsageError

        raise UsageError(f"this kind of audit has no {what}")

    return refuse


@dataclass(frozen=True)
class _Made:
    """A fallback made when first needed (it imports what the kind's import need not)."""

    make: Any


def _declining() -> Any:
    from biasaudit.providers.sim import Responder

    return Responder(lambda sim, request: None)


OPTIONAL: dict[str, Any] = {
    "headline": _no_headline,
    "study": _unsupported("study (biasaudit study)"),
    "study_blocks": _unsupported("study (biasaudit study)"),
    "study_sections": _unsupported("study (biasaudit study)"),
    "compare_figures": _no_tests,
    "change_tests": _no_tests,
    "power": _no_power,
    "growth": None,
    "score_options": None,
    "score": None,
    "evidence": _no_evidence,
}
"""The steps a kind may leave out, each with what stands in: no headline, no study, no
figures or tests of change (``compare`` says no figure could be tested), no power
lines, no ``--until`` (no growth), no ``biasaudit score`` of it (no score options), no
evidence page; and the sim, which answers a kind without ``sim.py`` with its own
shapes. A minimal kind is ``kind.py``, ``spec.py``, ``task.py``, ``plan.py``,
``run.py``, ``metrics.py``, ``report.py`` and ``html.py``."""


STEPS: dict[str, tuple[str, str]] = {
    "tasks": ("task", "TASK_INFOS"),
    "metrics": ("metrics", "Metrics"),
    "figures": ("metrics", "figure_rows"),
    "run": ("run", "run"),
    "plan": ("plan", "plan_requests"),
    "table": ("report", "run_table"),
    "study_blocks": ("report", "study_blocks"),
    "headline": ("report", "headline"),
    "document": ("html", "run_document"),
    "study_sections": ("html", "study_page"),
    "compare_figures": ("html", "compare_figures"),
    "study": ("study", "run_study"),
    "change_tests": ("changes", "change_tests"),
    "power": ("power", "plan_power"),
    "growth": ("power", "growth"),
    "score_options": ("imported", "ImportOptions"),
    "score": ("imported", "score"),
    "responder": ("sim", "RESPONDER"),
    "evidence": ("evidence", "evidence"),
}
"""Each step of a kind: the module of its folder and the name it exports there."""


@dataclass(frozen=True)
class Kind:
    """An audit kind: the manifest's ``kind``, its specs, and its pipeline.

    ``Kind(__name__, name=..., ...)`` in the kind's ``kind.py``: the folder holding
    that module holds its steps.
    """

    declared_in: str
    """The module declaring it (its ``kind.py``): its folder holds the steps."""
    name: str
    """The manifest's ``kind`` of its runs, e.g. ``grade-score``."""
    specs: tuple[type[RunSpec], ...]
    """The specs of its tasks, each with its ``task``; a spec's class docstring is the
    help of ``biasaudit run <task>``."""
    commands: tuple[str, ...]
    """The tasks that have a ``biasaudit run <task>`` command (the others need a spec
    file: a task of your own)."""
    compared_per: str
    """What the compare page shows its differences per: group, figure or context."""
    scores_file: str
    """The run file of its per-unit results (candidates, items, occupations, answers
    shown), which ``biasaudit.load_scores`` reads."""
    score_argument: str
    """What ``biasaudit score <name> FILE`` calls its file in the usage, e.g.
    ``SCORES_FILE``."""
    score_help: str
    """The help of ``biasaudit score <name>``: the file's columns, what is written."""
    compare_note: str = ""
    """Added to the caption of the compare page's table of tests."""
    figure_names: Mapping[str, str] = field(default_factory=dict)
    """How reports name the figures its change tests key (``dp_gap`` -> ``ΔDP``)."""
    in_points: tuple[str, ...] = ()
    """The figures of its change tests shown in percentage points (shares)."""
    selects: str = ""
    """A capability: its figures are selection rates by demographic category (the
    ``impact`` rows of its ``metrics.json``, at every k), so a Local Law 144 summary can
    read a run of it; the word for what its rates count ("Candidates"). Empty: none."""

    tasks: Step = field(init=False, repr=False, compare=False)
    """``task.TASK_INFOS``: the built-in tasks as ``biasaudit tasks`` lists them, a
    tuple of ``TaskInfo``."""
    metrics: Step = field(init=False, repr=False, compare=False)
    """``metrics.Metrics``: the pydantic model of its ``metrics.json``."""
    figures: Step = field(init=False, repr=False, compare=False)
    """``metrics.figure_rows``, ``(metrics) -> list[dict]``: every figure in long form,
    one row per figure with :data:`biasaudit.kinds.common.FIGURE_COLUMNS`
    (``biasaudit.load_runs``, ``export``)."""
    run: Step = field(init=False, repr=False, compare=False)
    """``run.run``, ``(spec, *, provider, stderr, command) -> ran``: the audit, into a
    run directory (``run_dir``, ``manifest``, ``metrics``)."""
    plan: Step = field(init=False, repr=False, compare=False)
    """``plan.plan_requests``, ``(spec, provider) -> Iterator[ModelRequest]``: the requests
    a run would send, made as they are read (a dry run keeps none)."""
    table: Step = field(init=False, repr=False, compare=False)
    """``report.run_table``, ``(metrics, run_dir) -> list[Block]``: what ``biasaudit
    run`` prints, described once: plain lines, or drawn with rich on a terminal."""
    study_blocks: Step = field(init=False, repr=False, compare=False)
    """``report.study_blocks``, ``(study) -> list[Block]``: what ``biasaudit study``
    prints."""
    headline: Step = field(init=False, repr=False, compare=False)
    """``report.headline``, ``(metrics) -> str``: one line of the figures that matter
    most (``history``)."""
    document: Step = field(init=False, repr=False, compare=False)
    """``html.run_document``, ``(run_dir, manifest, spec) -> Document``: the run's HTML
    / Markdown report."""
    study_sections: Step = field(init=False, repr=False, compare=False)
    """``html.study_page``, ``(study) -> (title, sections, simulated)``: the study's
    page."""
    compare_figures: Step = field(init=False, repr=False, compare=False)
    """``html.compare_figures``, ``(comparison, names, reference, simulated) ->
    list[Figure]``: the compare page's figures of B - A."""
    study: Step = field(init=False, repr=False, compare=False)
    """``study.run_study``, ``(run_dirs, *, ndcg_at) -> study``: runs of this kind read
    side by side."""
    change_tests: Step = field(init=False, repr=False, compare=False)
    """``changes.change_tests``, ``(path_a, path_b, metrics_a, metrics_b, *, rng,
    bootstrap, notes) -> list[ChangeTest]``: the tests of "no change" that ``biasaudit
    compare`` adjusts."""
    power: Step = field(init=False, repr=False, compare=False)
    """``power.plan_power``, ``(spec, cost_at) -> list[str]``: the dry run's power lines
    for a spec's ``detect`` (``cost_at(spec)``: requests to send and cost of a spec)."""
    growth: Step = field(init=False, repr=False, compare=False)
    """``power.growth``: a :class:`biasaudit.kinds._rounds.Growth`, or ``(spec) ->
    Growth``: how ``--until`` grows its audits in rounds."""
    score_options: Step = field(init=False, repr=False, compare=False)
    """``imported.ImportOptions``: a pydantic model of ``biasaudit score <name>``'s
    options (each field an option)."""
    score: Step = field(init=False, repr=False, compare=False)
    """``imported.score``, ``(path, options, *, command) -> ran``: the figures of
    outputs produced elsewhere, into a run directory whose table ``table`` prints."""
    responder: Step = field(init=False, repr=False, compare=False)
    """``sim.RESPONDER``: a :class:`biasaudit.providers.sim.Responder`, how the offline
    ``sim/`` model answers the kind's prompts (and declines every other prompt).
    ``biasaudit.kinds`` registers it with the sim by the same fixed name
    (:data:`biasaudit.providers.sim.RESPONDER_AT`, :mod:`biasaudit.sim_responders`)."""

    evidence: Step = field(init=False, repr=False, compare=False)
    """``evidence.evidence``, ``(run_dir) -> Evidence | None``: the units and answers
    behind the run's figures, as views of :class:`biasaudit.kinds._evidence.Evidence`,
    and the report's links into them (None: the run holds none to show)."""

    def __post_init__(self) -> None:
        package = self.declared_in.rpartition(".")[0]
        for name, (module, attribute) in STEPS.items():
            fallback = _Made(_declining) if name == "responder" else OPTIONAL.get(name, _REQUIRED)
            object.__setattr__(self, name, Step(package, module, attribute, fallback))

    def run_blocks(self, metrics: Any, run_dir: Any) -> list[Any]:
        """Its ``table`` of a run, and the rounds of one run with ``--until``."""
        from biasaudit.errors import UsageError
        from biasaudit.kinds._rounds import read_rounds, rounds_lines

        blocks: list[Any] = self.table(metrics, run_dir)
        try:
            record = read_rounds(run_dir)
        except UsageError as error:  # a damaged record: the run's own table stands
            return [*blocks, f"note: {error}; its rounds are left out"]
        if record is None:
            return blocks
        caution = (
            "the intervals above are the last round's own, for its size alone; those of "
            "the rounds hold at every look, whatever the round the audit stopped at"
        )
        return [*blocks, *rounds_lines(record), caution]

    def owns(self, spec: RunSpec) -> bool:
        """Whether a run of ``spec`` is of this kind."""
        return isinstance(spec, self.specs)
