"""``--batch``: provider batch APIs through the engine, against loopback batch servers.

The servers (tests/servers) speak the Batch API and Message Batches wire
formats, answer each entry with the same builders as their normal endpoints,
return results shuffled, and count batch creations.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from click.testing import CliRunner

from biasaudit.cli import cli
from biasaudit.engine.batch import BatchStore, _Batch
from biasaudit.engine.core import Engine, EngineSettings, RequestResult
from biasaudit.engine.fanout import FanoutOptions, run_fanout
from biasaudit.errors import RunInterruptedError, UsageError
from biasaudit.pricing import CostEstimate, ModelPrice
from biasaudit.providers import ModelRequest, Provider, resolve_model
from biasaudit.store.cache import ResponseCache
from biasaudit.store.runs import BatchesFile, read_manifest, read_responses
from tests.servers import AnthropicServer, Choice, OpenAIServer, request_key

from .conftest import no_sleep

KEY_ENV = "BATCH_TEST_KEY"
S = TypeVar("S", OpenAIServer, AnthropicServer)
FAST = {"batch_poll": 0.01, "backoff_initial": 0.001, "backoff_max": 0.01}


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, "test-key")


@pytest.fixture(scope="module")
def openai_module_server() -> Iterator[OpenAIServer]:
    with OpenAIServer() as server:
        yield server


@pytest.fixture
def oai(openai_module_server: OpenAIServer) -> OpenAIServer:
    return fresh(openai_module_server)


@pytest.fixture(scope="module")
def anthropic_module_server() -> Iterator[AnthropicServer]:
    with AnthropicServer() as server:
        yield server


@pytest.fixture
def ant(anthropic_module_server: AnthropicServer) -> AnthropicServer:
    return fresh(anthropic_module_server)


def fresh(server: S) -> S:
    """A module-wide server as a new one: no requests, batches, delays or limits."""
    server.reset()
    server.batches.clear()
    server.batches.delay = 0.0
    server.batches.max_requests = None
    return server


Server = OpenAIServer | AnthropicServer


def provider_for(server: Server) -> Provider:
    name = "openai" if isinstance(server, OpenAIServer) else "anthropic"
    return resolve_model(f"{name}/test-model", base_url=server.base_url, api_key_env=KEY_ENV)


def prompts(n: int, **params: Any) -> list[ModelRequest]:
    return [
        ModelRequest.model_validate(
            {
                "id": f"p{i}",
                "messages": [{"role": "user", "content": f"prompt {i}"}],
                "params": {"max_tokens": 4, **params},
            }
        )
        for i in range(n)
    ]


def run(
    server: Server, requests: list[ModelRequest], cache: ResponseCache | None, **settings: Any
) -> tuple[list[RequestResult], Engine]:
    """One engine run against ``server`` (batch on unless ``batch=False``)."""

    async def go() -> tuple[list[RequestResult], Engine]:
        provider = provider_for(server)
        engine = Engine(
            provider, cache, EngineSettings(**{"batch": True, **FAST, **settings}), sleep=no_sleep
        )
        try:
            return [r async for r in engine.run(requests)], engine
        finally:
            await provider.aclose()

    return asyncio.run(go())


def echo(body: dict[str, Any], path: str) -> list[Choice]:
    """Answers with the prompt itself: a result matched to the wrong request shows."""
    return [Choice(f"echo {request_key(body, path)}")]


def direct_requests(server: Server) -> int:
    return sum(
        r.path in ("/v1/chat/completions", "/v1/completions", "/v1/messages")
        for r in server.requests
    )


# ------------------------------------------------------------------ the servers' wire format
def test_openai_batch_endpoints_speak_the_wire_format(oai: OpenAIServer) -> None:
    import json

    import openai

    oai.batches.delay = 0.05
    lines = [
        {"custom_id": f"c{i}", "method": "POST", "url": "/v1/chat/completions",
         "body": {"model": "m", "messages": [{"role": "user", "content": f"q{i}"}]}}
        for i in range(20)
    ]  # fmt: skip
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()

    async def go() -> None:
        async with openai.AsyncOpenAI(base_url=oai.base_url, api_key="k", max_retries=0) as client:
            uploaded = await client.files.create(file=("in.jsonl", data), purpose="batch")
            assert (await client.files.retrieve(uploaded.id)).bytes == len(data)
            batch = await client.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                completion_window="24h", metadata={"tag": "t1"},
            )  # fmt: skip
            assert batch.status == "validating" and batch.request_counts.total == 20
            listed = [b async for b in client.batches.list(limit=1)]
            assert [b.id for b in listed] == [batch.id] and listed[0].metadata == {"tag": "t1"}
            while (batch := await client.batches.retrieve(batch.id)).status != "completed":
                await asyncio.sleep(0.02)
            assert batch.request_counts.completed == 20 and batch.error_file_id is None
            output = (await client.files.content(batch.output_file_id)).content
            rows = [json.loads(line) for line in output.splitlines()]
            ids = [row["custom_id"] for row in rows]
            assert sorted(ids) == sorted(f"c{i}" for i in range(20)) and ids != sorted(ids)
            assert all(row["response"]["status_code"] == 200 for row in rows)
            assert rows[0]["response"]["body"]["choices"][0]["message"]["content"] == "Yes"
            second = await client.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            cancelled = await client.post(
                f"/batches/{second.id}/cancel", cast_to=openai.types.Batch
            )
            assert cancelled.status == "cancelling"
            while (second := await client.batches.retrieve(second.id)).status != "cancelled":
                await asyncio.sleep(0.02)
            errors = (await client.files.content(second.error_file_id)).content.splitlines()
            assert json.loads(errors[0])["error"]["code"] == "batch_cancelled"

    asyncio.run(go())
    assert oai.batches.created == 2


def test_anthropic_message_batches_speak_the_wire_format(ant: AnthropicServer) -> None:
    import anthropic

    ant.batches.fail_entries("q3", "expire")
    requests = [
        {"custom_id": f"c{i}", "params": {"model": "m", "max_tokens": 5,
                                          "messages": [{"role": "user", "content": f"q{i}"}]}}
        for i in range(12)
    ]  # fmt: skip

    async def go() -> None:
        async with anthropic.AsyncAnthropic(
            base_url=ant.base_url, api_key="k", max_retries=0
        ) as client:
            with pytest.raises(anthropic.BadRequestError, match="custom_id"):
                await client.messages.batches.create(requests=[{**requests[0], "custom_id": "a b"}])
            batch = await client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
            assert (
                batch.processing_status == "in_progress" and batch.request_counts.processing == 12
            )
            listed = [b async for b in client.messages.batches.list(limit=5)]
            assert [b.id for b in listed] == [batch.id]
            while (
                batch := await client.messages.batches.retrieve(batch.id)
            ).processing_status != "ended":
                await asyncio.sleep(0.02)
            assert batch.request_counts.succeeded == 11 and batch.request_counts.expired == 1
            results = [r async for r in await client.messages.batches.results(batch.id)]
            by_id = {r.custom_id: r.result for r in results}
            assert by_id["c3"].type == "expired"
            assert by_id["c0"].type == "succeeded" and by_id["c0"].message.content[0].text == "Yes"  # type: ignore[union-attr]
            assert [r.custom_id for r in results] != sorted(by_id, key=lambda c: int(c[1:]))

    asyncio.run(go())


# ------------------------------------------------------------------ engine runs
@pytest.mark.parametrize("server_name", ["oai", "ant"])
def test_a_batch_run_answers_as_the_normal_path_does(
    server_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    server: Server = request.getfixturevalue(server_name)
    params = {"logprobs": True, "top_logprobs": 5} if server_name == "oai" else {}
    requests = prompts(30, **params)
    with ResponseCache(tmp_path / "batch.sqlite") as cache:
        batched, engine = run(server, requests, cache)
        stored = cache.get_many(r.key for r in batched)
    assert server.batches.created == 1 and direct_requests(server) == 0
    assert engine.stats.batched == 30 and engine.stats.sent == 0 and engine.stats.failures == 0
    assert "batches 1/1 collected" in engine.stats.batch_status
    with ResponseCache(tmp_path / "direct.sqlite") as cache:
        direct, _ = run(server, requests, cache, batch=False)
        stored_direct = cache.get_many(r.key for r in direct)
    assert direct_requests(server) == 30
    assert len(stored) == len(stored_direct) == 30
    for key, response in stored.items():
        assert response.model_copy(update={"request_id": None}) == stored_direct[key].model_copy(
            update={"request_id": None}
        )
    # The second run of the same requests is served from the cache.
    with ResponseCache(tmp_path / "batch.sqlite") as cache:
        again, _ = run(server, requests, cache)
    assert all(r.cached for r in again) and server.batches.created == 1


def test_results_out_of_order_are_matched_by_custom_id(oai: OpenAIServer, tmp_path: Path) -> None:
    oai.responder = echo
    try:
        with ResponseCache(tmp_path / "c.sqlite") as cache:
            results, _ = run(oai, prompts(40), cache)
    finally:
        from tests.servers import default_responder

        oai.responder = default_responder
    assert [r.request.id for r in results] != [f"p{i}" for i in range(40)], "shuffled"
    for result in results:
        assert result.response is not None
        assert result.response.text == f"echo {result.request.messages[0]['content']}"  # type: ignore[index]


@pytest.mark.parametrize("server_name", ["oai", "ant"])
def test_batches_are_split_at_the_limits(
    server_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    server: Server = request.getfixturevalue(server_name)
    server.batches.max_requests = 7  # the server refuses larger batches
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        results, _ = run(server, prompts(30), cache, batch_max_requests=7)
    assert server.batches.created == 5 and all(r.ok for r in results)
    assert sorted(b.requests for b in stored_batches(tmp_path / "c.sqlite")) == [2, 7, 7, 7, 7]
    server.batches.clear()
    with ResponseCache(tmp_path / "bytes.sqlite") as cache:
        results, _ = run(server, prompts(30), cache, batch_max_bytes=1_000)
    assert server.batches.created >= 4 and all(r.ok for r in results)


def stored_batches(path: Path) -> list[Any]:
    store = BatchStore(path)
    try:
        ids = [row[0] for row in store._db.execute("SELECT local_id FROM batches")]
        return [store._load(local_id) for local_id in ids]
    finally:
        store.close()


def test_chat_and_completions_go_into_separate_openai_batches(
    oai: OpenAIServer, tmp_path: Path
) -> None:
    completions = [
        ModelRequest(
            id=f"c{i}",
            prompt=f"The nurse {i} said",
            params={"max_tokens": 1, "logprobs": True, "top_logprobs": 3},
        )  # type: ignore[arg-type]
        for i in range(5)
    ]
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        results, _ = run(oai, prompts(5) + completions, cache)
    assert oai.batches.created == 2 and all(r.ok for r in results)
    endpoints = sorted(job.endpoint for job in oai.batches.jobs.values())
    assert endpoints == ["/v1/chat/completions", "/v1/completions"]
    by_id = {r.request.id: r for r in results}
    assert by_id["c0"].response is not None and by_id["c0"].response.logprobs is not None


@pytest.mark.parametrize("server_name", ["oai", "ant"])
def test_errored_and_expired_entries_are_sent_again_directly(
    server_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    server: Server = request.getfixturevalue(server_name)
    server.batches.fail_entries('prompt 3"', "error")
    server.batches.fail_entries('prompt 5"', "expire")
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        results, engine = run(server, prompts(10), cache)
        assert len(cache) == 10
    assert all(r.ok for r in results) and engine.stats.batched == 8
    assert direct_requests(server) == 2 and server.batches.created == 1
    [row] = stored_batches(tmp_path / "c.sqlite")
    assert row.state == "collected" and row.failed == 2


def test_entries_the_normal_path_cannot_answer_either_are_failures_never_cached(
    oai: OpenAIServer, tmp_path: Path
) -> None:
    from tests.servers import Fault

    oai.batches.fail_entries('prompt 2"', "error")
    oai.fail_all(Fault.http(400, message="bad prompt"), match='prompt 2"')
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        results, engine = run(oai, prompts(5), cache)
        failed = [r for r in results if not r.ok]
        assert [r.request.id for r in failed] == ["p2"] and "bad prompt" in (failed[0].error or "")
        assert cache.keys_present(r.key for r in results) == {r.key for r in results if r.ok}
    assert engine.stats.failures == 1


def test_a_rerun_collects_the_pending_batch_instead_of_submitting_again(
    ant: AnthropicServer, tmp_path: Path
) -> None:
    """The first run is stopped while polling (as Ctrl-C would); the second picks the batch up."""
    ant.batches.delay = 30.0
    requests = prompts(12)

    stop_while_polling(ant, requests, tmp_path / "c.sqlite")
    [pending] = stored_batches(tmp_path / "c.sqlite")
    assert pending.state == "submitted" and pending.batch_id is not None
    ant.batches.delay = 0.0
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        results, engine = run(ant, requests, cache)
    assert ant.batches.created == 1 and all(r.ok for r in results) and engine.stats.batched == 12
    assert stored_batches(tmp_path / "c.sqlite")[0].state == "collected"


async def _drain(engine: Engine, requests: list[ModelRequest]) -> list[RequestResult]:
    return [r async for r in engine.run(requests)]


def stop_while_polling(server: Server, requests: list[ModelRequest], cache_path: Path) -> None:
    """Run ``--batch`` until its batch is created, then cancel it as Ctrl-C would."""

    async def stopped() -> None:
        provider = provider_for(server)
        with ResponseCache(cache_path) as cache:
            engine = Engine(provider, cache, EngineSettings(batch=True, batch_poll=0.01))
            task = asyncio.ensure_future(_drain(engine, requests))
            while server.batches.created == 0:
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        await provider.aclose()

    asyncio.run(stopped())


@pytest.mark.parametrize("server_name", ["oai", "ant"])
def test_a_batch_created_but_not_recorded_is_found_again(
    server_name: str,
    request: pytest.FixtureRequest,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The crash window: the provider created the batch, the process died before recording its id."""
    server: Server = request.getfixturevalue(server_name)
    requests = prompts(9)

    def crash(self: BatchStore, batch: Any) -> None:
        raise KeyboardInterrupt  # the process dies with the batch created, its id unrecorded

    with monkeypatch.context() as patch:
        patch.setattr(BatchStore, "save", crash)
        with ResponseCache(tmp_path / "c.sqlite") as cache, pytest.raises(KeyboardInterrupt):
            run(server, requests, cache)
    [intent] = stored_batches(tmp_path / "c.sqlite")
    assert intent.state == "submitting" and intent.batch_id is None and server.batches.created == 1
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        results, _ = run(server, requests, cache)
    assert server.batches.created == 1, "the batch was submitted twice"
    assert all(r.ok for r in results) and direct_requests(server) == 0


