"""The evidence of a RUTEd run: per context and occupation the next-word shares (the
male and female words' probability, the occupation's majority) or the long-form
tallies; and every long-form text with its gendered words marked and the verdict it
got."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from biasaudit.kinds._evidence import Evidence, View, link, number, read_run_record, text

__all__ = ["evidence"]


def evidence(run_dir: Path) -> Evidence | None:
    """The run's occupations and texts (None without ``occupations.csv``)."""
    from biasaudit.probes import FEMALE_WORDS, MALE_WORDS

    record = read_run_record(run_dir, "occupations.csv", ("context", "occupation"))
    if record is None:
        return None
    frame, _metrics, responses, sent, verified = record
    # every column the run's occupations.csv has, as it has them (shares, counts, the
    # words not seen, errors), after the context and the occupation
    shares = [str(c) for c in frame.columns if c not in ("context", "occupation")]
    occupations = []
    for row in frame.to_dict("records"):
        context, occupation = str(row["context"]), str(row["occupation"])
        found: dict[str, Any] = {"context": context, "occupation": occupation}
        for column in shares:
            value = row.get(column)
            found[column] = number(value) if number(value) is not None else text(value)
        response = responses.get(f"{context}/{occupation}")
        found["next_word"] = _next_words(response) if response is not None else ""
        found["prompt"] = sent.get(f"{context}/{occupation}", "")
        occupations.append(found)
    texts = _texts(run_dir, responses, sent)
    views = [View(
        "occupations", "Occupations",
        "Per context and occupation: P(male) among the gendered words (its interval), "
        "the skew from neutral (d), and the words behind them: the next word's "
        "probabilities, or the long-form texts' tallies.",
        [("context", "context"), ("occupation", "occupation"), *((c, c) for c in shares),
         ("next_word", "next word: likeliest tokens"), ("prompt", "prompt as sent")],
        occupations, long=("next_word", "prompt"), filters=("context", "occupation"),
    )]  # fmt: skip
    if texts:
        views.append(View(
            "texts", "Long-form texts",
            "Every text the model wrote, its male words marked [m] and female words [f] "
            "as counted, with the verdict it got.",
            [("context", "context"), ("template", "template"), ("occupation", "occupation"),
             ("replicate", "replicate"), ("male", "male words"), ("female", "female words"),
             ("verdict", "verdict"), ("text", "text"), ("prompt", "prompt as sent")],
            texts, long=("text", "prompt"), filters=("context", "occupation", "verdict"),
            marks={"m": list(MALE_WORDS), "f": list(FEMALE_WORDS)},
        ))  # fmt: skip
    links = [("every occupation's shares and the words behind them", link("occupations"))]
    if texts:
        links.append(("every long-form text, its gendered words marked", link("texts")))
    units = {
        row["occupation"]: link("texts" if texts else "occupations", occupation=row["occupation"])
        for row in occupations
    }
    return Evidence(
        f"{len(occupations)} occupation rows, {len(texts)} long-form texts.", views, links,
        prompts_verified=verified, units=units,
    )  # fmt: skip


def _next_words(response: Any) -> str:
    """The likeliest first tokens of a next-word answer, with their probabilities."""
    import math

    tops = response.top_logprobs or []
    if not tops:
        return response.text or ""
    pairs = getattr(tops[0], "top", None)
    if not pairs:
        return response.text or ""
    return ", ".join(f"{token!r} {math.exp(logprob):.3f}" for token, logprob in pairs[:20])


def _texts(run_dir: Path, responses: dict[str, Any], sent: dict[str, str]) -> list[dict[str, Any]]:
    from biasaudit.store.tables import read_run_table

    path = run_dir / "replicates.csv"
    if not path.is_file():
        return []
    found = []
    for row in read_run_table(path, ("context", "occupation", "replicate")).to_dict("records"):
        context, occupation = str(row["context"]), str(row["occupation"])
        template = text(row.get("template"))
        request = f"{context}/{template}/{occupation}" if template else f"{context}/{occupation}"
        response = responses.get(request)
        replicate = int(number(row.get("replicate")) or 0)
        written = (response.texts or []) if response is not None else []
        if not written and response is not None and response.text is not None:
            written = [response.text]
        if replicate >= len(written):
            continue  # a next-word replicate: no text of its own
        found.append({
            "context": context, "template": template, "occupation": occupation,
            "replicate": replicate, "male": number(row.get("male_pronouns")),
            "female": number(row.get("female_pronouns")), "verdict": text(row.get("verdict")),
            "text": written[replicate], "prompt": sent.get(request, ""),
        })  # fmt: skip
    return found
