"""The evidence of a decisions run: each person of each scenario (age, gender, race,
name) with P(yes) in both answer orders, the answers and the prompt as sent; each
scenario's fitted effects; and for each discrimination score beyond noise, the
persons it compares and the scenarios that drive it (sorted by their own effect)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from biasaudit.kinds._evidence import (
    Evidence,
    View,
    answer_text,
    link,
    number,
    read_run_record,
    text,
)
from biasaudit.kinds.common import UnitDecisions

__all__ = ["evidence", "unit_decisions"]

_ORDERS = ("yes-first", "no-first")


def evidence(run_dir: Path) -> Evidence | None:
    """The run's persons and scenarios (None without ``answers.csv``)."""
    found = read_run_record(run_dir, "answers.csv", ("key", "scenario", "fill"))
    if found is None:
        return None
    answers, metrics, responses, sent, verified = found
    persons: dict[str, dict[str, Any]] = {}
    for row in answers.to_dict("records"):
        key = str(row["key"])
        order = text(row.get("order"))
        request = f"{key}#{order}" if order else key
        person = persons.setdefault(key, {
            "person": key, "scenario": str(row["scenario"]), "fill": str(row["fill"]),
            "age": number(row.get("age")), "gender": text(row.get("gender")),
            "race": text(row.get("race")), "name": text(row.get("name")),
            "p_yes": None, "flags": "", "answers": "", "prompt": "",
            **{f"p_{o}": None for o in _ORDERS},
        })  # fmt: skip
        if order in _ORDERS:
            person[f"p_{order}"] = number(row.get("p_yes"))
        response = responses.get(request)
        said = text(row.get("answer")) or ("" if response is None else answer_text(response))
        person["answers"] += f"{order or 'answer'}: {said}\n"
        if number(row.get("irregular")) or text(row.get("error")):
            person["flags"] = "irregular" if not text(row.get("error")) else "failed"
        if not person["prompt"] or order == "yes-first":
            person["prompt"] = sent.get(request, person["prompt"])
    for person in persons.values():
        known = [person[f"p_{o}"] for o in _ORDERS if person[f"p_{o}"] is not None]
        person["p_yes"] = sum(known) / len(known) if known else None
        gap = (person["p_yes-first"], person["p_no-first"])
        person["order_gap"] = None if None in gap else gap[0] - gap[1]
        person["answers"] = person["answers"].strip()
    views = [View(
        "persons", "Persons",
        "Each person of each scenario, P(yes) in each answer order and their mean, with "
        "the answers and the prompt as sent.",
        [("scenario", "scenario"), ("fill", "fill"), ("age", "age"), ("gender", "gender"),
         ("race", "race"), ("name", "name"), ("p_yes", "P(yes)"),
         ("p_yes-first", "P(yes), yes first"), ("p_no-first", "P(yes), no first"),
         ("order_gap", "order gap"), ("flags", "irregular"), ("answers", "answers"),
         ("prompt", "prompt as sent")],
        list(persons.values()), long=("answers", "prompt"),
        filters=("fill", "scenario", "race", "gender"), flag="flags",
    )]  # fmt: skip
    scenarios = _scenarios(run_dir)
    if scenarios:
        effects = [c for c in scenarios[0] if c not in ("fill", "scenario", "rows")]
        views.append(View(
            "scenarios", "Scenarios",
            "Each scenario's own fitted effects (log-odds of yes against the baseline "
            "person; age per its unit), the figures the discrimination scores pool.",
            [("scenario", "scenario"), ("fill", "fill"), ("rows", "persons"),
             *[(c, c) for c in effects]],
            scenarios, long=(), filters=("fill",),
        ))  # fmt: skip
    links = [("every person: P(yes) in both orders, the answers and the prompt as sent",
              link("persons"))]  # fmt: skip
    for fill, figures in dict(metrics.get("fills") or {}).items():
        for score in figures.get("scores", []):
            if not score.get("beyond_noise"):
                continue
            attribute, level = str(score["attribute"]), str(score["level"])
            column = "age" if attribute == "age" else level
            persons_link = (link("persons", fill=fill) if attribute == "age"
                            else link("persons", fill=fill, **{attribute: level}))  # fmt: skip
            links.append((f"{fill} {attribute} {level}: beyond noise; the scenarios that drive "
                          "it, the largest effect against first",
                          link("scenarios", fill=fill, sort=column)))  # fmt: skip
            links.append((f"{fill} {attribute} {level}: its persons", persons_link))
    units: dict[str, str] = {}
    for person in persons.values():
        fill = person["fill"]
        units[f"{fill} / {person['scenario']}"] = link("persons", fill=fill,
                                                        scenario=person["scenario"])  # fmt: skip
        for attribute in ("race", "gender"):
            if person[attribute]:
                level = person[attribute]
                units[f"{fill} / {attribute}: {level}"] = link("persons", fill=fill,
                                                               **{attribute: level})  # fmt: skip
    return Evidence(
        f"{len(persons)} persons in {len({p['scenario'] for p in persons.values()})} "
        "scenarios.", views, links, prompts_verified=verified, units=units,
    )  # fmt: skip


def _scenarios(run_dir: Path) -> list[dict[str, Any]]:
    from biasaudit.store.tables import read_run_table

    path = run_dir / "scenarios.csv"
    if not path.is_file():
        return []
    frame = read_run_table(path, ("fill", "scenario"))
    rows = []
    for row in frame.to_dict("records"):
        rows.append({str(c): (number(v) if c not in ("fill", "scenario") else text(v))
                     for c, v in row.items()})  # fmt: skip
    return rows


def unit_decisions(run_dir: Path) -> UnitDecisions | None:
    """Each person's P(yes), its orders averaged (NaN without a usable answer in every
    order), clustered by scenario."""
    import pandas as pd

    from biasaudit.store.tables import read_run_table

    if not (run_dir / "persons.csv").is_file():
        return None
    persons = read_run_table(run_dir / "persons.csv", ("key", "scenario", "p_yes"))
    frame = pd.DataFrame({"unit": persons["key"].astype(str),
                          "cluster": persons["scenario"].astype(str),
                          "value": pd.to_numeric(persons["p_yes"], errors="coerce")})  # fmt: skip
    return UnitDecisions("mean P(yes)", frame)
