"""A broker on ``raft://`` restarts from its cached metadata image: it follows the feed from
the cached cursor instead of reading a full snapshot, and ends up with the image a snapshot
gives. A recreated quorum (another cluster id), a damaged file and a cursor the quorum no
longer has all make it read a snapshot instead."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from replog import Admin, Cluster
from replog.broker.driver.image_cache import IMAGE_CACHE_FILE, read_image
from replog.broker.shell.broker import Broker
from replog.log.fs import REAL_FS
from replog.metadata.image import MetadataImage
from replog.quorum.client import RaftCoordinator
from replog.quorum.local import LocalQuorum
from tests.broker.test_cluster import wait_for

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

QUORUM = {"election_timeout_ms": 150, "fetch_timeout_ms": 1_000, "request_timeout_ms": 1_000}


@pytest.fixture
def quorum(tmp_path: Path) -> Iterator[LocalQuorum]:
    with LocalQuorum.start(1, str(tmp_path / "quorum"), **QUORUM) as q:
        q.wait_for_leader()
        yield q


def _cluster(url: str, base_dir: Path) -> Cluster:
    return Cluster.local(
        2,
        base_dir=str(base_dir),
        coordinator=url,
        metadata_image_cache_interval_ms=100,
        session_timeout_ms=1_500,
        heartbeat_interval_ms=300,
    )


def _reads(cluster: Cluster) -> int:
    coordinator = cluster.coordinator
    assert isinstance(coordinator, RaftCoordinator)
    return coordinator.snapshot_reads


def _keeper_counts(cluster: Cluster, broker_id: int) -> tuple[int, int]:
    keeper = cluster.brokers[broker_id].driver.metadata.keeper  # type: ignore[union-attr]
    return keeper.snapshot_loads, keeper.cache_resumes


def _cached_topics(log_dir: str) -> set[str]:
    cached = read_image(REAL_FS, log_dir)
    return set() if cached is None else set(cached.topics)


def _create(cluster: Cluster, *topics: str, replication_factor: int = 2) -> None:
    with Admin(f"127.0.0.1:{cluster.brokers[2].port}") as admin:  # broker 2 always runs
        for topic in topics:
            admin.create_topics(topic, 2, replication_factor)


def _image_matches_a_snapshot(cluster: Cluster, broker_id: int) -> bool:
    """The broker's image (what it acts on) equals a fresh snapshot of the quorum."""

    def compare(broker: Broker) -> bool:
        rm = broker.driver.rm  # type: ignore[union-attr]
        channel = broker.driver.metadata  # type: ignore[union-attr]
        snap = cluster.coordinator.snapshot()
        return (
            channel.image.seq == snap.seq
            and rm.image.brokers == dict(snap.brokers)
            and {t: a.topic_id for t, a in rm.image.topics.items()}
            == {t: a.topic_id for t, a in snap.topics.items()}
            and rm.image.partitions == dict(snap.partitions)
            and rm.image.controller == snap.controller
            and rm.image.broker_configs == dict(snap.broker_configs)
            and rm.image.cluster_id == snap.cluster_id
            and channel.keeper.image is not None
            and channel.keeper.image.snapshot() == snap
        )

    return bool(cluster.call(compare, cluster.brokers[broker_id]))


def _settled(cluster: Cluster, broker_id: int) -> None:
    wait_for(lambda: _image_matches_a_snapshot(cluster, broker_id), timeout_s=20)


def test_a_restarted_broker_resumes_from_its_cached_image(
    quorum: LocalQuorum, tmp_path: Path
) -> None:
    with _cluster(quorum.url, tmp_path / "brokers") as cluster:
        _create(cluster, "a", "b")
        _settled(cluster, 1)
        cluster.stop(1)  # a clean shutdown writes the cache
        cached = read_image(REAL_FS, cluster.configs[1].log_dirs[0])
        assert cached is not None and cached.cluster_id == quorum_cluster_id(cluster)
        _create(cluster, "c", replication_factor=1)  # the cache is behind: the feed brings the rest

        reads = _reads(cluster)
        cluster.start(1)
        assert _reads(cluster) == reads  # no full snapshot was read
        assert _keeper_counts(cluster, 1) == (0, 1)
        _settled(cluster, 1)
        assert _keeper_counts(cluster, 1) == (0, 1)  # no feed gap reloaded one since
        brokers = cluster.call(lambda: cluster.brokers[1].driver.rm.image.partitions)  # type: ignore[union-attr]
        assert {tp[0] for tp in brokers} == {"a", "b", "c"}


