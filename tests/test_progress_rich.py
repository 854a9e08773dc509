"""Terminal output: a rich progress bar and rich tables on a terminal, the plain lines elsewhere.

The terminal is forced (a rich ``Console(force_terminal=True)`` on a
``StringIO``, or a stream that says it is a TTY); off a terminal the output
must stay byte for byte what scripts and the other CliRunner tests read.
"""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import pandas as pd
import pytest
from rich.console import Console

import biasaudit.engine.progress
import biasaudit.reports.rich_tables
from biasaudit.engine.core import EngineStats
from biasaudit.engine.progress import ProgressPrinter
from biasaudit.kinds.registry import read_metrics, run_spec, table_of
from biasaudit.reports.compare import compare_runs, comparison_lines
from biasaudit.reports.rich_tables import audit_view, comparison_view
from biasaudit.spec import parse_spec
from tests.test_report_html import invoke, run_dir_of

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
pytestmark = pytest.mark.usefixtures("terminal_environment")


class Terminal(io.StringIO):
    """A stream that says it is a terminal, as stderr is in a shell."""

    def isatty(self) -> bool:
        return True


def forced_console(width: int = 200) -> Console:
    return Console(force_terminal=True, file=io.StringIO(), width=width, color_system=None)


def output(console: Console) -> str:
    assert isinstance(console.file, io.StringIO)
    return ANSI.sub("", console.file.getvalue())


def stats() -> EngineStats:
    return EngineStats(total=10, done=4, cache_hits=2, retries=1, in_flight=3)


async def show(printer: ProgressPrinter, live: EngineStats) -> None:
    printer.start()
    await asyncio.sleep(0.3)  # one redraw at 0.25 s
    live.done, live.in_flight = 10, 0
    await printer.stop()


def test_progress_bar_on_a_terminal_shows_every_counter() -> None:
    live, console = stats(), forced_console()
    asyncio.run(show(ProgressPrinter(lambda: live, label="fanout: ", console=console), live))
    text = output(console)
    assert "━" in text  # the bar
    # The bar, done/total and ETA on one line; the counters under it (both fit 80 columns).
    running = (
        r"fanout ━+╸? +4/10 ETA \d+:\d\d:\d\d\n  2 cached · 1 retries · 0 failed · 3 in flight"
    )
    assert re.search(running, text)
    assert re.search(
        r"10/10 ETA -\n  2 cached · 1 retries · 0 failed · 0 in flight · \d+ req/s", text
    )
    assert "0/?" not in text  # the first frame already has the counts


def test_progress_on_a_tty_stream_draws_the_bar() -> None:
    live, stream = stats(), Terminal()
    asyncio.run(show(ProgressPrinter(lambda: live, stream, label="ruted: "), live))
    text = ANSI.sub("", stream.getvalue())
    assert "ruted" in text and "━" in text and "10/10" in text
    assert "done (" not in text  # not the plain line


def test_progress_off_a_terminal_prints_the_plain_line_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    live, stream = stats(), io.StringIO()
    monkeypatch.setattr(biasaudit.engine.progress.time, "monotonic", lambda: live.started + 2.0)
    printer = ProgressPrinter(lambda: live, stream, label="fanout: ")

    async def stop_only() -> None:
        await printer.stop()

    asyncio.run(stop_only())
    assert stream.getvalue() == (
        "fanout: 4/10 done (2 cached, 1 retries, 0 failed, 3 in flight) 1 req/s, ETA 6s\n"
    )


