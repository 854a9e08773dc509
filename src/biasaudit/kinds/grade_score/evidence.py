"""The evidence of a Grade Score run: each item in every order shown (the options'
order), the slot and option the judge chose, its judgement as given, how it was read
and the prompt as sent; and each item's choices by slot and by option, the least
consistent items first."""

from __future__ import annotations

from pathlib import Path

from biasaudit.kinds._evidence import (
    Evidence,
    View,
    answer_text,
    link,
    number,
    read_run_record,
    text,
)

__all__ = ["evidence"]


def evidence(run_dir: Path) -> Evidence | None:
    """The run's trials and items (None without ``trials.csv``)."""
    from biasaudit.store.tables import read_run_table

    found = read_run_record(run_dir, "trials.csv", ("item_id", "order"))
    if found is None:
        return None
    table, _metrics, responses, sent, verified = found
    trials = []
    for row in table.to_dict("records"):
        item, order = str(row["item_id"]), text(row.get("order"))
        request = f"{item}#{order}"
        response = responses.get(request)
        flags = [word for word in ("refused",) if str(row.get(word)) == "True"]
        if text(row.get("error")):
            flags.append(f"failed: {text(row.get('error'))}")
        elif not text(row.get("parsed_as")) or text(row.get("option")) == "":
            flags.append("unread")
        trials.append({
            "item": item, "order": order, "replicate": text(row.get("replicate")),
            "shown": text(row.get("shown")), "slot": number(row.get("slot")),
            "option": number(row.get("option")), "parsed_as": text(row.get("parsed_as")),
            "flags": ", ".join(flags),
            "answer": text(row.get("answer")) or ("" if response is None
                                                  else answer_text(response)),
            "prompt": sent.get(request, ""),
        })  # fmt: skip
    views = [View(
        "trials", "Trials",
        "Each item in each order it was shown: the options' order (option numbers, "
        "first slot first), the slot and option the judge chose, its judgement as "
        "given and how it was read.",
        [("item", "item"), ("order", "order"), ("replicate", "replicate"),
         ("shown", "options in slot order"), ("slot", "slot chosen"),
         ("option", "option chosen"), ("parsed_as", "read as"), ("flags", "unread / refused"),
         ("answer", "judgement"), ("prompt", "prompt as sent")],
        trials, long=("answer", "prompt"), filters=("item", "order", "slot"), flag="flags",
    )]  # fmt: skip
    if (run_dir / "items.csv").is_file():
        frame = read_run_table(run_dir / "items.csv", ("item_id",))
        columns = [str(c) for c in frame.columns]
        items = [{c: (text(v) if c == "item_id" else number(v) if number(v) is not None
                      else text(v)) for c, v in row.items()}
                 for row in frame.to_dict("records")]  # fmt: skip
        views.append(View(
            "items", "Items",
            "Each item's choices by slot (pos_) and by option (option_), the option "
            "preferred and the agreement of its orders; the least consistent first.",
            [(c, c) for c in columns], items, long=(), filters=(), sort="agreement",
        ))  # fmt: skip
    links = [("every trial: the order shown, the choice and the judgement as given",
              link("trials")),
             ("the items whose choice moved most with the order", link("items",
                                                                    sort="agreement"))]  # fmt: skip
    units = {str(i): link("trials", item=str(i)) for i in dict.fromkeys(t["item"] for t in trials)}
    # the table of slots (1, 2, ...): each slot's share links to the trials that chose it
    slots = sorted({int(t["slot"]) for t in trials if t["slot"] is not None})
    units |= {str(slot): link("trials", slot=str(slot)) for slot in slots}
    return Evidence(f"{len(trials)} trials.", views, links, prompts_verified=verified,
                    units=units)  # fmt: skip
