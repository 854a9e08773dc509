"""A sixth audit kind written outside biasaudit, as a third party would write one: eight
files on the kind contract (``biasaudit.kinds.declare``), registered through the entry
point group ``biasaudit.kinds``. tests/test_toy_kind.py installs it as pip would and
runs it end to end; nothing of biasaudit names it."""
