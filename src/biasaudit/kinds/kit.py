"""What a kind written in another package imports: the kind contract and the parts every
kind is built from, in one public place (a kind of biasaudit's own may import them from
where they live).

A kind is a subclass of :class:`Kind` in its ``kind.py`` (its steps are the methods,
each importing the module that does it; a run returns a :class:`Finished`), and is
registered by an entry point of ``biasaudit.kinds`` (docs: "Add an audit kind from your
own package"). Its spec is a :class:`RunSpec` (a field that sizes a run is declared
with :func:`sizing_field`, pydantic's ``Field`` marked :data:`SIZES_THE_RUN`); its plan
is a :class:`RequestPlan` of :class:`ModelRequest`; its run sends them through
:func:`run_planned` (in :func:`run_async`) and writes a ``metrics.json`` model on
:class:`MetricsHeader` with :class:`RequestCounts` (:func:`request_counts`); its figures
in long form are :func:`figure_row`; its tasks are :class:`TaskInfo`; its report page is
a :class:`Document` of :class:`Section` and :class:`Paragraph`. ``tests/toy_kind/`` is a
kind built from this module alone."""

from __future__ import annotations

from biasaudit.engine.core import RequestResult
from biasaudit.engine.loop import run_async
from biasaudit.engine.options import sizing_field
from biasaudit.engine.session import RunSession
from biasaudit.kinds._runner import Ran, run_planned
from biasaudit.kinds.common import (
    MetricsHeader,
    RequestCounts,
    RequestPlan,
    TaskInfo,
    figure_row,
    read_run_metrics,
    request_counts,
)
from biasaudit.kinds.declare import Finished, Kind
from biasaudit.kinds.runspec import SIZES_THE_RUN, RunSpec
from biasaudit.providers import ModelRequest, Provider, SamplingParams
from biasaudit.render.document import Document, Paragraph, Section
from biasaudit.store.runs import Manifest

__all__ = [
    "SIZES_THE_RUN",
    "Document",
    "Finished",
    "Kind",
    "Manifest",
    "MetricsHeader",
    "ModelRequest",
    "Paragraph",
    "Provider",
    "Ran",
    "RequestCounts",
    "RequestPlan",
    "RequestResult",
    "RunSession",
    "RunSpec",
    "SamplingParams",
    "Section",
    "TaskInfo",
    "figure_row",
    "read_run_metrics",
    "request_counts",
    "run_async",
    "run_planned",
    "sizing_field",
]
