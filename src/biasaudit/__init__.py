"""biasaudit: audit large language models for bias in the decisions built on them.

The public surface is re-exported here, each name imported on first use;
everything in a module whose name starts with an underscore is private.
"""

from __future__ import annotations

__version__ = "0.1.0"

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from biasaudit.audit import AuditResult, audit, run_audit
    from biasaudit.cache import CacheStats, ResponseCache
    from biasaudit.engine import Engine, EngineSettings, EngineStats, RequestResult
    from biasaudit.errors import BiasauditError
    from biasaudit.fanout import FanoutOptions, FanoutResult, fanout, read_prompts, run_fanout
    from biasaudit.loop import run_async
    from biasaudit.providers import (
        Capabilities,
        ModelRequest,
        ModelResponse,
        Provider,
        SamplingParams,
        resolve_model,
    )
    from biasaudit.runs import Manifest, ResponseRecord, RunDirectory
    from biasaudit.ruted import RutedResult, run_ruted_audit, ruted_audit
    from biasaudit.ruted_study import run_ruted_study
    from biasaudit.spec import load_spec, parse_spec
    from biasaudit.study import run_study

# Every public name is imported on first use (PEP 562): `import biasaudit.metrics`
# loads no engine and no SDK, and `biasaudit fanout` does not pay for pandas.
_LAZY = {
    "AuditResult": "biasaudit.audit",
    "audit": "biasaudit.audit",
    "run_audit": "biasaudit.audit",
    "CacheStats": "biasaudit.cache",
    "ResponseCache": "biasaudit.cache",
    "Engine": "biasaudit.engine",
    "EngineSettings": "biasaudit.engine",
    "EngineStats": "biasaudit.engine",
    "RequestResult": "biasaudit.engine",
    "BiasauditError": "biasaudit.errors",
    "FanoutOptions": "biasaudit.fanout",
    "FanoutResult": "biasaudit.fanout",
    "fanout": "biasaudit.fanout",
    "read_prompts": "biasaudit.fanout",
    "run_fanout": "biasaudit.fanout",
    "run_async": "biasaudit.loop",
    "Capabilities": "biasaudit.providers",
    "ModelRequest": "biasaudit.providers",
    "ModelResponse": "biasaudit.providers",
    "Provider": "biasaudit.providers",
    "SamplingParams": "biasaudit.providers",
    "resolve_model": "biasaudit.providers",
    "Manifest": "biasaudit.runs",
    "ResponseRecord": "biasaudit.runs",
    "RunDirectory": "biasaudit.runs",
    "load_spec": "biasaudit.spec",
    "parse_spec": "biasaudit.spec",
    "run_study": "biasaudit.study",
    "RutedResult": "biasaudit.ruted",
    "ruted_audit": "biasaudit.ruted",
    "run_ruted_audit": "biasaudit.ruted",
    "run_ruted_study": "biasaudit.ruted_study",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


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
    "fanout",
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
