"""biasaudit: audit large language models for bias in the decisions built on them.

The public surface is re-exported here, each name imported on first use;
everything in a module whose name starts with an underscore is private.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from biasaudit._version import __version__

if TYPE_CHECKING:
    from biasaudit.engine.core import Engine, EngineSettings, EngineStats, RequestResult
    from biasaudit.engine.fanout import (
        FanoutOptions,
        FanoutResult,
        fanout,
        read_prompts,
        run_fanout,
    )
    from biasaudit.engine.loop import run_async
    from biasaudit.errors import BiasauditError
    from biasaudit.frames import (
        export_runs,
        load_experiment,
        load_prompts,
        load_responses,
        load_runs,
        load_scores,
    )
    from biasaudit.kinds.allocation.run import AuditResult, run as audit, run_audit
    from biasaudit.kinds.allocation.study import run_study
    from biasaudit.kinds.ruted.run import RutedResult, run as ruted_audit, run_ruted_audit
    from biasaudit.kinds.ruted.study import run_study as run_ruted_study
    from biasaudit.providers import (
        Capabilities,
        ModelRequest,
        ModelResponse,
        Provider,
        SamplingParams,
        resolve_model,
    )
    from biasaudit.spec import load_spec, parse_spec
    from biasaudit.store.cache import CacheStats, ResponseCache
    from biasaudit.store.runs import Manifest, ResponseRecord, RunDirectory

# Every public name is imported on first use (PEP 562): `import biasaudit.metrics`
# loads no engine and no SDK, and `biasaudit fanout` does not pay for pandas.
_LAZY = {
    "AuditResult": "biasaudit.kinds.allocation.run",
    "audit": "biasaudit.kinds.allocation.run:run",
    "run_audit": "biasaudit.kinds.allocation.run",
    "CacheStats": "biasaudit.store.cache",
    "ResponseCache": "biasaudit.store.cache",
    "Engine": "biasaudit.engine.core",
    "EngineSettings": "biasaudit.engine.core",
    "EngineStats": "biasaudit.engine.core",
    "RequestResult": "biasaudit.engine.core",
    "BiasauditError": "biasaudit.errors",
    "export_runs": "biasaudit.frames",
    "load_experiment": "biasaudit.frames",
    "load_prompts": "biasaudit.frames",
    "load_responses": "biasaudit.frames",
    "load_runs": "biasaudit.frames",
    "load_scores": "biasaudit.frames",
    "FanoutOptions": "biasaudit.engine.fanout",
    "FanoutResult": "biasaudit.engine.fanout",
    "fanout": "biasaudit.engine.fanout",
    "read_prompts": "biasaudit.engine.fanout",
    "run_fanout": "biasaudit.engine.fanout",
    "run_async": "biasaudit.engine.loop",
    "Capabilities": "biasaudit.providers",
    "ModelRequest": "biasaudit.providers",
    "ModelResponse": "biasaudit.providers",
    "Provider": "biasaudit.providers",
    "SamplingParams": "biasaudit.providers",
    "resolve_model": "biasaudit.providers",
    "Manifest": "biasaudit.store.runs",
    "ResponseRecord": "biasaudit.store.runs",
    "RunDirectory": "biasaudit.store.runs",
    "load_spec": "biasaudit.spec",
    "parse_spec": "biasaudit.spec",
    "run_study": "biasaudit.kinds.allocation.study",
    "RutedResult": "biasaudit.kinds.ruted.run",
    "ruted_audit": "biasaudit.kinds.ruted.run:run",
    "run_ruted_audit": "biasaudit.kinds.ruted.run",
    "run_ruted_study": "biasaudit.kinds.ruted.study:run_study",
}


def __getattr__(name: str) -> Any:
    found = _LAZY.get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, _, attribute = found.partition(":")
    return getattr(importlib.import_module(module), attribute or name)


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "AuditResult",
    "BiasauditError",
    "CacheStats",
    "Capabilities",
    "Engine",
    "EngineSettings",
    "EngineStats",
    "FanoutOptions",
    "FanoutResult",
    "Manifest",
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "RequestResult",
    "ResponseCache",
    "ResponseRecord",
    "RunDirectory",
    "RutedResult",
    "SamplingParams",
    "__version__",
    "audit",
    "export_runs",
    "fanout",
    "load_experiment",
    "load_prompts",
    "load_responses",
    "load_runs",
    "load_scores",
    "load_spec",
    "parse_spec",
    "read_prompts",
    "resolve_model",
    "run_async",
    "run_audit",
    "run_fanout",
    "run_ruted_audit",
    "run_ruted_study",
    "run_study",
    "ruted_audit",
]
