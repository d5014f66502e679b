"""A broker never runs on half alive: a step of its shell that raises is either retried (a tick)
or fatal -- logged CRITICAL, the broker killed, its listener closed so clients fail over, and
the process exit status 3. Before, a metadata application that raised ended its task and left
the feed marked busy for good: every CreateTopics/DeleteTopics after it timed out, and a tick
that raised ended the tick loop with the requests waiting on it."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from typing import Any

import pytest

from replog.broker import BrokerConfig, BrokerState, Cluster
from replog.broker import __main__ as broker_main
from replog.broker.driver import BrokerDriver
from replog.broker.driver.metadata_channel import MetadataChannel
from replog.broker.shell.supervision import Retries, run_fatal, supervised
from replog.errors import ErrorCode
from replog.groups import core as groups_core
from replog.metadata.types import ChangeBatch
from replog.protocol import messages as m
from tests.broker.support import VERSIONS, Client, metadata
from tests.broker.test_cluster import wait_for
from tests.inject import raise_once

pytestmark = pytest.mark.timeout(60)


# -- the helpers ----------------------------------------------------------------------------------


def test_a_supervised_task_that_raises_is_logged_critical_and_reported_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    deaths: list[tuple[str, BaseException]] = []

    async def work() -> None:
        raise RuntimeError("boom")

    async def main() -> None:
        assert await supervised("the feed", work(), lambda n, e: deaths.append((n, e))) is None

    asyncio.run(main())
    assert [(name, str(exc)) for name, exc in deaths] == [("the feed", "boom")]
    (record,) = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert "the feed failed" in record.getMessage() and record.exc_info is not None


def test_a_supervised_task_that_is_cancelled_is_no_death() -> None:
    deaths: list[str] = []

    async def main() -> None:
        task = asyncio.ensure_future(
            supervised("sleeper", asyncio.sleep(10), lambda n, e: deaths.append(n))
        )
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    run_fatal("fine", lambda: None, lambda n, e: deaths.append(n))
    assert deaths == []


def test_retries_go_on_until_failures_max_come_in_a_row() -> None:
    retries = Retries("a tick", failures_max=3)
    assert retries.failed(RuntimeError("1")) and retries.failed(RuntimeError("2"))
    retries.succeeded()
    assert retries.failed(RuntimeError("3")) and retries.failed(RuntimeError("4"))
    assert not retries.failed(RuntimeError("5"))


# -- a broker -------------------------------------------------------------------------------------


@pytest.fixture
def cluster(tmp_path: object) -> Iterator[Cluster]:
    c = Cluster.local(1, base_dir=str(tmp_path))
    try:
        yield c
    finally:
        c.close()


def test_a_metadata_application_that_raises_stops_the_broker_loudly(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broker = cluster.brokers[1]
    monkeypatch.setitem(VERSIONS, m.CREATE_TOPICS.api_key, 5)
    client = Client(broker.address, timeout_s=10)
    real_apply = MetadataChannel._apply

    def apply(self: MetadataChannel, batch: ChangeBatch) -> None:
        if batch.changes:
            raise RuntimeError("injected into the metadata application")
        real_apply(self, batch)

    monkeypatch.setattr(MetadataChannel, "_apply", apply)
    topic = m.CreatableTopic(name="t", num_partitions=1, replication_factor=1)
    started = time.monotonic()
    client.send(m.CreateTopicsRequest(topics=[topic], timeout_ms=30_000))
    # Not half alive: the connection ends (the broker is gone) instead of the request
    # waiting out its 30 s timeout behind a feed that is never read again.
    with pytest.raises(ConnectionError):
        client.receive(m.CREATE_TOPICS.api_key)
    assert time.monotonic() - started < 10
    wait_for(lambda: broker.failure is not None and broker.state is BrokerState.OFFLINE)
    assert "injected into the metadata application" in str(broker.failure)
    critical = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert critical and critical[0].exc_info is not None
    with pytest.raises(OSError):
        Client(broker.address, timeout_s=2)  # the listener is closed: clients fail over


def test_a_tick_that_raises_is_logged_and_the_tick_loop_goes_on(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    broker = cluster.brokers[1]
    ticked: list[int] = []
    real_tick = BrokerDriver.on_tick

    def counted(self: BrokerDriver, now_ms: int) -> None:
        ticked.append(now_ms)
        real_tick(self, now_ms)

    monkeypatch.setattr(BrokerDriver, "on_tick", raise_once(counted))
    wait_for(lambda: "a tick failed (1 in a row" in caplog.text)
    wait_for(lambda: len(ticked) > 3)  # the loop went on: later ticks run
    assert broker.failure is None and broker.state is BrokerState.ONLINE
    client = Client(broker.address)
    assert metadata(client).brokers  # and it serves
    client.close()


def test_a_broker_process_whose_ticks_keep_failing_exits_3(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    config = BrokerConfig(
        broker_id=1,
        log_dirs=(f"{tmp_path}/b1",),
        coordinator=f"memory://supervision-{id(tmp_path)}",
        tick_interval_ms=5,
    )

    def break_ticks(broker: Any) -> None:
        def failing(self: BrokerDriver, now_ms: int) -> None:
            raise RuntimeError("a fault that does not heal")

        monkeypatch.setattr(BrokerDriver, "on_tick", failing)

    status = asyncio.run(broker_main.serve(config, on_serving=break_ticks))
    assert status == 3
    out, err = capsys.readouterr()
    assert '"event": "failed"' in out and "a fault that does not heal" in err


# -- the wire fuzzer's case, end to end ---------------------------------------------------------


def _commit(offset: int) -> m.OffsetCommitRequest:
    partition = m.OffsetCommitRequestPartition(
        partition_index=0, committed_offset=offset, committed_metadata=""
    )
    return m.OffsetCommitRequest(
        group_id="g",
        generation_id_or_member_epoch=-1,
        member_id="",
        retention_time_ms=-1,
        topics=[m.OffsetCommitRequestTopic(name="t", partitions=[partition])],
    )


def _commit_error(client: Client, offset: int) -> int:
    response = client.call(_commit(offset))
    assert isinstance(response, m.OffsetCommitResponse)
    return response.topics[0].partitions[0].error_code


def test_a_commit_that_raises_partway_fails_alone_and_topics_still_come_and_go(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fuzzer's sequence: a commit failing inside the coordinator, then more commits, then
    DeleteTopics (which tombstones the group's offsets of the deleted topic)."""
    for api, version in (
        (m.CREATE_TOPICS, 5),
        (m.DELETE_TOPICS, 4),
        (m.FIND_COORDINATOR, 2),
        (m.OFFSET_COMMIT, 4),
    ):
        monkeypatch.setitem(VERSIONS, api.api_key, version)
    cluster = Cluster.local(
        1,
        base_dir=str(tmp_path),
        offsets_topic_replication_factor=1,
        groups={"offsets_topic_partitions": 1},
    )
    try:
        broker = cluster.brokers[1]
        client = Client(broker.address)
        topic = m.CreatableTopic(name="t", num_partitions=1, replication_factor=1)
        created = client.call(m.CreateTopicsRequest(topics=[topic], timeout_ms=10_000))
        assert created.topics[0].error_code == 0  # type: ignore[attr-defined]

        def coordinator_found() -> bool:
            found = client.call(m.FindCoordinatorRequest(key="g", key_type=0))
            return found.error_code == 0  # type: ignore[attr-defined]

        wait_for(coordinator_found)
        wait_for(lambda: _commit_error(client, 1) == 0)  # the offsets partition is loaded
        monkeypatch.setattr(groups_core, "encode_record", raise_once(groups_core.encode_record))
        assert _commit_error(client, 2) == ErrorCode.UNKNOWN_SERVER_ERROR
        assert _commit_error(client, 3) == 0  # before: the shard's write ordering was broken
        deleted = client.call(m.DeleteTopicsRequest(topic_names=["t"], timeout_ms=10_000))
        assert deleted.responses[0].error_code == 0  # type: ignore[attr-defined]
        again = m.CreatableTopic(name="u", num_partitions=1, replication_factor=1)
        created = client.call(m.CreateTopicsRequest(topics=[again], timeout_ms=10_000))
        assert created.topics[0].error_code == 0  # type: ignore[attr-defined]
        assert broker.failure is None and broker.state is BrokerState.ONLINE
        client.close()
    finally:
        cluster.close()
