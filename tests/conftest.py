"""Shared fixtures. Every test is offline: no real provider, no API key."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

import biasaudit.kinds.ruted.embeddings
from biasaudit.store.cache import ResponseCache

# Keys a developer may have exported must never reach a test.
for _name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY"):
    os.environ.pop(_name, None)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """Workers for ``-n auto`` (pyproject's addopts): one per core this process may use,
    at most 8 (each worker holds the package, pandas and scipy: about 0.4 GB). Threads
    per core beyond one only slow the suite (it is CPU-bound: on 2 cores, 4 workers
    took 11.5 minutes where 2 took 8.5)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--live", action="store_true", help="run tests that call real providers")
    parser.addoption(
        "--calibration",
        action="store_true",
        help="run the statistical calibrations at full size (minutes; "
        "bench/bench_power_calibration.py runs them); without it they run sized down",
    )


@pytest.fixture
def full_size(request: pytest.FixtureRequest) -> bool:
    """Whether the calibrations run at full size (``--calibration``)."""
    return bool(request.config.getoption("--calibration"))


@pytest.fixture
def quick_refit(monkeypatch: pytest.MonkeyPatch, full_size: bool) -> None:
    """The power planner's refit on halves of a pilot's names with 200 gap-bootstrap
    replicates, not 800 (a quarter of the time): for tests of what the plan prints and
    records, not of how precise it is (``tests/test_power_calibration.py`` and
    ``bench/bench_power_calibration.py`` keep the product's size)."""
    if not full_size:
        import biasaudit.kinds.allocation.power

        monkeypatch.setattr(biasaudit.kinds.allocation.power, "REPLICATES", 200)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--live"):
        return
    skip = pytest.mark.skip(reason="talks to a real provider: pass --live and set its API key")
    for item in items:
        if "live" in item.keywords:
            item.add_marker(skip)


_REAL_MISSING_EMBEDDER = biasaudit.kinds.ruted.embeddings.missing_embedder


@pytest.fixture(autouse=True, scope="session")
def no_embedder() -> Iterator[None]:
    """Runs read the same wherever the 'embeddings' extra happens to be installed: the
    mode-collapse check is skipped, as without it, except in tests that ask for
    :func:`real_embedder`. Session-wide, so module-scoped runs see it too."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            biasaudit.kinds.ruted.embeddings,
            "missing_embedder",
            lambda: (
                f"the embedding model is not installed ({biasaudit.kinds.ruted.embeddings.INSTALL_HINT})"
            ),
        )
        yield


@pytest.fixture
def real_embedder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The embedding model as installed: skips the test where the extra is missing."""
    if _REAL_MISSING_EMBEDDER() is not None:
        pytest.skip("the 'embeddings' extra is not installed")
    monkeypatch.setattr(
        biasaudit.kinds.ruted.embeddings, "missing_embedder", _REAL_MISSING_EMBEDDER
    )


@pytest.fixture
def terminal_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A terminal rich draws on as in a shell, whatever the CI's TERM, COLUMNS and colour say."""
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setenv("COLUMNS", "100")
    for name in ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[ResponseCache]:
    store = ResponseCache(tmp_path / "cache.sqlite")
    yield store
    store.close()


async def no_sleep(seconds: float) -> None:
    """Stands in for asyncio.sleep between retries: records nothing, waits nothing."""


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def recording_sleep(sleeps: list[float]):  # type: ignore[no-untyped-def]
    async def sleep(seconds: float) -> None:
        sleeps.append(seconds)

    return sleep
