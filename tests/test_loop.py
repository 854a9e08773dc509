"""run_async and the garbage collector's pause around a command's start-up."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from biasaudit.engine import loop
from biasaudit.engine.loop import pause_gc_until_run, run_async


@pytest.fixture
def collector() -> Iterator[None]:
    was_enabled = gc.isenabled()
    yield
    loop._gc_paused = False
    gc.unfreeze()
    if was_enabled:
        gc.enable()
    else:
        gc.disable()


async def collector_state() -> tuple[bool, tuple[int, int, int]]:
    return gc.isenabled(), gc.get_threshold()


@pytest.mark.usefixtures("collector")
def test_the_collector_pauses_until_the_run_starts() -> None:
    gc.enable()
    before = gc.get_threshold()
    pause_gc_until_run()
    assert not gc.isenabled()
    enabled, thresholds = run_async(collector_state())
    assert enabled and thresholds[0] == loop._GC_GEN0_THRESHOLD
    assert gc.isenabled() and gc.get_threshold() == before, "restored after the run"
    assert gc.get_freeze_count() > 0, "start-up's objects were moved out of the way"
    # A later run finds nothing paused and leaves the collector as it is.
    assert run_async(collector_state())[0] and gc.isenabled()


@pytest.mark.usefixtures("collector")
def test_a_collector_switched_off_by_the_caller_stays_off() -> None:
    gc.disable()
    pause_gc_until_run()
    assert run_async(collector_state())[0] is False
    assert not gc.isenabled()
