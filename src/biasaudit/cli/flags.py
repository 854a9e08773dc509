"""The options several commands share, declared once: ``--no-report``, ``--runs-dir``,
``--alpha`` and ``--bootstrap`` (each command says in its help what they mean for it).
Light: click alone, so that ``biasaudit --help`` loads nothing more to build them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

__all__ = [
    "alpha_option",
    "bootstrap_option",
    "no_report_option",
    "no_report_param",
    "no_such_spec_file",
    "runs_dir_option",
]

F = TypeVar("F", bound=Callable[..., Any])

_NO_REPORT = ("--no-report", "no_report")
_RUNS_DIR = ("--runs-dir", "runs_dir")


def no_report_param(help: str, **attrs: Any) -> click.Option:
    """``--no-report`` as a parameter of a command built from parts (``run <task>``,
    ``score <kind>``): every command that writes a report takes it, each saying what
    it then writes instead."""
    return click.Option(list(_NO_REPORT), is_flag=True, help=help, **attrs)


def no_report_option(help: str) -> Callable[[F], F]:
    """``--no-report`` as a decorator of a command (see :func:`no_report_param`)."""
    return click.option(*_NO_REPORT, is_flag=True, help=help)


def runs_dir_option(help: str, **attrs: Any) -> Callable[[F], F]:
    """``--runs-dir``, the folder of runs, as a decorator of a command that reads or
    writes runs beside the spec field of that name (each says its default)."""
    return click.option(*_RUNS_DIR, type=click.Path(path_type=Path), help=help, **attrs)


def alpha_option() -> Callable[[F], F]:
    """``--alpha``, the level of the Holm-adjusted tests of no change (``compare``,
    ``reaudit``)."""
    return click.option("--alpha", default=0.05, show_default=True, type=click.FloatRange(0, 1),
                        help="Level of the Holm-adjusted tests of no change.")  # fmt: skip


def bootstrap_option() -> Callable[[F], F]:
    """``--bootstrap``, the replicates of the tests of change that resample (``compare``,
    ``experiment``)."""
    return click.option("--bootstrap", default=1000, show_default=True,
                        type=click.IntRange(100),
                        help="Bootstrap replicates of the tests of change that resample "
                        "(score figures, listwise ΔDP).")  # fmt: skip


def no_such_spec_file(path: Path) -> Exception:
    """The error of a spec file that is not there, pointing at ``biasaudit examples`` where
    the path is one of the shipped examples'."""
    from biasaudit.errors import UsageError

    examples = (" (the shipped examples: 'biasaudit examples' copies them into ./examples)"
                if path.parts and path.parts[0] == "examples" else "")  # fmt: skip
    return UsageError(f"no such spec file: {path}{examples}")