def test_a_running_broker_keeps_the_cache_up_to_date(quorum: LocalQuorum, tmp_path: Path) -> None:
    with _cluster(quorum.url, tmp_path / "brokers") as cluster:
        log_dir = cluster.configs[1].log_dirs[0]
        _create(cluster, "a")
        wait_for(lambda: "a" in _cached_topics(log_dir))
        _create(cluster, "b")
        wait_for(lambda: "b" in _cached_topics(log_dir))
        _settled(cluster, 1)
        keeper = cluster.brokers[1].driver.metadata.keeper  # type: ignore[union-attr]

        def cached_is_current() -> bool:
            # the image the broker acts on now: a batch applied after a first look (an ISR
            # change) makes the keeper write the newer one, never the one seen before it
            current = cluster.call(lambda: keeper.image.snapshot())  # type: ignore[union-attr]
            return bool(read_image(REAL_FS, log_dir) == current)

        wait_for(cached_is_current)


def test_each_feed_batch_is_applied_once_per_broker(
    quorum: LocalQuorum, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A broker applies each feed batch to one image, once: the image its replica manager, its
    handlers and its cache writer all read (the cache writer kept a second copy and applied
    every batch to it again)."""
    applied: list[tuple[int, int, int]] = []  # (image, seq before, seq after)
    original = MetadataImage.apply

    def counting(image: MetadataImage, changes: Any, next_seq: int) -> Any:
        before = image.seq
        delta = original(image, changes, next_seq)
        applied.append((id(image), before, image.seq))
        return delta

    monkeypatch.setattr(MetadataImage, "apply", counting)
    with _cluster(quorum.url, tmp_path / "brokers") as cluster:
        _create(cluster, "a", "b")
        _settled(cluster, 1)
        _settled(cluster, 2)
        images = cluster.call(
            lambda: {b: cluster.brokers[b].driver.metadata.image for b in (1, 2)}  # type: ignore[union-attr]
        )
        for broker_id, image in images.items():
            assert cluster.call(lambda b=broker_id: cluster.brokers[b].driver.rm.image) is image  # type: ignore[misc, union-attr]
        assert {key for key, _, _ in applied} == {id(i) for i in images.values()}
        for image in images.values():
            ranges = [(before, after) for key, before, after in list(applied) if key == id(image)]
            assert len(ranges) == image.batches_applied > 0
            # each batch starts where the previous ended: none is applied twice
            assert all(ranges[i][0] == ranges[i - 1][1] for i in range(1, len(ranges)))


def quorum_cluster_id(cluster: Cluster) -> str | None:
    return cluster.coordinator.cluster_id()


def test_a_recreated_quorum_is_not_resumed_from(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    brokers_dir = tmp_path / "brokers"
    with LocalQuorum.start(1, str(tmp_path / "q1"), **QUORUM) as first:
        first.wait_for_leader()
        with _cluster(first.url, brokers_dir) as cluster:
            _create(cluster, "old-a", "old-b", "old-c")
            _settled(cluster, 1)
            old_id = quorum_cluster_id(cluster)
    cached = read_image(REAL_FS, str(brokers_dir / "broker-1"))
    assert cached is not None and cached.cluster_id == old_id
    with LocalQuorum.start(1, str(tmp_path / "q2"), **QUORUM) as second:
        second.wait_for_leader()
        with caplog.at_level(logging.WARNING), _cluster(second.url, brokers_dir) as cluster:
            new_id = quorum_cluster_id(cluster)
            assert new_id is not None and new_id != old_id
            assert _keeper_counts(cluster, 1) == (1, 0)  # a full snapshot, not the cache
            _create(cluster, "new")
            _settled(cluster, 1)
            topics = cluster.call(lambda: set(cluster.brokers[1].driver.rm.image.topics))  # type: ignore[union-attr]
            assert topics == {"new"}  # nothing of the old store's image
        assert "cluster id" in caplog.text


def test_a_damaged_cache_file_is_ignored(
    quorum: LocalQuorum, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _cluster(quorum.url, tmp_path / "brokers") as cluster:
        _create(cluster, "a")
        _settled(cluster, 1)
        cluster.stop(1)
        path = Path(cluster.configs[1].log_dirs[0]) / IMAGE_CACHE_FILE
        data = bytearray(path.read_bytes())
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
        reads = _reads(cluster)
        with caplog.at_level(logging.WARNING):
            cluster.start(1)
        assert _reads(cluster) > reads  # (a new controller may read one too)
        assert _keeper_counts(cluster, 1) == (1, 0)
        assert "CRC mismatch" in caplog.text
        _settled(cluster, 1)


def test_a_cursor_the_quorum_no_longer_has_reads_a_snapshot(
    quorum: LocalQuorum, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with _cluster(quorum.url, tmp_path / "brokers") as cluster:
        _create(cluster, "a")
        _settled(cluster, 1)
        cluster.stop(1)
        _create(cluster, "b", replication_factor=1)
        head = cluster.coordinator.snapshot().seq
        cluster.coordinator.trim_history(head)  # the cached cursor is below the history
        reads = _reads(cluster)
        with caplog.at_level(logging.WARNING):
            cluster.start(1)
        assert _reads(cluster) > reads  # (a new controller may read one too)
        assert _keeper_counts(cluster, 1) == (1, 0)
        assert "no longer has its cursor" in caplog.text
        _settled(cluster, 1)
