"""The evidence of an allocation run: every candidate (name, group, resume or essay,
score, the answer as read, label probabilities, irregular or refused, the prompt as
sent), the **counterfactual pairs** (each resume's mean score under each group's
names beside the reference group's on the same resume), and for a pairwise run every
comparison in the order it was asked, with the answer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from biasaudit.kinds._evidence import (
    Evidence,
    View,
    answer_text,
    group_categories,
    group_labels,
    impact_flagged,
    link,
    number,
    read_run_record,
    text,
)
from biasaudit.kinds.common import UnitDecisions

__all__ = ["evidence", "unit_decisions"]


def evidence(run_dir: Path) -> Evidence | None:
    """The run's candidates, pairs and comparisons (None without ``scores.csv``)."""
    found = read_run_record(run_dir, "scores.csv", ("candidate_id", "group", "score"))
    if found is None:
        return None
    scores, metrics, answers, sent, verified = found
    reference = str(metrics.get("reference_group", ""))
    names = group_labels(metrics)
    item = next((c for c in ("resume_id", "item") if c in scores.columns), None)
    rows = []
    for row in scores.to_dict("records"):
        candidate = str(row["candidate_id"])
        answer = answers.get(candidate)
        flags = [word for word in ("irregular", "refused") if str(row.get(word)) == "True"]
        rows.append({
            "candidate": candidate, "name": text(row.get("name")), "group": str(row["group"]),
            "subtask": text(row.get("subtask")), "item": text(row.get(item)) if item else "",
            "qualified": text(row.get("qualified")), "score": number(row.get("score")),
            "flags": ", ".join(flags),
            "answer": "" if answer is None else answer_text(answer),
            "probabilities": _probabilities(answer),
            "prompt": sent.get(candidate, ""),
        })  # fmt: skip
    by_group = group_categories(metrics)  # race and sex of each group, for their rows
    categories = sorted({c for own in by_group.values() for c in own})
    for row in rows:
        row.update(by_group.get(str(row["group"]), {}))
    what = "resume" if item == "resume_id" else "item"
    views = [View(
        "candidates", "Candidates",
        f"Every candidate the figures rest on: {len(rows)}; reference group {reference}.",
        [("candidate", "candidate"), ("name", "name"), ("group", "group"),
         *((c, c) for c in categories), ("item", what),
         ("subtask", "subtask"), ("qualified", "qualified"), ("score", "score"),
         ("answer", "answer"), ("probabilities", "label probabilities"),
         ("flags", "irregular / refused"), ("prompt", "prompt as sent")],
        rows, filters=("group", "subtask", "item", "qualified"), labels=names, flag="flags",
    )]  # fmt: skip
    pairs = _pairs(pd.DataFrame(rows), reference) if item else []
    if pairs:
        views.append(View(
            "pairs", "Counterfactual pairs",
            f"Each {what} under each group's names beside the same {what} under the "
            f"reference group's ({reference}): the mean score of the names, and the gap. "
            "Sorted by the gap, the largest shortfalls first.",
            [("item", what), ("group", "group"), ("mean", "mean score"),
             ("reference_mean", "reference's mean"), ("gap", f"gap to {reference}"),
             ("names", "names"), ("reference_names", "reference names")],
            pairs, long=(), filters=("group", "item"), labels=names, sort="gap",
        ))  # fmt: skip
    who = {
        str(row["candidate"]): f"{row['name']} ({row['group']})"
        if row["name"]
        else str(row["group"])
        for row in rows
    }
    comparisons = _comparisons(run_dir, answers, sent, who)
    if comparisons:
        views.append(View(
            "comparisons", "Comparisons (both orders)",
            "Every pair of a pool asked in both orders: who was shown first, who second, "
            "the answer and how it was read.",
            [("pool", "pool"), ("first", "shown first"), ("second", "shown second"),
             ("choice", "chosen"), ("parsed_as", "read as"), ("answer", "answer"),
             ("flags", "refused"), ("prompt", "prompt as sent")],
            comparisons, filters=("pool",), flag="flags",
        ))  # fmt: skip
    flagged = impact_flagged(metrics)
    links = [("every candidate: name, resume, score, the answer and the prompt as sent",
              link("candidates"))]  # fmt: skip
    links += [
        (f"{group}: its impact ratio is beyond noise; the {what}s where its names score "
         "furthest below the reference's", link("pairs", group=group))
        for group in flagged if pairs
    ]  # fmt: skip
    if comparisons:
        links.append(("every comparison, in both orders", link("comparisons")))
    units = {
        str(group): link("pairs", group=str(group)) if pairs and group != reference
        else link("candidates", group=str(group))
        for group in dict.fromkeys(row["group"] for row in rows)
    }  # fmt: skip
    units |= {f"{c} / {v}": link("candidates", **{c: v})
              for own in by_group.values() for c, v in own.items()}  # an impact row  # fmt: skip
    return Evidence(
        f"{len(rows)} candidates; reference group {reference}.", views, links,
        prompts_verified=verified, units=units,
    )  # fmt: skip


