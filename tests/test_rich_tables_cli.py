"""Every table the command line prints: rich on a terminal, the plain lines elsewhere.

``stdout_is_terminal`` is patched to say yes, as in a shell; ``COLUMNS`` sets the
width rich draws to (200 unless a test says otherwise). Off a terminal each
command must print exactly the lines of its plain-text function, which scripts
and the other CLI tests read.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from rich.console import Console

import biasaudit.reports.rich_tables
from biasaudit.kinds.allocation.study import run_study
from biasaudit.kinds.allocation.table import study_blocks
from biasaudit.kinds.grade_score.study import run_study as run_grade_study
from biasaudit.kinds.grade_score.table import study_blocks as grade_study_blocks
from biasaudit.kinds.registry import TASKS
from biasaudit.kinds.ruted.study import run_study as run_ruted_study
from biasaudit.kinds.ruted.table import study_blocks as ruted_study_blocks
from biasaudit.providers import KNOWN_PROVIDERS
from biasaudit.render.text import Block, PlainTable, block_lines
from biasaudit.reports.history import HISTORY_COLUMNS, HistoryEntry, history_table, list_history
from biasaudit.reports.rich_tables import history_view, tasks_listing
from tests.test_progress_rich import ANSI
from tests.test_report_html import invoke, run_dir_of

pytestmark = pytest.mark.usefixtures("terminal_environment")
COLOUR = re.compile(r"\x1b\[[0-9;]*(3[0-9]|4[0-9]|9[0-7]|10[0-7])[;m]")
NUMBER = re.compile(r"[-+]?\d+\.\d+(?:e[-+]\d+)?")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    """Two models' runs of each kind, sharing one runs folder and its cache."""
    root = tmp_path_factory.mktemp("rich-cli")
    options = {
        "allocation": ["resume-screening", "--names-per-group", "2", "--jobs", "software-engineer"],
        "grade-score": ["grade-score", "--items", "demo"],
        "ruted": ["ruted", "--replicates", "3", "--contexts", "standard,bedtime,esl"],
    }
    found: dict[str, list[Path]] = {}
    for kind, args in options.items():
        for model in ("sim/biased", "sim/fair"):
            code, out, err = invoke("run", *args, "--model", model, "--runs-dir", str(root),
                                    "--no-report")  # fmt: skip
            assert code == 0, err
            found.setdefault(kind, []).append(run_dir_of(out))
    return found


def root_of(runs: dict[str, list[Path]]) -> Path:
    return runs["allocation"][0].parent


def on_terminal(monkeypatch: pytest.MonkeyPatch, *args: str, width: int = 200) -> str:
    """What the command prints on a terminal ``width`` columns wide, styles stripped."""
    monkeypatch.setattr(biasaudit.reports.rich_tables, "stdout_is_terminal", lambda: True)
    monkeypatch.setenv("COLUMNS", str(width))
    code, out, err = invoke(*args)
    assert code == 0, err
    return ANSI.sub("", out)


def off_terminal(*args: str) -> str:
    code, out, err = invoke(*args)
    assert code == 0, err
    return out


def row_pattern(cells: Sequence[str]) -> re.Pattern[str]:
    """A line holding these cells in this order, with only spaces between them."""
    shown = [re.escape(cell) for cell in cells if cell]
    return re.compile(r"^\s*" + r"\s+".join(shown) + r"\s*$", re.MULTILINE)


def rules(text: str) -> int:
    """How many of rich's rules are drawn across a table."""
    return len(re.findall(r"^─+$", text, re.MULTILINE))


def assert_rows(text: str, rows: Sequence[Sequence[str]]) -> None:
    missing = [row for row in rows if not row_pattern(row).search(text)]
    assert not missing, missing


def assert_no_loss_at(text: str, plain: str, width: int) -> None:
    """Nothing cut short: no ellipsis, no line too long, every number of the plain output."""
    assert "…" not in text
    assert max(map(len, text.splitlines())) <= width
    missing = [n for n in dict.fromkeys(NUMBER.findall(plain)) if n not in text]
    assert not missing, missing