def test_an_audit_on_a_terminal_shows_the_bar(tmp_path: Path) -> None:
    spec = parse_spec(
        {"task": "resume-screening", "model": "sim/biased", "runs_dir": str(tmp_path),
         "names_per_group": 1, "jobs": "software-engineer"}
    )  # fmt: skip
    stream = Terminal()
    finished = run_spec(spec, stderr=stream, command=["test"])
    total = finished.manifest.counts.requests
    text = ANSI.sub("", stream.getvalue())
    assert f"{total}/{total} ETA -\n  0 cached · 0 retries · 0 failed · 0 in flight" in text


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rich")
    found: dict[str, Path] = {}
    for name, args in {
        "fair": ["resume-screening", "--model", "sim/fair", "--names-per-group", "2",
                 "--jobs", "software-engineer"],
        "biased": ["resume-screening", "--model", "sim/biased", "--names-per-group", "2",
                   "--jobs", "software-engineer"],
        "grade-score": ["grade-score", "--items", "demo", "--model", "sim/biased"],
        "ruted": ["ruted", "--model", "sim/biased", "--replicates", "3",
                  "--contexts", "standard,bedtime"],
    }.items():  # fmt: skip
        code, out, err = invoke("run", *args, "--runs-dir", str(root), "--no-report")
        assert code == 0, err
        found[name] = run_dir_of(out)
    return found


@pytest.mark.parametrize("name", ["biased", "grade-score", "ruted"])
def test_off_a_terminal_run_prints_the_plain_table_byte_for_byte(
    runs: dict[str, Path], name: str
) -> None:
    code, out, _ = invoke("replay", str(runs[name]), "--no-report")
    assert code == 0
    replayed = run_dir_of(out)
    kind = "allocation" if name == "biased" else name
    table = table_of(kind, read_metrics(replayed, kind), replayed)
    assert out == "\n".join(table) + (
        f"\nreplay: metrics identical to {runs[name]} (request counts aside)\nrun: {replayed}\n"
    )


@pytest.mark.parametrize("name", ["biased", "grade-score", "ruted"])
def test_rich_view_shows_what_the_plain_table_shows(runs: dict[str, Path], name: str) -> None:
    kind = "allocation" if name == "biased" else name
    metrics = read_metrics(runs[name], kind)
    console = forced_console(width=250)
    console.print(audit_view(metrics, runs[name], kind))
    text = output(console)
    plain = table_of(kind, metrics, runs[name])
    assert plain[0] in text  # the model, labelled SIMULATED
    assert "SIMULATED model" in text
    assert "─" in text  # a rich table rule
    numbers = {cell for line in plain for cell in re.findall(r"[-+]\d\.\d{3}", line)}
    missing = [number for number in numbers if number not in text]
    assert not missing, missing
    if kind == "grade-score":
        items = pd.read_csv(runs[name] / "items.csv")
        assert all(str(item) in text for item in items["item_id"])


def test_compare_on_a_terminal_prints_the_rich_table(
    runs: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    a, b = str(runs["fair"]), str(runs["biased"])
    code, plain, _ = invoke("compare", a, b, "--no-report")
    assert code == 0
    assert plain == "\n".join(comparison_lines(compare_runs(a, b))) + "\n"  # off a terminal
    monkeypatch.setattr(biasaudit.reports.rich_tables, "stdout_is_terminal", lambda: True)
    code, rich, _ = invoke("compare", a, b, "--no-report")
    assert code == 0 and rich != plain
    assert "B - A [95% CI]" in rich and "─" in rich
    assert "figure                        A" not in rich  # not the fixed-width header
    assert rich.splitlines()[-1] == plain.splitlines()[-1] == "verdict: changed (B_M)"


def test_comparison_view_lists_every_figure_with_all(runs: dict[str, Path]) -> None:
    comparison = compare_runs(runs["fair"], runs["biased"], bootstrap=200)
    console = forced_console(width=250)
    console.print(comparison_view(comparison, show_all=True))
    text = output(console)
    rows = {line.split("  ")[0] for line in text.splitlines()}  # a table starts in column 0
    missing = [test.label for test in comparison.tests if test.label not in rows]
    assert not missing, missing
    assert text.rstrip().endswith("verdict: changed (B_M)")


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_phase_shows_a_spinner_on_a_terminal_and_nothing_elsewhere() -> None:
    from biasaudit.engine.progress import phase

    terminal, pipe = _Terminal(), io.StringIO()
    with phase("computing the figures", terminal), phase("nested: drawn by the outer", terminal):
        pass
    with phase("computing the figures", pipe):
        pass
    assert "computing the figures" in terminal.getvalue()
    assert pipe.getvalue() == ""