def _probabilities(answer: Any) -> str:
    found = None if answer is None else answer.label_probabilities
    if not found:
        return ""
    return ", ".join(f"{label} {value:.3f}" for label, value in found.items())


def _pairs(frame: pd.DataFrame, reference: str) -> list[dict[str, Any]]:
    """Per item (resume) and group: the mean score of its names on that item, the
    reference group's on the same item, and the gap; the counterfactual pair of an
    audit of names, one resume shown under each group's names."""
    if frame.empty or not reference:
        return []
    scored = frame[frame["score"].notna()]
    means = scored.groupby(["item", "group"], sort=False)["score"].agg(["mean", "count"])
    pairs = []
    for (item, group), found in means.iterrows():
        if group == reference or (item, reference) not in means.index:
            continue
        base = means.loc[(item, reference)]
        pairs.append({
            "item": item, "group": group, "mean": float(found["mean"]),
            "reference_mean": float(base["mean"]), "gap": float(found["mean"] - base["mean"]),
            "names": int(found["count"]), "reference_names": int(base["count"]),
        })  # fmt: skip
    return pairs


def _comparisons(
    run_dir: Path, answers: dict[str, Any], sent: dict[str, str], who: dict[str, str]
) -> list[dict[str, Any]]:
    """A pairwise run's comparisons, each with its answer and prompt (request id
    ``POOL:I>J``: the pool's I-th candidate shown first, its J-th second)."""
    from biasaudit.store.tables import read_run_table

    path = run_dir / "comparisons.csv"
    if not path.is_file():
        return []
    found = []
    for row in read_run_table(path, ("pool", "first", "second")).to_dict("records"):
        pool, first, second = str(row["pool"]), str(row["first"]), str(row["second"])
        request = f"{pool}:{first.rpartition('/')[2]}>{second.rpartition('/')[2]}"
        answer = answers.get(request)
        found.append({
            "pool": pool, "first": f"{first}: {who.get(first, '')}",
            "second": f"{second}: {who.get(second, '')}", "choice": text(row.get("choice")),
            "parsed_as": text(row.get("parsed_as")),
            "answer": "" if answer is None else answer_text(answer),
            "flags": "refused" if str(row.get("refused")) == "True" else "",
            "prompt": sent.get(request, ""),
        })  # fmt: skip
    return found


def unit_decisions(run_dir: Path) -> UnitDecisions | None:
    """Each candidate's score (NaN where its answers were irregular, refused or failed),
    clustered by its item (resume, essay), with its qualification as the truth; a
    pairwise score (the share of its comparisons won) has a mean fixed at one half."""
    from biasaudit.store.tables import read_run_table

    if not (run_dir / "scores.csv").is_file():
        return None
    scores = read_run_table(run_dir / "scores.csv", ("candidate_id", "score"))
    items = [c for c in scores.columns if c.endswith("_id") and c != "candidate_id"]
    cluster = scores[items[0]] if items else scores["candidate_id"]
    unusable = pd.Series(False, index=scores.index)
    for column in ("irregular", "refused"):
        if column in scores.columns:
            unusable |= scores[column].astype(str) == "True"
    if "error" in scores.columns:
        unusable |= scores["error"].notna() & (scores["error"].astype(str) != "")
    value = pd.to_numeric(scores["score"], errors="coerce").where(~unusable)
    frame = pd.DataFrame({"unit": scores["candidate_id"].astype(str),
                          "cluster": cluster.astype(str), "value": value})  # fmt: skip
    truth = ""
    if "qualified" in scores.columns and scores["qualified"].notna().any():
        frame["truth"] = scores["qualified"].astype(str) == "True"
        truth = "qualified"
    pairwise = "path" in scores.columns and bool((scores["path"] == "pairwise").all())
    label = "mean share of comparisons won" if pairwise else "mean score"
    return UnitDecisions(label, frame, truth, level=not pairwise)
