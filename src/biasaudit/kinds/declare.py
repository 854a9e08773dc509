"""What an audit kind declares: one :class:`Kind` in its ``kind.py``.

A kind names its specs and tasks, and where each step of the pipeline lives:
``"module:attribute"`` references (:class:`Ref`) imported on first use, so that
listing the kinds (``biasaudit run --help``) loads only their specs. The
registry (:mod:`biasaudit.kinds.registry`) and its callers reach a kind through
these fields only; each field's docstring is the signature its target has
(``tests/test_layout.py`` checks the parameters' names).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from biasaudit.spec import RunSpec

__all__ = ["Kind", "Ref", "Scorer"]


@dataclass(frozen=True)
class Ref:
    """A function, class or value of a kind, named ``"package.module:attribute"``
    and imported when first used. Calling it calls its target."""

    target: str

    def load(self) -> Any:
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.load()(*args, **kwargs)


@dataclass(frozen=True)
class Scorer:
    """``biasaudit score <kind> FILE``: the kind's figures of outputs produced elsewhere."""

    argument: str
    """What the file is called in the command's usage, e.g. ``SCORES_FILE``."""
    help: str
    """The command's help: the file's columns, what is written."""
    options: Ref
    """A pydantic model of the command's options (each field an option)."""
    score: Ref
    """``(path, options, *, command) -> ran``: a run directory with ``run_dir``,
    ``manifest`` and ``metrics``, whose table the kind's ``table`` prints."""


@dataclass(frozen=True)
class Kind:
    """An audit kind: the manifest's ``kind``, its specs, and its pipeline."""

    name: str
    """The manifest's ``kind`` of its runs, e.g. ``grade-score``."""
    specs: tuple[type[RunSpec], ...]
    """The specs of its tasks, each with its ``task``; a spec's class docstring is the
    help of ``biasaudit run <task>``."""
    commands: tuple[str, ...]
    """The tasks that have a ``biasaudit run <task>`` command (the others need a spec
    file: a task of your own)."""
    tasks: Ref
    """The built-in tasks as ``biasaudit tasks`` lists them: a tuple of ``TaskInfo``."""
    metrics: Ref
    """The pydantic model of its ``metrics.json``."""
    run: Ref
    """``(spec, *, provider, stderr, command) -> ran``: the audit, into a run directory
    (``run_dir``, ``manifest``, ``metrics``)."""
    plan: Ref
    """``(spec, provider) -> list[ModelRequest]``: the requests a run would send."""
    table: Ref
    """``(metrics, run_dir) -> list[Block]``: what ``biasaudit run`` prints, described
    once: plain lines, or drawn with rich on a terminal."""
    document: Ref
    """``(run_dir, manifest, spec) -> Document``: the run's HTML / Markdown report."""
    study: Ref
    """``(run_dirs, *, ndcg_at) -> study``: runs of this kind read side by side."""
    study_blocks: Ref
    """``(study) -> list[Block]``: what ``biasaudit study`` prints."""
    study_sections: Ref
    """``(study) -> (title, sections, simulated)``: the study's page."""
    change_tests: Ref
    """``(path_a, path_b, metrics_a, metrics_b, *, rng, bootstrap, notes) ->
    list[ChangeTest]``: the tests of "no change" that ``biasaudit compare`` adjusts."""
    compare_figures: Ref
    """``(comparison, names, reference, simulated) -> list[Figure]``: the compare
    page's figures of B - A."""
    headline: Ref
    """``(metrics) -> str``: one line of the figures that matter most (``history``)."""
    figures: Ref
    """``(metrics) -> list[dict]``: every figure in long form, one row per figure with
    :data:`biasaudit.kinds.common.FIGURE_COLUMNS` (``biasaudit.load_runs``, ``export``)."""
    compared_per: str
    """What the compare page shows its differences per: group, figure or context."""
    scores_file: str
    """The run file of its per-unit results (candidates, items, occupations, answers
    shown), which ``biasaudit.load_scores`` reads."""
    compare_note: str = ""
    """Added to the caption of the compare page's table of tests."""
    figure_names: Mapping[str, str] = field(default_factory=dict)
    """How reports name the figures its change tests key (``dp_gap`` -> ``ΔDP``)."""
    in_points: tuple[str, ...] = ()
    """The figures of its change tests shown in percentage points (shares)."""
    scorer: Scorer | None = None
    """``biasaudit score <name>``, where the kind reads outputs produced elsewhere."""
    power: Ref | None = None
    """``(spec, cost_at) -> list[str]``: the dry run's power lines for a spec's ``detect``
    (``cost_at(spec)``: requests to send and cost of a spec), where the kind plans them."""
    growth: Ref | None = None
    """A :class:`biasaudit.kinds._rounds.Growth`, or ``(spec) -> Growth``: how ``--until``
    grows its audits in rounds, where it does."""

    def run_blocks(self, metrics: Any, run_dir: Any) -> list[Any]:
        """Its ``table`` of a run, and the rounds of one run with ``--until``."""
        from biasaudit.errors import UsageError
        from biasaudit.kinds._rounds import read_rounds, rounds_lines

        blocks: list[Any] = self.table(metrics, run_dir)
        try:
            record = read_rounds(run_dir) if self.growth is not None else None
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
