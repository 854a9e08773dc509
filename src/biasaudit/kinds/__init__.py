"""The audit kinds, one folder each (allocation, listwise, grade_score, ruted,
decisions): spec to run
directory, metrics, tables, reports and studies; :mod:`.registry` dispatches by kind,
and :mod:`.common` holds what every kind shares (no kind imports another).

:data:`KINDS` lists them, one line a kind, and the kinds installed packages add
(:data:`KIND_GROUP`); it loads nothing, so that what lists the kinds (the JSON
Schemas, the layout test) does not load the registry. Importing it registers the
kinds' responders with the offline sim (:mod:`biasaudit.sim_responders`), asked for when
a sim first answers.
"""

from biasaudit import sim_responders as _sim

__all__ = ["KINDS", "KIND_GROUP"]

KIND_GROUP = "biasaudit.kinds"
"""The entry point group through which an installed package adds a kind: each entry
named after its kind, its value the module declaring it (its ``KIND``)."""

KINDS: dict[str, str] = {
    "allocation": "biasaudit.kinds.allocation.kind",
    "grade-score": "biasaudit.kinds.grade_score.kind",
    "ruted": "biasaudit.kinds.ruted.kind",
    "listwise": "biasaudit.kinds.listwise.kind",
    "decisions": "biasaudit.kinds.decisions.kind",
}
"""Each audit kind (the manifest's ``kind``) and the module declaring it (its ``KIND``,
a :class:`~biasaudit.kinds.declare.Kind`)."""


def _installed_kinds() -> dict[str, str]:
    """The kinds installed packages declare (:data:`KIND_GROUP`), by name; a built-in
    kind's name is the built-in kind's."""
    from importlib.metadata import entry_points

    found = sorted(entry_points(group=KIND_GROUP), key=lambda entry: entry.name)
    return {entry.name: entry.value for entry in found}


KINDS.update({name: module for name, module in _installed_kinds().items() if name not in KINDS})


def _sim_responders() -> list[object]:
    """Each kind's :meth:`~biasaudit.kinds.declare.Kind.responder`, in the order of
    :data:`KINDS`; a kind that gives none is answered with the sim's own shapes."""
    import importlib

    found = (importlib.import_module(module).KIND.responder() for module in KINDS.values())
    return [responder for responder in found if responder is not None]


_sim.register(_sim_responders)  # the kinds push how the sim answers them