@pytest.mark.parametrize("server_name", ["oai", "ant"])
def test_two_runs_started_together_submit_one_batch(
    server_name: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """Two processes (here two runners) on one cache: one plans and submits, the other waits."""
    server: Server = request.getfixturevalue(server_name)
    server.batches.delay = 0.2
    requests = prompts(10)

    async def one_run() -> list[RequestResult]:
        provider = provider_for(server)
        with ResponseCache(tmp_path / "c.sqlite") as cache:
            engine = Engine(provider, cache, EngineSettings(batch=True, **FAST))
            try:
                return [r async for r in engine.run(requests)]
            finally:
                await provider.aclose()

    async def both() -> list[list[RequestResult]]:
        return list(await asyncio.gather(one_run(), one_run()))

    first, second = asyncio.run(both())
    assert server.batches.created == 1, "the second run submitted the same requests again"
    assert direct_requests(server) == 0
    assert all(r.ok for r in first + second) and len(first) == len(second) == 10
    assert {r.response.texts for r in first} == {r.response.texts for r in second}  # type: ignore[union-attr]


def test_an_intent_held_by_a_live_process_elsewhere_is_not_taken_over(
    oai: OpenAIServer, tmp_path: Path
) -> None:
    """Another host's process recorded the intent: wait for its batch id, never submit."""
    requests = prompts(4)
    path = tmp_path / "c.sqlite"
    ResponseCache(path).close()
    store = BatchStore(path)

    async def other_host_submits(runner_started: asyncio.Event) -> None:
        await runner_started.wait()
        await asyncio.sleep(0.2)
        # The other process creates the batch and records its id.
        provider = provider_for(oai)
        api = provider.batch_api()
        assert api is not None
        items = store.items(intent.local_id)
        lines = [api.line(k, ModelRequest.model_validate_json(r)) for k, r in items.items()]
        state = await api.submit(lines, endpoint=intent.endpoint, tag=intent.local_id, timeout=30)
        intent.batch_id, intent.state, intent.status = state.batch_id, "submitted", state.status
        store.save(intent)
        await provider.aclose()

    engine_provider = provider_for(oai)
    engine = Engine(engine_provider, ResponseCache(path), EngineSettings(batch=True, **FAST))
    keyed = [(r, engine.key(r)) for r in requests]
    intent = _Batch("ba_elsewhere", "/v1/chat/completions", len(keyed), "submitting", time.time())
    store.add_intent(
        intent, "openai", engine_provider.model_id,
        ((key, r.model_dump_json(exclude_defaults=True)) for r, key in keyed),
        owner="another-host:4242:beef",
    )  # fmt: skip

    async def go() -> list[RequestResult]:
        started = asyncio.Event()
        other = asyncio.ensure_future(other_host_submits(started))
        started.set()
        try:
            return [r async for r in engine.run(requests)]
        finally:
            await other
            await engine_provider.aclose()

    results = asyncio.run(go())
    assert oai.batches.created == 1, "the waiting run submitted the intent too"
    assert all(r.ok for r in results) and direct_requests(oai) == 0
    assert engine.cache is not None
    engine.cache.close()
    store.close()


def test_a_run_whose_intent_is_taken_over_while_it_retries_waits_instead_of_submitting(
    oai: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Our submit fails; meanwhile another process takes the intent over and submits it."""
    from biasaudit.errors import TransientProviderError
    from biasaudit.providers.openai_batch import OpenAIBatchAPI

    real_submit = OpenAIBatchAPI.submit
    path = tmp_path / "c.sqlite"

    async def fail_while_another_takes_over(self: Any, lines: Any, **kwargs: Any) -> Any:
        monkeypatch.setattr(OpenAIBatchAPI, "submit", real_submit)
        state = await real_submit(self, lines, **kwargs)  # the other process's submission
        store = BatchStore(path)
        store._db.execute(
            "UPDATE batches SET owner = 'another-host:1:cafe', lease = ?, batch_id = ?, "
            "state = 'submitted', status = ? WHERE local_id = ?",
            (time.time() + 600, state.batch_id, state.status, kwargs["tag"]),
        )
        store.close()
        raise TransientProviderError("connection reset while creating the batch")

    monkeypatch.setattr(OpenAIBatchAPI, "submit", fail_while_another_takes_over)
    with ResponseCache(path) as cache:
        results, _ = run(oai, prompts(5), cache)
    assert oai.batches.created == 1, "the run submitted the intent another process holds"
    assert all(r.ok for r in results) and direct_requests(oai) == 0


def test_an_intent_that_never_reached_the_provider_is_submitted_on_the_rerun(
    oai: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from biasaudit.providers.openai_batch import OpenAIBatchAPI

    async def crash_before(self: Any, *args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(OpenAIBatchAPI, "submit", crash_before)
        with ResponseCache(tmp_path / "c.sqlite") as cache, pytest.raises(KeyboardInterrupt):
            run(oai, prompts(6), cache)
    assert oai.batches.created == 0
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        results, _ = run(oai, prompts(6), cache)
    assert oai.batches.created == 1 and all(r.ok for r in results)


# ------------------------------------------------------------------ runs, CLI, budget
def test_fanout_records_batches_in_the_run_and_ctrl_c_leaves_them_pending(
    oai: OpenAIServer, tmp_path: Path
) -> None:
    requests = prompts(8)
    options = FanoutOptions(
        model="openai/test-model", base_url=oai.base_url, api_key_env=KEY_ENV,
        runs_dir=tmp_path / "runs", batch=True, batch_poll=0.01, command=["test"],
    )  # fmt: skip
    oai.batches.delay = 30.0

    async def interrupted() -> None:
        task = asyncio.ensure_future(run_fanout(requests, options))
        while oai.batches.created == 0:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)
        task.cancel()
        with pytest.raises(RunInterruptedError, match="still pending at the provider") as caught:
            await task
        assert "batch_" in str(caught.value)

    asyncio.run(interrupted())
    [first_dir] = (tmp_path / "runs").glob("*-fanout-*")
    batches = BatchesFile.model_validate_json((first_dir / "batches.json").read_text())
    [record] = batches.batches
    assert record.batch_id is not None and record.state == "submitted" and record.requests == 8
    assert read_manifest(first_dir).batches[0].batch_id == record.batch_id

    oai.batches.delay = 0.0
    result = asyncio.run(run_fanout(requests, options))
    assert result.exit_code == 0 and oai.batches.created == 1
    manifest = read_manifest(result.run_dir)
    assert manifest.counts.batched == 8 and manifest.counts.sent == 0
    [resumed] = manifest.batches
    assert resumed.batch_id == record.batch_id and resumed.resumed and resumed.state == "collected"
    assert resumed.counts["succeeded"] == 8
    assert all(r.text == "Yes" for r in read_responses(result.run_dir))
    replayed = asyncio.run(run_fanout(requests, options.model_copy(update={"replay": True})))
    assert replayed.manifest.counts.cache_hits == 8 and replayed.exit_code == 0


@pytest.mark.parametrize("model", ["vllm/m", "sim/biased", "together/m"])
def test_batch_on_a_provider_without_a_batch_api_is_a_usage_error(
    model: str, tmp_path: Path
) -> None:

    prompts_file = tmp_path / "p.jsonl"
    prompts_file.write_text('{"id": "a", "messages": [{"role": "user", "content": "hi"}]}\n')
    args = [
        "fanout",
        str(prompts_file),
        "--model",
        model,
        "--batch",
        "--runs-dir",
        str(tmp_path / "runs"),
    ]
    if model.startswith("vllm"):
        args += ["--base-url", "http://127.0.0.1:9/v1"]
    result = CliRunner().invoke(cli, args, env={"TOGETHER_API_KEY": "k"})
    assert result.exit_code == 2, result.output
    assert "has no batch API" in result.output and "openai/" in result.output
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").glob("*-fanout-*"))


def test_the_engine_refuses_batch_without_a_batch_api() -> None:
    provider = resolve_model("vllm/m", base_url="http://127.0.0.1:9/v1")
    engine = Engine(provider, None, EngineSettings(batch=True))

    async def go() -> None:
        with pytest.raises(UsageError, match="no batch API"):
            [r async for r in engine.run(prompts(1))]

    asyncio.run(go())


def test_batch_estimates_cost_half() -> None:
    price = ModelPrice(input=1.0, output=2.0)
    full = CostEstimate("openai/m", 10, 0, 1_000_000, 1_000_000, price)
    half = CostEstimate("openai/m", 10, 0, 1_000_000, 1_000_000, price, batch=True)
    assert full.cost == 3.0 and half.cost == 1.5
    assert "through batches, at half" in half.lines()[-1]


def test_max_cost_with_batch_budgets_at_half_price_end_to_end(
    oai: OpenAIServer, tmp_path: Path
) -> None:
    """A budget between the half-price and the full-price estimate: batched, it runs."""
    prices = tmp_path / "prices.yaml"
    prices.write_text("prices:\n  openai/test-model: {input: 1.0, output: 2.0}\n")
    base = ["run", "resume-screening", "--model", "openai/test-model",
            "--base-url", oai.base_url, "--api-key-env", KEY_ENV, "--jobs", "software-engineer",
            "--names-per-group", "1", "--rounds", "50", "--runs-dir", str(tmp_path / "runs"),
            "--prices", str(prices), "--no-report", "--batch-poll", "0.01"]  # fmt: skip
    dry = CliRunner().invoke(cli, [*base, "--dry-run"], catch_exceptions=False)
    full = float(dry.stdout.split("estimated cost: $")[1].split()[0])
    budget = f"{full * 0.75:.6f}"
    refused = CliRunner().invoke(cli, [*base, "--max-cost", budget], catch_exceptions=False)
    assert refused.exit_code == 2 and "not started" in refused.stderr
    assert oai.request_count == 0 and oai.batches.created == 0
    batched = CliRunner().invoke(cli, [*base, "--max-cost", budget, "--batch"])
    assert batched.exit_code == 0, batched.output
    assert oai.batches.created == 1 and direct_requests(oai) == 0
    spent = float(batched.stdout.split("spent: $")[1].split()[0])
    assert 0 < spent <= float(budget), "the spend is counted at half price too"


def test_batch_is_a_spec_and_command_line_setting() -> None:
    from biasaudit.spec import parse_spec

    spec = parse_spec(
        {"task": "resume-screening", "model": "openai/m", "batch": True, "batch_poll": 0.5}
    )
    settings = spec.engine_settings()
    assert settings.batch and settings.batch_poll == 0.5


def test_no_batch_tables_hold_a_secret(
    oai: OpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary = "sk-canary-batch-7c1e9a0f3b"
    monkeypatch.setenv(KEY_ENV, canary)
    options = FanoutOptions(
        model="openai/test-model", base_url=oai.base_url, api_key_env=KEY_ENV,
        runs_dir=tmp_path / "runs", batch=True, batch_poll=0.01, command=["test"],
    )  # fmt: skip
    result = asyncio.run(run_fanout(prompts(5), options))
    assert result.exit_code == 0
    assert oai.requests[0].headers["authorization"] == f"Bearer {canary}"
    db = sqlite3.connect(tmp_path / "runs" / "cache.sqlite")
    dump = "\n".join(db.iterdump())
    db.close()
    assert "batch_items" in dump and canary not in dump
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert canary.encode() not in path.read_bytes(), path


def test_a_pending_batch_the_provider_no_longer_has_is_sent_directly(
    oai: OpenAIServer, tmp_path: Path
) -> None:
    oai.batches.delay = 30.0
    requests = prompts(6)

    stop_while_polling(oai, requests, tmp_path / "c.sqlite")
    oai.batches.clear()  # the provider forgot it (deleted, or its results expired)
    oai.batches.delay = 0.0
    with ResponseCache(tmp_path / "c.sqlite") as cache:
        results, _ = run(oai, requests, cache)
    assert all(r.ok for r in results) and direct_requests(oai) == 6
    assert oai.batches.created == 0, "the lost batch's requests were not batched again"
    [lost] = stored_batches(tmp_path / "c.sqlite")
    assert lost.state == "collected" and lost.failed == 6


def test_a_listwise_audit_runs_through_the_batch_api(oai: OpenAIServer, tmp_path: Path) -> None:
    """The fourth kind's requests go through the same batch path: one batch, no direct
    request, every answer read (the loopback server's answers are counted as unread)."""
    result = CliRunner().invoke(
        cli,
        ["run", "resume-screening", "--method", "listwise", "--model", "openai/test-model",
         "--base-url", oai.base_url, "--api-key-env", KEY_ENV, "--jobs", "software-engineer",
         "--names-per-group", "2", "--pools", "2", "--runs-dir", str(tmp_path / "runs"),
         "--batch", "--batch-poll", "0.01", "--no-report"],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert oai.batches.created == 1 and direct_requests(oai) == 0
    run_dir = Path(result.stdout.strip().splitlines()[-1].removeprefix("run: "))
    manifest = read_manifest(run_dir)
    assert manifest.kind == "listwise" and manifest.counts.batched == 2 * 8
    counts = json.loads((run_dir / "metrics.json").read_text())["counts"]
    assert counts["failed"] == 0 and counts["ranked"] + counts["unread"] == 16
