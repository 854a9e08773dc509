"""The evidence of a listwise run: every pool as shown (each slot's candidate, group
and resume) with the ranking returned and the rank each got, and every answer whole
(the ranking as read, what was duplicated, invented, missing or unread, the prompt
as sent)."""

from __future__ import annotations

from pathlib import Path

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

_FLAGS = ("duplicates", "invented", "missing")


def evidence(run_dir: Path) -> Evidence | None:
    """The run's answers and the candidates shown in them (None without them)."""
    from biasaudit.store.tables import read_run_table

    found = read_run_record(run_dir, "shown.csv", ("answer", "group", "slot"))
    if found is None:
        return None
    shown_table, metrics, responses, sent, verified = found
    reference = str(metrics.get("reference_group", ""))
    names = group_labels(metrics)
    answers = []
    written = (  # an imported run has the candidates as shown only
        read_run_table(run_dir / "answers.csv", ("answer", "pool")).to_dict("records")
        if (run_dir / "answers.csv").is_file()
        else []
    )
    for row in written:
        request = str(row["answer"]).rpartition("/")[0]  # POOL#ORDER/REPLICATE
        flags = [f"{word} {int(number(row.get(word)) or 0)}" for word in _FLAGS
                 if number(row.get(word))]  # fmt: skip
        if str(row.get("unread")) == "True":
            flags.append("unread")
        if text(row.get("error")):
            flags.append(f"error: {text(row.get('error'))}")
        response = responses.get(request)
        answers.append({
            "answer": str(row["answer"]), "pool": str(row["pool"]),
            "subtask": text(row.get("subtask")), "order": text(row.get("order")),
            "ranking": text(row.get("ranking")), "flags": ", ".join(flags),
            "text": text(row.get("text")) or ("" if response is None else answer_text(response)),
            "prompt": sent.get(request, ""),
        })  # fmt: skip
    by_group = group_categories(metrics)  # race and sex of each group, for their rows
    categories = sorted({c for own in by_group.values() for c in own})
    shown = []
    for row in shown_table.to_dict("records"):
        shown.append({
            **by_group.get(str(row["group"]), {}),
            "answer": str(row["answer"]), "pool": text(row.get("pool")),
            "subtask": text(row.get("subtask")), "slot": number(row.get("slot")),
            "group": str(row["group"]), "name": text(row.get("name")),
            "item": text(row.get("item")), "rank": number(row.get("rank")),
        })  # fmt: skip
    views: list[View] = [
        View(
            "shown",
            "Candidates as shown",
            "Each candidate of each pool as the model saw it: the slot it was shown in "
            "and the rank the model's answer gave it (empty: left unranked).",
            [
                ("answer", "answer"),
                ("pool", "pool"),
                ("slot", "slot shown"),
                ("group", "group"),
                *((c, c) for c in categories),
                ("name", "name"),
                ("item", "resume / item"),
                ("rank", "rank given"),
            ],
            shown,
            long=(),
            filters=("group", "subtask", "slot", "rank"),
            labels=names,
        ),
    ]
    if answers:
        views.append(View(
            "answers", "Answers",
            "Every ranking the model returned, whole, with what could not be read.",
            [("answer", "answer"), ("pool", "pool"), ("order", "order"),
             ("ranking", "ranking as read"), ("flags", "duplicated / invented / missing"),
             ("text", "answer text"), ("prompt", "prompt as sent")],
            answers, long=("text", "prompt"), filters=("subtask", "order"), flag="flags",
        ))  # fmt: skip
    flagged = impact_flagged(metrics)
    links = [("every pool as shown, with the rank each candidate got", link("shown")),
             ("each answer's first choice, by the slot it was shown in (the slot shares)",
              link("shown", rank="1", sort="slot"))]  # fmt: skip
    if answers:
        links.append(("every answer whole, with the prompt as sent", link("answers")))
    links += [(f"{group}: its impact ratio is beyond noise; its candidates, the lowest "
               "ranked first", link("shown", group=group, sort="rank", down="1"))
              for group in flagged]  # fmt: skip
    return Evidence(
        f"{len(answers)} answers ranking {len(shown)} candidates shown; reference group "
        f"{reference}.",
        views, links, prompts_verified=verified,
        units={
            **{str(g): link("shown", group=str(g), sort="rank", down="1")
               for g in dict.fromkeys(row["group"] for row in shown)},
            **{f"{c} / {v}": link("shown", sort="rank", down="1", **{c: v})
               for own in by_group.values() for c, v in own.items()},
        },
    )  # fmt: skip


def unit_decisions(run_dir: Path) -> UnitDecisions | None:
    """Each appearance of a candidate in an answer: 1 where it was ranked first (NaN
    where the answer ranked it not at all), clustered by pool."""
    import pandas as pd

    from biasaudit.store.tables import read_run_table

    if not (run_dir / "shown.csv").is_file():
        return None
    shown = read_run_table(run_dir / "shown.csv", ("answer", "pool", "candidate", "rank"))
    rank = pd.to_numeric(shown["rank"], errors="coerce")
    unit = shown["answer"].astype(str) + "|" + shown["candidate"].astype(str)
    frame = pd.DataFrame({"unit": unit, "cluster": shown["pool"].astype(str),
                          "value": (rank == 1).astype(float).where(rank.notna())})  # fmt: skip
    return UnitDecisions("share ranked first", frame, level=False)
