"""The ``__cluster_metadata_image`` file format: a round trip, and every damaged or foreign file
read as no cache at all, with a warning (never trusted, never an error)."""

from __future__ import annotations

import logging
import struct
from pathlib import Path

import pytest

from replog.broker.driver.image_cache import (
    IMAGE_CACHE_FILE,
    MalformedImageCacheError,
    decode_image,
    encode_image,
    read_image,
    write_image,
)
from replog.log.fs import REAL_FS
from replog.metadata.types import (
    ALL_BROKERS,
    BrokerInfo,
    ControllerInfo,
    MetadataSnapshot,
    PartitionState,
    TopicAssignment,
)

IMAGE = MetadataSnapshot(
    seq=42,
    brokers={
        1: BrokerInfo(broker_id=1, incarnation_epoch=7, host="h1", port=9092, rack="r1"),
        2: BrokerInfo(broker_id=2, incarnation_epoch=9, host="h2", port=9093, fenced=True),
    },
    topics={
        "t": TopicAssignment(
            topic="t", topic_id="ab" * 16, replicas=[[1, 2], [2, 1]], configs={"a": "b"}
        )
    },
    partitions={
        ("t", 0): PartitionState(replicas=(1, 2), leader=1, leader_epoch=3, isr=(1, 2)),
        ("t", 1): PartitionState(replicas=(2, 1), leader=-1, leader_epoch=4, isr=(), elr=(2,)),
    },
    controller=ControllerInfo(controller_id=1, controller_epoch=5, incarnation_epoch=7),
    controller_epoch=5,
    broker_configs={ALL_BROKERS: (("log.retention.ms", "5"),)},
    cluster_id="MkU3OEVBNTcwNTJENDM2Qk",
)


def test_round_trip(tmp_path: Path) -> None:
    assert decode_image(encode_image(IMAGE)) == IMAGE
    write_image(REAL_FS, str(tmp_path), IMAGE)
    assert read_image(REAL_FS, str(tmp_path)) == IMAGE
    assert sorted(p.name for p in tmp_path.iterdir()) == [IMAGE_CACHE_FILE]  # no .tmp left


def test_no_file_is_no_cache(tmp_path: Path) -> None:
    assert read_image(REAL_FS, str(tmp_path)) is None


def test_an_image_without_a_cluster_id_is_not_cached() -> None:
    with pytest.raises(ValueError):
        encode_image(MetadataSnapshot(seq=1, brokers={}, topics={}, partitions={},
                                      controller=None, controller_epoch=0))  # fmt: skip


def _damaged(data: bytes, how: str) -> bytes:
    if how == "crc":
        return data[:-3] + bytes([data[-3] ^ 0x01]) + data[-2:]  # one payload bit
    if how == "truncated":
        return data[: len(data) // 2]
    if how == "short header":
        return data[:7]
    if how == "empty":
        return b""
    if how == "version":
        return data[:4] + struct.pack(">H", 2) + data[6:]
    if how == "magic":
        return b"RLMJ" + data[4:]  # a near miss of the cache's magic b"RLMI"
    if how == "trailing":
        return data + b"\0"
    raise AssertionError(how)


@pytest.mark.parametrize(
    "how", ["crc", "truncated", "short header", "empty", "version", "magic", "trailing"]
)
def test_a_damaged_or_foreign_file_is_ignored_with_a_warning(
    tmp_path: Path, how: str, caplog: pytest.LogCaptureFixture
) -> None:
    data = _damaged(encode_image(IMAGE), how)
    with pytest.raises(MalformedImageCacheError):
        decode_image(data)
    (tmp_path / IMAGE_CACHE_FILE).write_bytes(data)
    with caplog.at_level(logging.WARNING, logger="replog.broker.driver.image_cache"):
        assert read_image(REAL_FS, str(tmp_path)) is None
    assert "ignoring the metadata image cache" in caplog.text


def test_a_payload_with_a_valid_crc_but_wrong_content_is_not_trusted(tmp_path: Path) -> None:
    import crc32c

    payload = b'{"seq": -1}'
    header = struct.pack(">4sHIQ", b"RLMI", 1, crc32c.crc32c(payload), len(payload))
    with pytest.raises(MalformedImageCacheError):
        decode_image(header + payload)
    payload = b"[1, 2]"
    header = struct.pack(">4sHIQ", b"RLMI", 1, crc32c.crc32c(payload), len(payload))
    with pytest.raises(MalformedImageCacheError):
        decode_image(header + payload)


def test_a_backend_without_a_cluster_id_is_never_resumed_from() -> None:
    """memory:// (like ZooKeeper and etcd) has no store identity: a cached image, even one
    written against it by hand, is refused before any feed read."""
    from replog.broker.driver.image_keeper import catch_up
    from replog.coord import connect
    from replog.coord.registry import drop_memory_store

    store = connect("memory://image-cache-no-id")
    try:
        assert store.cluster_id() is None
        why = catch_up(store, IMAGE)
        assert isinstance(why, str) and "cluster id is None" in why
    finally:
        store.close()
        drop_memory_store("image-cache-no-id")
