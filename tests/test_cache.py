"""The response cache: when answers become durable, and what another process can see."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from biasaudit.providers import ModelResponse
from biasaudit.store.cache import ResponseCache


def answer(text: str) -> ModelResponse:
    return ModelResponse(texts=(text,), model_version="m-1")


def keys_seen_elsewhere(path: Path) -> set[str]:
    """What a second connection (another process, a restarted run) reads from the file."""
    with ResponseCache(path, readonly=True) as other:
        return other.keys_present([f"k{i}" for i in range(100)])


def test_outside_a_loop_each_answer_is_committed_before_put_returns(tmp_path: Path) -> None:
    with ResponseCache(tmp_path / "c.sqlite") as store:
        store.put("k1", answer("Yes"), model_id="sim/x")
        assert keys_seen_elsewhere(store.path) == {"k1"}


def test_in_a_loop_answers_of_one_turn_are_committed_together_at_its_end(
    tmp_path: Path,
) -> None:
    store = ResponseCache(tmp_path / "c.sqlite")

    async def arrive() -> tuple[set[str], set[str]]:
        for i in range(5):  # five answers handled in the same loop turn
            store.put(f"k{i}", answer(str(i)), model_id="sim/x")
        during = keys_seen_elsewhere(store.path)
        await asyncio.sleep(0)  # the turn ends: the commit runs
        return during, keys_seen_elsewhere(store.path)

    during, after = asyncio.run(arrive())
    assert during == set(), "nothing is half-written mid-turn"
    assert after == {f"k{i}" for i in range(5)}
    assert store.get("k3") == answer("3")
    store.close()


def test_reads_and_close_commit_what_is_pending(tmp_path: Path) -> None:
    store = ResponseCache(tmp_path / "c.sqlite")

    async def arrive_then_read() -> int:
        store.put("k1", answer("Yes"), model_id="sim/x")
        store.put("k2", answer("No"), model_id="sim/x")
        return len(store)  # this process reads its own writes at once

    assert asyncio.run(arrive_then_read()) == 2
    store.put("k3", answer("Yes"), model_id="sim/x")

    async def last_answer_then_stop() -> None:
        store.put("k4", answer("No"), model_id="sim/x")

    loop = asyncio.new_event_loop()
    loop.run_until_complete(last_answer_then_stop())
    loop.close()  # the loop is gone before its commit callback ran
    store.close()
    assert keys_seen_elsewhere(store.path) == {"k1", "k2", "k3", "k4"}


def test_a_failed_commit_keeps_the_answers_for_the_next(tmp_path: Path) -> None:
    store = ResponseCache(tmp_path / "c.sqlite")
    blocker = ResponseCache(tmp_path / "c.sqlite")
    blocker._db.execute("BEGIN EXCLUSIVE")  # another process holds the write lock
    store._db.execute("PRAGMA busy_timeout = 10")

    async def arrive() -> None:
        store.put("k1", answer("Yes"), model_id="sim/x")
        store.put("k2", answer("No"), model_id="sim/x")
        await asyncio.sleep(0)  # the end-of-turn commit fails and logs

    asyncio.run(arrive())
    with pytest.raises(Exception, match="locked"):
        store.commit()
    blocker._db.execute("ROLLBACK")
    blocker.close()
    store.commit()
    assert keys_seen_elsewhere(store.path) == {"k1", "k2"}
    store.close()


# --- leases on requests in flight ------------------------------------------------------


def test_a_claim_takes_free_keys_and_reports_answered_and_held_ones(tmp_path: Path) -> None:
    import subprocess
    import sys

    from biasaudit.processes import new_holder, running

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host = new_holder().split(":")[0]
    with ResponseCache(tmp_path / "c.sqlite") as store, running(new_holder()) as other:
        store.put("answered", answer("Yes"), model_id="sim/x")
        assert store.claim(["held", "expired"], other, lease_s=60).taken == ["held", "expired"]
        store._db.execute("UPDATE leases SET expires = 0 WHERE key = 'expired'")
        store.claim(["dead"], f"{host}:{dead.pid}:aa", lease_s=60)
        mine = new_holder()
        with running(mine):
            claim = store.claim(["answered", "held", "expired", "dead", "free"], mine, lease_s=60)
        assert claim.answered == {"answered"} and claim.held == {"held"}
        assert claim.taken == ["expired", "dead", "free"]
        store.release(other)
        with running(mine):
            assert store.claim(["held"], mine, lease_s=60).taken == ["held"]


def test_two_engines_on_one_cache_send_each_request_once(tmp_path: Path) -> None:
    from biasaudit.engine.core import Engine

    from .fakes import FakeProvider, chat

    requests = [chat(f"q{i}", str(i)) for i in range(60)]
    providers = [FakeProvider(delay=0.01), FakeProvider(delay=0.01)]

    async def both() -> None:
        async def one(provider: FakeProvider) -> None:
            with ResponseCache(tmp_path / "c.sqlite") as store:
                results = [r async for r in Engine(provider, store).run(requests)]
            assert all(r.ok for r in results) and len(results) == 60

        await asyncio.gather(*(one(provider) for provider in providers))

    asyncio.run(both())
    calls = providers[0].calls + providers[1].calls
    assert len(calls) == 60 and max(calls.values()) == 1
