"""Mitigation experiments: one audit asked under each of several interventions, paired.

``biasaudit experiment SPEC --intervention ...`` runs the audit a spec describes once as
it is (the baseline) and once under each intervention (:mod:`biasaudit.interventions`),
each an ordinary run (its own folder, report, evidence page and replay), with the same
units, draws, orders and seeds. Because every unit is asked in every arm, the effect of
an intervention on each figure is estimated from the units' paired differences
(:mod:`.analysis`), with a Holm adjustment over every intervention and figure; beside
what it fixes stands what it costs: the decisions' level and spread, their validity
where the task has a ground truth, irregular answers and refusals, tokens and money.
The experiment's folder holds ``experiment.json``
(:class:`biasaudit.store.experiments.Experiment`) and its report; the runs stay where
every run goes.

It stands above the kinds, reaching each through the registry: a kind takes part
through its change tests (the paired figures) and its
:meth:`~biasaudit.kinds.declare.Kind.unit_decisions` (the costs).
"""
