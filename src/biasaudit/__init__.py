"""biasaudit: audit large language models for bias in the decisions built on them.

The public surface is re-exported here; everything in a module whose name starts
with an underscore is private.
"""

from __future__ import annotations

__version__ = "0.1.0"

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

__all__ = [
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
    "SamplingParams",
    "__version__",
    "fanout",
    "read_prompts",
    "resolve_model",
    "run_async",
    "run_fanout",
]
