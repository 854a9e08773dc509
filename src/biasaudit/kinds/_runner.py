"""The one run skeleton every kind uses: open a session, record the spec, send the
plan's requests, write the results, and close, whatever happens.

A kind brings what differs: its plan (the requests, and how each answer is read:
``annotate``), what the finished run writes (``write_results``), and, optionally, a
hint for a run the endpoint stopped. The
session owns the rest: the run directory, the manifest, the engine, failures
recorded as they happen (:meth:`~biasaudit.engine.session.RunSession.fail`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TextIO, TypeVar

from biasaudit.engine.core import RequestResult
from biasaudit.engine.progress import phase
from biasaudit.engine.session import RunSession
from biasaudit.errors import BiasauditError, NoAnswerError, RunAbortedError
from biasaudit.kinds.runspec import AuditSpec
from biasaudit.providers import ModelRequest, Provider

__all__ = ["Ran", "SentPlan", "run_planned"]

T = TypeVar("T")


class SentPlan(Protocol):
    """What a run sends: a kind's plan (its requests, and how each answer is read)."""

    @property
    def requests(self) -> Sequence[ModelRequest]:
        """Every request, in the order they are sent."""

    def annotate(self, result: RequestResult) -> dict[str, Any]:
        """Read one result; return what ``responses.jsonl`` records about it."""


@dataclass(frozen=True)
class Ran(Generic[T]):
    """A finished run: its session (run directory, manifest) and what the kind wrote."""

    session: RunSession
    results: T


async def run_planned(
    kind: str,
    spec: AuditSpec,
    provider: Provider,
    plan: SentPlan,
    *,
    write_results: Callable[[RunSession], T],
    label: str | None = None,
    stderr: TextIO | None = None,
    command: Sequence[str] | None = None,
    explain_abort: Callable[[RunAbortedError], str | None] | None = None,
) -> Ran[T]:
    """Run ``plan``'s requests as a ``kind`` run of ``spec`` into a new run directory
    (``spec.json`` records the spec; ``label``, default ``kind``, heads its progress).

    ``explain_abort`` may add a hint to a run the endpoint stopped (what to rerun
    with); the run is recorded as aborted either way.

    Raises
    ------
    RunAbortedError
        The run stopped (the endpoint, storage, or Ctrl-C); what arrived is kept.
    """
    requests = plan.requests
    label = label or kind
    intervention = getattr(spec, "intervention", None)
    if intervention is not None:  # every prompt changed, each request keeping its id
        from biasaudit.interventions import intervene

        requests = list(intervene(requests, intervention))
    session = RunSession.open(
        kind,
        provider,
        spec.engine_settings(),
        runs_dir=spec.runs_dir,
        cache_path=spec.cache_path,
        command=list(command if command is not None else sys.argv),
        requests=requests,
    )
    try:
        session.run.write_json("spec.json", spec.model_dump(mode="json"))
        await session.send(requests, stderr=stderr, label=f"{label}: ", annotate=plan.annotate)
        if session.manifest.status == "failed":  # every request failed: nothing to compute
            raise NoAnswerError(
                f"{session.manifest.error}; the run is recorded as failed, with every "
                "request's error in its responses.jsonl; a rerun sends them again",
                str(session.run.path),
            )
        with phase(f"{label}: computing the figures", stderr):
            results = write_results(session)
    except RunAbortedError as error:
        session.fail(error)
        hint = explain_abort(error) if explain_abort is not None else None
        await session.close()
        cause = error.cause if hint is None else BiasauditError(f"{error.cause}; {hint}")
        if _nothing_answered(session):
            # Nothing was answered or paid for: a folder would record only the failure, and
            # each retry of an endpoint that is down would leave another.
            session.run.remove()
            note = "nothing was answered, so no run folder is kept"
            raise RunAbortedError(BiasauditError(f"{cause}; {note}"), None) from error
        if hint is None:
            raise
        raise RunAbortedError(cause, error.run_dir) from error
    except (BiasauditError, OSError) as error:
        raise session.fail(error) from None
    finally:
        if not session.closed:
            await session.close()
    return Ran(session, results)


def _nothing_answered(session: RunSession) -> bool:
    """No answer, cache hit, batch or reported token in the stopped run."""
    manifest = session.manifest
    counts, usage = manifest.counts, manifest.usage
    return (
        counts.failures >= counts.requests
        and counts.cache_hits == 0
        and counts.batched == 0
        and not manifest.batches
        and usage.input_tokens == 0
        and usage.output_tokens == 0
    )