STUDIES = {
    "allocation": lambda dirs: study_blocks(run_study(dirs, ndcg_at=2)),
    "grade-score": lambda dirs: grade_study_blocks(run_grade_study(dirs)),
    "ruted": lambda dirs: ruted_study_blocks(run_ruted_study(dirs)),
}


def study_args(runs: dict[str, list[Path]], kind: str) -> list[str]:
    return ["study", *map(str, runs[kind]), "--no-report", "--ndcg-at", "2"]


@pytest.mark.parametrize("kind", list(STUDIES))
def test_study_off_a_terminal_prints_the_plain_lines(
    runs: dict[str, list[Path]], kind: str
) -> None:
    blocks = STUDIES[kind](runs[kind])
    assert off_terminal(*study_args(runs, kind)) == "\n".join(block_lines(blocks)) + "\n"


@pytest.mark.parametrize("kind", list(STUDIES))
def test_study_on_a_terminal_draws_every_table_whole(
    runs: dict[str, list[Path]], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocks: list[Block] = STUDIES[kind](runs[kind])
    text = on_terminal(monkeypatch, *study_args(runs, kind))
    tables = [block for block in blocks if isinstance(block, PlainTable)]
    assert rules(text) == len(tables)  # one under each header
    lines = text.splitlines()
    missing = [b for b in blocks if isinstance(b, str) and b and b not in lines]
    assert not missing, missing
    for table in tables:
        assert table.title in lines
        assert_rows(text, [table.header, *table.rows])  # headers, values with their intervals
        assert all(note in lines for note in table.notes)
    if kind == "grade-score":
        assert re.search(r"^sim/biased\s+0\.\d{3} ±0\.\d{3}\s", text, re.MULTILINE)
    if kind == "allocation":
        assert re.search(r"^RABBI\s+ΔDP\s+[-+]\d\.\d\d \([^)]+\)\s.*n=\d+$", text, re.MULTILINE)


@pytest.mark.parametrize("kind", list(STUDIES))
def test_study_at_80_columns_folds_and_keeps_every_column(
    runs: dict[str, list[Path]], kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = off_terminal(*study_args(runs, kind))
    text = on_terminal(monkeypatch, *study_args(runs, kind), width=80)
    assert_no_loss_at(text, plain, 80)
    for table in (b for b in STUDIES[kind](runs[kind]) if isinstance(b, PlainTable)):
        words = {word for cell in table.header for word in re.split(r"[\s~]+", cell) if word}
        assert all(word in text for word in words), words


def test_history_off_a_terminal_prints_the_plain_lines(runs: dict[str, list[Path]]) -> None:
    root = root_of(runs)
    out = off_terminal("history", "--runs-dir", str(root))
    entries = list_history(root)
    assert len(entries) == 6
    assert out == "\n".join(history_table(entries)) + "\n"
    lines = out.splitlines()
    assert lines[0].startswith("started (UTC)     kind")
    # Every column starts where its header does (a headline of any length included).
    starts = [
        lines[0].index(name) for name in ("kind", "status", "model version", "headline", "run")
    ]
    for line in lines[1:]:
        assert all(line[at - 2 : at] == "  " and line[at] != " " for at in starts), line


def test_history_on_a_terminal_shows_each_run_on_a_row(
    runs: dict[str, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = root_of(runs)
    text = on_terminal(monkeypatch, "history", "--runs-dir", str(root), width=250)
    assert_rows(text, [HISTORY_COLUMNS])
    for entry in list_history(root):
        version = ", ".join(entry.versions)
        assert_rows(text, [[f"{entry.started_at:%Y-%m-%d %H:%M}", entry.kind, entry.status,
                            version, entry.headline, entry.run_dir.name]])  # fmt: skip
    plain = off_terminal("history", "--runs-dir", str(root))
    narrow = on_terminal(monkeypatch, "history", "--runs-dir", str(root), width=80)
    assert_no_loss_at(narrow, plain, 80)


def test_history_view_keeps_square_brackets_that_look_like_markup() -> None:
    """A fingerprint in brackets is text, not a rich style tag (rich would drop ``[fp_1]``)."""
    entry = HistoryEntry(
        run_dir=Path("runs/20260101T000000Z-allocation-x"),
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        kind="allocation",
        status="completed",
        model="openai/gpt-4o-mini",
        versions=("gpt-4o-mini-2024-07-18",),
        fingerprints=("fp_1",),
        spec_id=None,
        replay_of="runs/earlier",
        headline="lowest RABBI B_M -0.100 (p 0.2)",
    )
    console = Console(width=250, force_terminal=True, color_system=None, file=None)
    with console.capture() as captured:
        console.print(history_view([entry]))
    assert "gpt-4o-mini-2024-07-18 [fp_1]" in captured.get()
    assert "(p 0.2) (replay)" in captured.get()
    plain = history_table([entry])[1]
    assert plain.endswith("gpt-4o-mini-2024-07-18 [fp_1]  lowest RABBI B_M -0.100 (p 0.2) (replay)  "
                          "20260101T000000Z-allocation-x")  # fmt: skip


def test_tasks_off_a_terminal_prints_the_plain_listing() -> None:
    assert off_terminal("tasks") == "\n".join(tasks_listing(TASKS.values())) + "\n"


def test_tasks_on_a_terminal_aligns_every_field(monkeypatch: pytest.MonkeyPatch) -> None:
    text = on_terminal(monkeypatch, "tasks", width=250)
    lines = text.splitlines()
    for info in TASKS.values():
        assert f"{info.name}: {info.summary}" in lines
        fields = [*info.data, ("groups", info.groups), ("pools", info.pools), ("run", info.usage)]
        assert_rows(text, [[f"{label}:", value] for label, value in fields])
    starts = {len(m.group(1)) for m in re.finditer(r"^(  [a-z]+:\s+)\S", text, re.MULTILINE)}
    assert len(starts) == 1  # one column of values across every task
    assert_no_loss_at(on_terminal(monkeypatch, "tasks", width=80), off_terminal("tasks"), 80)


def fixed_width_cells(line: str, *slices: tuple[int, int | None]) -> list[str]:
    """The cells of a plain line whose columns start and end at fixed offsets."""
    return [line[start:end].strip() for start, end in slices]


def test_providers_on_a_terminal_lists_every_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = off_terminal("providers").splitlines()
    header = plain[0]
    starts = [header.index(name) for name in ("base URL", "key variable", "logprobs", "note")]
    assert header.split() == ["provider", "base", "URL", "key", "variable", "logprobs", "note"]
    width = max(len("https://generativelanguage.googleapis.com/v1beta/openai"), len("base URL"))
    assert starts[1] - starts[0] == width + 1  # each column as wide as its widest cell
    cells = [plain[1][a:b].strip() for a, b in zip([0, *starts], [*starts, None], strict=True)]
    assert cells == ["openai", "https://api.openai.com/v1", "OPENAI_API_KEY", "yes (20)",
                     "reasoning models (o-series, gpt-5): no logprobs, temperature 1 only"]  # fmt: skip
    # The built-in names first (an installed plugin would follow them).
    assert [line.split()[0] for line in plain[1 : 1 + len(KNOWN_PROVIDERS)]] == list(
        KNOWN_PROVIDERS
    )
    text = on_terminal(monkeypatch, "providers", width=250)
    bounds = [0, *starts]
    columns = [(bounds[i], bounds[i + 1] - 1) for i in range(4)] + [(starts[3], None)]
    assert_rows(text, [fixed_width_cells(line, *columns) for line in plain[:-1]])
    assert text.splitlines()[-1] == plain[-1]  # "any other name with --base-url: ..."
    assert_no_loss_at(on_terminal(monkeypatch, "providers", width=80), "\n".join(plain), 80)


def test_cache_stats_on_a_terminal_shows_models_and_the_total(
    runs: dict[str, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    args = ("cache", "stats", "--runs-dir", str(root_of(runs)))
    plain = off_terminal(*args).splitlines()
    assert plain[1] == f"{'model':<44} {'entries':>9} {'stored':>10} {'hits':>9}  newest"
    assert [line.split()[0] for line in plain[2:]] == ["sim/biased", "sim/fair", "total"]
    assert re.fullmatch(r"total {39}\s+\d+\s+[\d.]+ KB\s+\d+", plain[-1])  # no date
    text = on_terminal(monkeypatch, *args)
    assert text.splitlines()[0] == plain[0]  # "cache: PATH (SIZE on disk)"
    columns = (0, 44), (45, 54), (55, 65), (66, 75), (77, None)
    assert_rows(text, [fixed_width_cells(line, *columns) for line in plain[1:]])
    assert rules(text) == 1 and text.splitlines()[-2].strip() == ""  # a gap above the total
    assert_no_loss_at(on_terminal(monkeypatch, *args, width=80), "\n".join(plain), 80)


def test_reaudit_on_a_terminal_draws_the_run_and_the_comparison(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = tmp_path / "spec.yaml"
    spec.write_text(
        "task: resume-screening\nmodel: sim/biased\nnames_per_group: 2\n"
        f"jobs: software-engineer\nruns_dir: {tmp_path / 'runs'}\n"
    )
    plain = off_terminal("reaudit", str(spec), "--no-report", "--history", str(tmp_path / "h"))
    assert "baseline: none" in plain
    text = on_terminal(monkeypatch, "reaudit", str(spec), "--no-report",
                       "--history", str(tmp_path / "h"))  # fmt: skip
    lines = text.splitlines()
    assert_rows(text, [["group", "n", "RABBI [CI]", "p", "δ mean", "JSD", "EMD", "irreg"]])
    assert_rows(text, [["group", "n", *(f"k={k} [CI]" for k in range(1, 6))]])
    assert any(line.startswith("baseline: ") and "none" not in line for line in lines)
    assert any(line.startswith("verdict: ") for line in lines)
    assert lines[-1].startswith("run: ")


@pytest.mark.parametrize("no_color", [False, True])
def test_rich_tables_add_bold_and_never_colour(
    runs: dict[str, list[Path]], monkeypatch: pytest.MonkeyPatch, no_color: bool
) -> None:
    """Figures stay readable in grey scale; ``NO_COLOR`` is honoured by rich itself."""
    monkeypatch.setenv("FORCE_COLOR", "1")  # styles, as on a real terminal
    if no_color:
        monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setattr(biasaudit.reports.rich_tables, "stdout_is_terminal", lambda: True)
    for args in (study_args(runs, "allocation"), ["history", "--runs-dir", str(root_of(runs))]):
        out = off_terminal(*args)
        assert "\x1b[1m" in out  # the header row, the first line
        assert not COLOUR.search(out), COLOUR.search(out)


def test_a_wide_table_on_a_narrower_terminal_is_drawn_in_parts_none_folded(
    runs: dict[str, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ΔDP table of k = 1..5 needs more than 120 columns: at 120 it is drawn in two
    parts, each with the group column, and every interval stays on one line."""
    args = ("replay", str(runs["allocation"][0]), "--no-report")
    plain = off_terminal(*args)
    interval = re.compile(r"[-+]\d\.\d{3} \[[-+]\d\.\d{3}, [-+]\d\.\d{3}\]")
    assert max(len(line) for line in plain.splitlines() if interval.search(line)) > 120
    text = on_terminal(monkeypatch, *args, width=120)
    table_lines = [line for line in text.splitlines() if interval.search(line)]
    assert all(len(line) <= 120 for line in table_lines)
    assert len(interval.findall(text)) == len(interval.findall(plain))
    assert text.count("ΔDP: selection rate minus") == 1  # one title over the parts
