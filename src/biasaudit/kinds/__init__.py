"""The audit kinds, one folder each (allocation, listwise, grade_score, ruted,
decisions): spec to run
directory, metrics, tables, reports and studies; :mod:`.registry` dispatches by kind,
and :mod:`.common` holds what every kind shares (no kind imports another).

:data:`KINDS` lists them, one line a kind; it loads nothing, so that what lists the
kinds (the JSON Schemas, the layout test) does not load the registry.
"""

__all__ = ["KINDS"]

KINDS: dict[str, str] = {
    "allocation": "biasaudit.kinds.allocation.kind",
    "grade-score": "biasaudit.kinds.grade_score.kind",
    "ruted": "biasaudit.kinds.ruted.kind",
    "listwise": "biasaudit.kinds.listwise.kind",
    "decisions": "biasaudit.kinds.decisions.kind",
}
"""Each audit kind (the manifest's ``kind``) and the module declaring it (its ``KIND``,
a :class:`~biasaudit.kinds.declare.Kind`)."""
