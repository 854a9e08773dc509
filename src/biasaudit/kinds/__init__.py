"""The audit kinds, one folder each (allocation, listwise, grade_score, ruted): spec to run
directory, metrics, tables, reports and studies; :mod:`.registry` dispatches by kind,
and :mod:`.common` holds what every kind shares (no kind imports another)."""
