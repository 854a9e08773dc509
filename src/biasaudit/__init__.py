"""biasaudit: audit large language models for bias in the decisions built on them.

The public surface is re-exported here; everything in a module whose name starts
with an underscore is private.
"""

from __future__ import annotations

__version__ = "0.1.0"

import importlib
from typing import TYPE_CHECKING, Any

from .cache import CacheStats, ResponseCache
from .engine import Engine, EngineSettings, EngineStats, RequestResult
from .errors import BiasauditError
from .fanout import FanoutOptions, FanoutResult, fanout, read_prompts, run_fanout
from .loop import run_async
from .providers import (
    Capabilities,
    ModelRequest,
    ModelResponse,
    Provider,
    SamplingParams,
    resolve_model,
)
from .runs import Manifest, ResponseRecord, RunDirectory

if TYPE_CHECKING:
    from .audit import AuditResult, audit, run_audit
    from .ruted import RutedResult, run_ruted_audit, ruted_audit
    from .ruted_study import run_ruted_study
    from .spec import load_spec, parse_spec
    from .study import run_study

# The audits pull in pandas and scipy (about a second): imported on first use,
# so that `biasaudit fanout` and `import biasaudit` start fast.
_LAZY = {
    "AuditResult": ".audit",
    "audit": ".audit",
    "run_audit": ".audit",
    "load_spec": ".spec",
    "parse_spec": ".spec",
    "run_study": ".study",
    "RutedResult": ".ruted",
    "ruted_audit": ".ruted",
    "run_ruted_audit": ".ruted",
    "run_ruted_study": ".ruted_study",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module, __name__), name)


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
