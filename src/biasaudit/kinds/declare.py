"""What an audit kind is: a subclass of :class:`Kind` in its folder's ``kind.py``.

The subclass's methods are the kind's steps: :meth:`Kind.run` runs a spec,
:meth:`Kind.plan_requests` gives the requests it would send, :meth:`Kind.run_table`
prints a run, and so on. Each is a real method, typed here and checked by mypy
against this class, whose body imports the kind's own module that does the work
(a real ``import`` inside the method, so that listing the kinds, ``biasaudit run
--help``, loads only their specs): "go to definition" from a kind's method lands in
the module that computes it. The registry (:mod:`biasaudit.kinds.registry`) and its
callers reach a kind through these methods only.

Seven steps are abstract: a minimal kind is ``kind.py``, ``spec.py``, ``task.py``,
``plan.py``, ``run.py``, ``metrics_file.py``, ``table.py`` and ``page.py`` (eight files).
Every other step has a default here (:data:`OPTIONAL`): no headline, no study, no
figures or tests of change, no power lines, no ``--until``, no ``biasaudit score``,
no evidence page, and the sim's own shapes for its answers.

The declaration's data (its name, specs, commands, how reports name its figures) are
the fields of the frozen dataclass: ``KIND = MyKind(name=..., specs=..., ...)``.
Parameters typed ``Any`` are the kind's own models (its spec, metrics, study), which
the registry does not know; a kind's method may name them exactly.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from pydantic import BaseModel

    from biasaudit.kinds._evidence import Evidence
    from biasaudit.kinds._rounds import Growth
    from biasaudit.kinds.common import RunPair, TaskInfo, UnitDecisions
    from biasaudit.kinds.runspec import RunSpec
    from biasaudit.metrics import ChangeTest
    from biasaudit.providers import ModelRequest, Provider
    from biasaudit.providers.sim import Responder
    from biasaudit.render.document import Document, Figure, Section
    from biasaudit.render.panels import Compared
    from biasaudit.render.text import Block
    from biasaudit.store.runs import Manifest

__all__ = ["OPTIONAL", "Finished", "Kind"]


class Finished(Protocol):
    """What a kind's run (or score) returns: where the run is, its manifest, its
    ``metrics.json`` model."""

    @property
    def run_dir(self) -> Path: ...

    @property
    def manifest(self) -> Manifest: ...

    @property
    def metrics(self) -> Any: ...


OPTIONAL = (
    "headline",
    "study",
    "study_blocks",
    "study_page",
    "compare_figures",
    "change_tests",
    "plan_power",
    "growth",
    "shown_names",
    "score_options",
    "score",
    "responder",
    "evidence",
    "unit_decisions",
)
"""The steps a kind may leave out (their defaults stand in)."""


def _refuse(what: str) -> Any:
    from biasaudit.errors import UsageError

    return UsageError(f"this kind of audit has no {what}")


@dataclass(frozen=True)
class Kind(ABC):
    """An audit kind: the manifest's ``kind``, its specs, and its steps (the methods).

    Subclass it in the kind's ``kind.py``, give the abstract steps (each importing the
    kind's module that does it), override the optional ones it has, and declare
    ``KIND = MyKind(name=..., ...)``.
    """

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
    level_figures: tuple[str, ...] = ()
    """The figures of its change tests that are the decisions' level or an order effect,
    not a disparity between groups (a mitigation experiment shows them beside the bias
    and does not count them as bias removed)."""
    fair_values: Mapping[str, float] = field(default_factory=dict)
    """The figures of its change tests whose value without bias is not 0 (Grade Score's
    scores of consistency: 1), so that a mitigation experiment reads which way is fairer."""
    selects: str = ""
    """A capability: its figures are selection rates by demographic category (the
    ``impact`` rows of its ``metrics.json``, at every k), so a Local Law 144 summary can
    read a run of it; the word for what its rates count ("Candidates"). Empty: none."""

    # --- the steps every kind gives (task.py, metrics_file.py, run.py, plan.py, table.py,
    # page.py) ---

    @abstractmethod
    def task_infos(self) -> tuple[TaskInfo, ...]:
        """Its built-in tasks as ``biasaudit tasks`` lists them."""

    @abstractmethod
    def metrics_model(self) -> type[BaseModel]:
        """The pydantic model of its ``metrics.json``."""

    @abstractmethod
    def figure_rows(self, metrics: Any) -> list[dict[str, Any]]:
        """Every figure in long form, one row per figure with
        :data:`biasaudit.kinds.common.FIGURE_COLUMNS` (``biasaudit.load_runs``,
        ``export``)."""

    @abstractmethod
    def run(
        self,
        spec: Any,
        *,
        provider: Provider | None = None,
        stderr: TextIO | None = None,
        command: Sequence[str] | None = None,
    ) -> Finished:
        """The audit ``spec`` describes, at its one size, into a run directory."""

    @abstractmethod
    def plan_requests(self, spec: Any, provider: Provider) -> Iterator[ModelRequest]:
        """The requests a run would send, made as they are read (a dry run keeps none)."""

    @abstractmethod
    def run_table(self, metrics: Any, run_dir: Path) -> list[Block]:
        """What ``biasaudit run`` prints, described once: plain lines, or drawn with
        rich on a terminal."""

    @abstractmethod
    def run_document(self, run_dir: Path, manifest: Manifest, spec: Mapping[str, Any]) -> Document:
        """The run's HTML / Markdown report."""

    # --- the steps a kind may leave out (study.py, changes.py, power.py, imported.py,
    # sim.py, evidence.py), each with what stands in ---

    def headline(self, metrics: Any) -> str:
        """One line of the figures that matter most (``history``); none by default."""
        return ""

    def study(self, run_dirs: Sequence[str | Path], *, ndcg_at: int = 3) -> Any:
        """Runs of this kind read side by side (``biasaudit study``)."""
        raise _refuse("study (biasaudit study)")

    def study_blocks(self, study: Any) -> list[Block]:
        """What ``biasaudit study`` prints."""
        raise _refuse("study (biasaudit study)")

    def study_page(self, study: Any) -> tuple[str, list[Section], bool]:
        """The study's page: its title, sections, and whether every run was simulated."""
        raise _refuse("study (biasaudit study)")

    def change_tests(self, pair: RunPair) -> list[ChangeTest]:
        """The tests of "no change" that ``biasaudit compare`` adjusts; none by default
        (compare says no figure could be tested)."""
        return []

    def compare_figures(
        self, comparison: Compared, names: Mapping[str, str], reference: str, simulated: bool
    ) -> list[Figure]:
        """The compare page's figures of B - A; none by default."""
        return []

    def plan_power(
        self, spec: Any, cost_at: Callable[[Any], tuple[int, float | None]]
    ) -> list[str]:
        """The dry run's power lines for a spec's ``detect`` (``cost_at(spec)``: requests
        to send and cost of a spec); none by default."""
        return []

    def growth(self, spec: Any) -> Growth | None:
        """How ``--until`` grows an audit of ``spec`` in rounds; None (the default): the
        kind does not run in rounds."""
        return None

    def score_options(self) -> type[BaseModel] | None:
        """A pydantic model of ``biasaudit score <name>``'s options (each field an
        option); None (the default): no ``biasaudit score`` of this kind."""
        return None

    def score(
        self, path: str | Path, options: Any, *, command: Sequence[str] | None = None
    ) -> Finished:
        """The figures of outputs produced elsewhere, into a run directory whose table
        :meth:`run_table` prints."""
        raise _refuse("scoring of outputs produced elsewhere (biasaudit score)")

    def shown_names(self, spec: Any) -> tuple[str, ...]:
        """The names an audit of ``spec`` shows the model (the candidates', the persons'),
        which an intervention may hide; none by default."""
        return ()

    def unit_decisions(self, run_dir: Path) -> UnitDecisions | None:
        """What the run decided about each unit (the costs side of a mitigation
        experiment: the decisions' level and spread, their validity where the task has
        a ground truth); None by default."""
        return None

    def responder(self) -> Responder | None:
        """How the offline ``sim/`` model answers the kind's prompts (and declines every
        other prompt); None (the default): the sim answers with its own shapes."""
        return None

    def evidence(self, run_dir: Path) -> Evidence | None:
        """The units and answers behind the run's figures, and the report's links into
        them; None (the default): the run holds none to show."""
        return None

    # --- what the registry builds from the steps ---

    def declares(self, step: str) -> bool:
        """Whether the kind gives the optional ``step`` itself (overrides its default)."""
        return getattr(type(self), step) is not getattr(Kind, step)

    def run_blocks(self, metrics: Any, run_dir: Path) -> list[Block]:
        """Its :meth:`run_table` of a run, and the rounds of one run with ``--until``."""
        from biasaudit.errors import UsageError
        from biasaudit.kinds._rounds import read_rounds, rounds_lines

        blocks: list[Block] = self.run_table(metrics, run_dir)
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
