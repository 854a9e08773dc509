"""What belongs to a spec field is declared on the field (its role: which model, how
the requests were sent or stored, how the figures were computed, how much was asked),
and the study, ``compare`` and a re-audit's history read that one declaration (issue:
three hand-written lists disagreed about ``tpm``, ``batch``, ``model`` and ``headers``)."""

from __future__ import annotations

import typing

from biasaudit.engine.options import FieldRole, RunOptions, field_role
from biasaudit.kinds.registry import VARIANTS, spec_fields_in_roles
from biasaudit.reports.history import spec_identity
from biasaudit.spec import parse_spec


def test_every_engine_and_storage_field_declares_its_role() -> None:
    assert all(field_role(f) is not None for f in RunOptions.model_fields.values())


def test_every_spec_field_is_what_was_asked_or_declares_a_role() -> None:
    """No spec field is left undecided by a typo: a role is one of FieldRole's."""
    roles = set(typing.get_args(FieldRole))
    for classes in VARIANTS.values():
        for spec_class in classes:
            for name, field in spec_class.model_fields.items():
                extra = field.json_schema_extra
                if isinstance(extra, dict) and "role" in extra:
                    assert extra["role"] in roles, (spec_class.__name__, name)


def test_the_readers_agree() -> None:
    how = spec_fields_in_roles("sending", "storing", "computing")
    run_only = spec_fields_in_roles("model", "sending", "storing", "computing")
    same_audit = spec_fields_in_roles("model", "sending", "storing", "computing", "sizing")
    assert run_only == how | {"model", "models"}
    assert same_audit == run_only | spec_fields_in_roles("sizing")
    assert {"tpm", "batch", "batch_poll", "headers", "base_url", "n_ctx"} <= how
    assert {"bootstrap", "gap_bootstrap"} <= how  # the same answers, more replicates


def test_a_reaudit_sent_another_way_finds_its_baseline() -> None:
    base = {"task": "resume-screening", "model": "sim/biased", "jobs": ["software-engineer"]}
    same = spec_identity(parse_spec(base))
    for other in ({"tpm": 10_000}, {"batch": True}, {"concurrency": 3}, {"bootstrap": 500},
                  {"headers": {"x-team": "audit"}}, {"runs_dir": "elsewhere"}):  # fmt: skip
        assert spec_identity(parse_spec({**base, **other})) == same, other
    for asked in ({"names_per_group": 5}, {"model": "sim/fair"}, {"temperature": 0.5}):
        assert spec_identity(parse_spec({**base, **asked})) != same, asked
