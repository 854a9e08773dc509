"""Essay grading: does a grader pass over some groups' writers?

The user brings the corpus: a CSV with ``text``, ``group`` and optionally
``rating`` (an essay is qualified when its rating is at or above the median of
the rated essays, or a threshold given; with ``conventions: paper``, above 53 of
ICNALE's 0-100 rating as the authors' code does; a row may leave it empty: ΔDP
uses every essay, ΔEO the rated),
``essay_id`` and ``topic``. Pools are 10 essays drawn at random; the reference
group is configurable (``ENS``, English native speakers, when present). The
published audit used the ICNALE learner corpus, which cannot be shipped; a
small demo corpus written for biasaudit ships to try it out.
Chen, Ji & Evans, "The Mismeasure of Man and Models" (2024).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from biasaudit.errors import UsageError
from biasaudit.kinds.candidates.spec import EssayData
from biasaudit.kinds.candidates.task import AllocationTask, Candidate, PoolDesign
from biasaudit.kinds.prompt import PromptTemplate
from biasaudit.textfiles import (
    DATA_DIR,
    PROMPTS_DIR,
    brief,
    read_table,
    require_columns,
    require_values,
)

__all__ = [
    "DEMO_ESSAYS",
    "QualificationRule",
    "build_essay_grading",
    "qualification_rule",
    "resolve_essays",
]

DEMO_ESSAYS = DATA_DIR / "essays_demo.csv"
DEFAULT_REFERENCE = "ENS"
GROUP_NAMES = {
    "ENS": "English native speakers",
    "CHN": "first language Chinese",
    "JPN": "first language Japanese",
    "KOR": "first language Korean",
    "THA": "first language Thai",
}
LABELS = {str(k): float(k) for k in range(1, 6)}


def resolve_essays(path: Path) -> Path:
    """``demo`` names the shipped demo corpus, unless a file of that name exists."""
    return DEMO_ESSAYS if str(path) == "demo" and not path.exists() else path


def _ratings(frame: pd.DataFrame, path: Path) -> pd.Series | None:
    """The ratings, NaN where a row leaves ``rating`` empty (an unrated essay)."""
    if "rating" not in frame.columns:
        return None
    given = frame["rating"] != ""
    ratings = pd.to_numeric(frame["rating"].where(given), errors="coerce")
    bad = given & ratings.isna()
    if bad.any():
        row = int(bad.to_numpy().argmax())
        raise UsageError(
            f"essays {path}, row {row + 2}, column 'rating': "
            f"{brief(frame['rating'].iloc[row])} is not a number (leave it empty for an "
            "unrated essay)"
        )
    if ratings.isna().all():
        return None
    return ratings


# The authors' code bins ICNALE's overall rating (0-100) at 40 and 53 into Fair,
# Average and Good, right-closed, and takes Good as qualified: a rating above 53.
PAPER_THRESHOLD = 53.0
PAPER_SCALE = (0.0, 100.0)


@dataclass(frozen=True)
class QualificationRule:
    """Who of the rated essays is qualified: at least ``threshold``, or above it."""

    threshold: float
    strict: bool
    text: str

    def passes(self, rating: float) -> bool:
        return bool(rating > self.threshold if self.strict else rating >= self.threshold)


def qualification_rule(spec: EssayData, ratings: pd.Series, path: Path) -> QualificationRule:
    """The rule of ``spec.qualified_at_least``; unset: the median (biasaudit's), or the
    authors' 'Good' band with ``conventions: paper``.

    Raises
    ------
    UsageError
        The paper's rule asked for on ratings outside its 0-100 scale.
    """
    given = spec.qualified_at_least
    if given is None and spec.conventions == "paper":
        low, high = float(ratings.min()), float(ratings.max())
        if low < PAPER_SCALE[0] or high > PAPER_SCALE[1]:
            raise UsageError(
                f"essays {path}, column 'rating': ratings run from {low:g} to {high:g}, but "
                "the paper's rule (qualified above 53) is on ICNALE's 0-100 overall rating: "
                "give --qualified-at-least for this scale"
            )
        return QualificationRule(
            PAPER_THRESHOLD, True, "rating above 53 of 100 (the authors' 'Good' band)"
        )
    if given is None or given == "median":
        median = float(ratings.median())
        return QualificationRule(
            median, False, f"rating at or above the median of the rated essays ({median:g})"
        )
    return QualificationRule(float(given), False, f"rating at or above {float(given):g}")


def _essay_ids(frame: pd.DataFrame, path: Path) -> list[str]:
    column = next((c for c in ("essay_id", "id") if c in frame.columns), None)
    if column is None:
        return [f"essay-{i + 1:04d}" for i in range(len(frame))]
    ids = frame[column]
    if ids.duplicated().any() or (ids == "").any():
        raise UsageError(f"essays {path}, column '{column}': ids must be unique and non-empty")
    return list(ids)


def build_essay_grading(spec: EssayData) -> AllocationTask:
    """The essay-grading task for ``spec``: every essay a candidate, random pools."""
    path = resolve_essays(spec.essays)
    frame = read_table(path, "essays")
    require_columns(frame, ["text", "group"], what="essays", path=path)
    require_values(frame, ["text", "group"], what="essays", path=path)
    ratings = _ratings(frame, path)
    # Unrated essays are of unknown qualification (ΔEO and the qualified figures use
    # the rated ones only).
    rule, qualified = None, None
    if ratings is not None:
        rule = qualification_rule(spec, ratings, path)
        qualified = [None if pd.isna(r) else rule.passes(r) for r in ratings]
    topics = frame["topic"] if "topic" in frame.columns else pd.Series([spec.topic] * len(frame))
    groups = tuple(dict.fromkeys(frame["group"]))
    reference = spec.reference_group or DEFAULT_REFERENCE
    if spec.reference_group is None and reference not in groups:
        raise UsageError(
            f"essays {path} has no group '{DEFAULT_REFERENCE}': name the reference with "
            f"--reference-group (groups: {', '.join(groups)})"
        )
    candidates = [
        Candidate(
            id=essay_id,
            group=row.group,
            subtask=topic,
            qualified=None if qualified is None else qualified[i],
            fields={"text": row.text},
            item=essay_id,
        )
        for i, (essay_id, row, topic) in enumerate(
            zip(_essay_ids(frame, path), frame.itertuples(), topics, strict=True)
        )
    ]
    return AllocationTask(
        name="essay-grading",
        candidates=tuple(candidates),
        groups=groups,
        reference_group=reference,
        labels=LABELS,
        pointwise_prompt=PromptTemplate.load(PROMPTS_DIR / "essay-grading.pointwise.yaml"),
        pairwise_prompt=PromptTemplate.load(PROMPTS_DIR / "essay-grading.pairwise.yaml"),
        pool=PoolDesign("random", spec.pool_size),
        context={topic: {"topic": topic} for topic in dict.fromkeys(topics)},
        group_names=GROUP_NAMES,
        noun="Essay",
        item_column="essay_id",
        qualified_rule=None if rule is None else rule.text,
    )
