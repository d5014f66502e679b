"""Client pieces that need no broker: partitioner, accumulator, fetch slicing, metadata cache,
version negotiation, error classification."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Iterator

import crc32c
import pytest

from replog.client.accumulator import PendingRecord, RecordAccumulator, RecordMetadata
from replog.client.admin import delete_topics_request
from replog.client.connection import ClusterClient, negotiate_versions, parse_bootstrap
from replog.client.errors import (
    BrokerResponseError,
    BufferFullError,
    ConnectionLostError,
    RetriableBrokerResponseError,
    error_for_code,
)
from replog.client.fetching import ConsumerRecord, slice_columns, slice_records
from replog.client.metadata import MetadataCache
from replog.client.partitioner import DefaultPartitioner, murmur2, partition_for_key
from replog.client.producer import ProducerConfig, classify
from replog.errors import ErrorCode, InvalidConfigError, NotLeaderError, RequestTimeoutError
from replog.log import decode_records, encode_batch, iter_batches, stamp_batch
from replog.log.encoding import encode_varint
from replog.protocol import APIS
from replog.protocol.messages import (
    DELETE_TOPICS,
    ApiVersion,
    DeleteTopicsRequest,
    MetadataResponse,
    MetadataResponseBroker,
    MetadataResponsePartition,
    MetadataResponseTopic,
)

# Kafka's own vectors: clients/src/test/java/org/apache/kafka/common/utils/UtilsTest.java,
# testMurmur2 (looked up in Kafka's source; murmur2 there returns a signed int).
KAFKA_MURMUR2_VECTORS = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


@pytest.mark.parametrize(("data", "expected"), sorted(KAFKA_MURMUR2_VECTORS.items()))
def test_murmur2_matches_kafka_utils_test_vectors(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_partition_for_key_is_to_positive_murmur2_mod_count() -> None:
    # toPositive(-973932308) = -973932308 & 0x7fffffff = 1173551340; % 7 = 1173551340 % 7
    assert partition_for_key(b"21", 7) == (-973932308 & 0x7FFFFFFF) % 7
    assert all(0 <= partition_for_key(bytes([i]), 3) < 3 for i in range(256))
    with pytest.raises(ValueError):
        partition_for_key(b"k", 0)


def test_keyless_records_go_round_robin_per_topic() -> None:
    partitioner = DefaultPartitioner()
    assert [partitioner.partition("a", None, 3) for _ in range(5)] == [0, 1, 2, 0, 1]
    assert partitioner.partition("b", None, 3) == 0
    assert partitioner.partition("a", b"21", 7) == partition_for_key(b"21", 7)


# -- accumulator ---------------------------------------------------------------------------


@pytest.fixture
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


def _record(loop: asyncio.AbstractEventLoop, value: bytes, ts: int = 1) -> PendingRecord:
    future: asyncio.Future[RecordMetadata] = loop.create_future()
    return PendingRecord(key=None, value=value, headers=(), timestamp_ms=ts, future=future)


def test_batch_waits_for_linger_then_becomes_ready(loop: asyncio.AbstractEventLoop) -> None:
    acc = RecordAccumulator(batch_bytes_max=10_000, linger_ms=50, buffer_bytes_max=100_000)
    acc.append(("t", 0), _record(loop, b"x"), now_ms=1000)
    assert acc.ready(1049) == []
    assert acc.next_ready_delay_ms(1010) == 40
    assert acc.ready(1050) == [("t", 0)]


def test_full_batch_is_ready_before_linger(loop: asyncio.AbstractEventLoop) -> None:
    acc = RecordAccumulator(batch_bytes_max=200, linger_ms=10_000, buffer_bytes_max=100_000)
    for _ in range(5):
        acc.append(("t", 0), _record(loop, b"v" * 50), now_ms=0)
    assert acc.ready(1) == [("t", 0)]
    first = acc.pop(("t", 0))
    assert first.size_bytes <= 200 and len(first.records) >= 1
    assert sum(len(b.records) for b in acc.batches()) + len(first.records) == 5


def test_flush_makes_every_batch_ready(loop: asyncio.AbstractEventLoop) -> None:
    acc = RecordAccumulator(batch_bytes_max=10_000, linger_ms=10_000, buffer_bytes_max=100_000)
    acc.append(("t", 1), _record(loop, b"x"), now_ms=0)
    acc.flushing = True
    assert acc.ready(0) == [("t", 1)]
    assert acc.next_ready_delay_ms(0) == 0


def test_buffer_full_raises_and_release_frees(loop: asyncio.AbstractEventLoop) -> None:
    acc = RecordAccumulator(batch_bytes_max=10_000, linger_ms=0, buffer_bytes_max=100)
    acc.append(("t", 0), _record(loop, b"a" * 60), now_ms=0)
    with pytest.raises(BufferFullError) as info:
        acc.append(("t", 0), _record(loop, b"b" * 60), now_ms=0)
    assert info.value.buffer_bytes_max == 100
    acc.release(acc.pop(("t", 0)))
    assert acc.buffered_bytes == 0
    acc.append(("t", 0), _record(loop, b"b" * 60), now_ms=0)


def test_retried_batch_goes_first_after_backoff_and_takes_no_new_records(
    loop: asyncio.AbstractEventLoop,
) -> None:
    acc = RecordAccumulator(batch_bytes_max=10_000, linger_ms=0, buffer_bytes_max=100_000)
    acc.append(("t", 0), _record(loop, b"1"), now_ms=0)
    batch = acc.pop(("t", 0))
    acc.append(("t", 0), _record(loop, b"2"), now_ms=0)
    acc.reenqueue(batch, retry_at_ms=100)
    acc.append(("t", 0), _record(loop, b"3"), now_ms=0)
    assert acc.ready(99) == []  # the head is the retried batch, still backing off
    assert acc.next_ready_delay_ms(50) == 50
    assert acc.pop(("t", 0)) is batch and batch.attempts == 1 and len(batch.records) == 1
    assert acc.next_ready_delay_ms(50, blocked={("t", 0)}) is None


def test_batch_complete_assigns_consecutive_offsets(loop: asyncio.AbstractEventLoop) -> None:
    acc = RecordAccumulator(batch_bytes_max=10_000, linger_ms=0, buffer_bytes_max=100_000)
    for ts in (5, 6, 7):
        acc.append(("t", 2), _record(loop, b"v", ts), now_ms=0)
    batch = acc.pop(("t", 2))
    assert batch.encode()  # a valid v2 batch
    batch.complete(base_offset=40)
    got = [r.future.result() for r in batch.records]
    assert [(m.offset, m.timestamp) for m in got] == [(40, 5), (41, 6), (42, 7)]


# -- retry classification -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "retriable"),
    [
        (ErrorCode.NOT_LEADER_OR_FOLLOWER, True),
        (ErrorCode.NOT_ENOUGH_REPLICAS, True),
        (ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, True),
        (ErrorCode.REQUEST_TIMED_OUT, True),
        (ErrorCode.FENCED_LEADER_EPOCH, True),
        (ErrorCode.MESSAGE_TOO_LARGE, False),
        (ErrorCode.INVALID_REQUIRED_ACKS, False),
        (ErrorCode.CORRUPT_MESSAGE, True),
        (ErrorCode.INVALID_RECORD, False),
        (9999, False),
    ],
)
def test_only_retriable_codes_are_retried(code: int, retriable: bool) -> None:
    error = error_for_code(code)
    assert classify(error) is retriable


def test_error_types_for_codes() -> None:
    assert isinstance(error_for_code(ErrorCode.NOT_LEADER_OR_FOLLOWER), NotLeaderError)
    assert isinstance(error_for_code(ErrorCode.REQUEST_TIMED_OUT), RequestTimeoutError)
    assert isinstance(error_for_code(ErrorCode.NOT_ENOUGH_REPLICAS), RetriableBrokerResponseError)
    err = error_for_code(ErrorCode.TOPIC_ALREADY_EXISTS, "t")
    assert isinstance(err, BrokerResponseError) and err.error_code == 36
    assert err.code is ErrorCode.TOPIC_ALREADY_EXISTS  # ReplogError.code agrees
    assert error_for_code(9999).code is ErrorCode.UNKNOWN_SERVER_ERROR  # not a Kafka code
    assert classify(ConnectionLostError("gone"))
    assert not classify(ValueError("bad record"))


# -- metadata, negotiation, bootstrap -----------------------------------------------------


def _metadata(leader: int, epoch: int, partitions: int = 1) -> MetadataResponse:
    return MetadataResponse(
        brokers=[MetadataResponseBroker(node_id=i, host="h", port=9000 + i) for i in (1, 2, 3)],
        controller_id=1,
        topics=[
            MetadataResponseTopic(
                error_code=0,
                name="t",
                partitions=[
                    MetadataResponsePartition(
                        error_code=0,
                        partition_index=p,
                        leader_id=leader,
                        leader_epoch=epoch,
                        replica_nodes=[1, 2, 3],
                        isr_nodes=[1, 2, 3],
                    )
                    for p in range(partitions)
                ],
            )
        ],
    )


def test_metadata_cache_applies_newer_epochs_and_ignores_older() -> None:
    cache = MetadataCache()
    assert cache.needs_refresh(0, 1000)
    cache.update(_metadata(leader=1, epoch=3), 0, all_topics=True)
    assert cache.leader_for("t", 0) == 1 and not cache.stale
    cache.update(_metadata(leader=2, epoch=2), 10, all_topics=True)  # a lagging broker
    assert cache.leader_for("t", 0) == 1 and cache.leader_epoch_for("t", 0) == 3
    cache.update(_metadata(leader=3, epoch=4), 20, all_topics=True)
    assert cache.leader_for("t", 0) == 3


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NETWORK_EXCEPTION,
    ],
)
def test_metadata_goes_stale_on_leader_errors(code: int) -> None:
    cache = MetadataCache()
    cache.update(_metadata(leader=1, epoch=0), 0, all_topics=True)
    assert cache.on_partition_error(code) and cache.needs_refresh(1, 1000)


def test_metadata_refresh_by_age_and_topic_removal() -> None:
    cache = MetadataCache()
    cache.update(_metadata(leader=1, epoch=0, partitions=2), 0, all_topics=True)
    assert not cache.on_partition_error(ErrorCode.MESSAGE_TOO_LARGE)
    assert not cache.needs_refresh(999, 1000) and cache.needs_refresh(1000, 1000)
    cache.update(MetadataResponse(brokers=[], topics=[]), 5, all_topics=True)
    assert cache.partition_count("t") is None and ("t", 1) not in cache.partitions


def test_negotiation_picks_highest_common_version() -> None:
    fetch, produce = APIS[1].info, APIS[0].info
    chosen = negotiate_versions(
        [
            ApiVersion(api_key=1, min_version=0, max_version=99),
            ApiVersion(api_key=0, min_version=0, max_version=5),
            ApiVersion(api_key=2, min_version=50, max_version=60),  # nothing in common
            ApiVersion(api_key=999, min_version=0, max_version=3),  # unknown to replog
        ]
    )
    assert chosen == {1: fetch.max_version, 0: min(5, produce.max_version)}


@pytest.mark.parametrize("version", range(DELETE_TOPICS.min_version, DELETE_TOPICS.max_version + 1))
def test_delete_topics_request_names_the_topics_in_every_version(version: int) -> None:
    request = delete_topics_request(["a", "b"], 5_000, version)
    decoded = DeleteTopicsRequest.decode(request.encode(version), version)
    names = decoded.topic_names + [t.name for t in decoded.topics if t.name is not None]
    assert names == ["a", "b"] and decoded.timeout_ms == 5_000


def test_bootstrap_parsing_and_backoff() -> None:
    assert parse_bootstrap("127.0.0.1:1, h:2") == [("127.0.0.1", 1), ("h", 2)]
    with pytest.raises(InvalidConfigError):
        parse_bootstrap("nohost")
    with pytest.raises(InvalidConfigError):
        parse_bootstrap(" , ")
    client = ClusterClient([("h", 1)], reconnect_backoff_ms=50, reconnect_backoff_max_ms=300)
    assert [client.backoff_ms(n) for n in range(6)] == [0, 50, 100, 200, 300, 300]


def test_connecting_to_a_closed_port_fails_with_backoff() -> None:
    async def go() -> None:
        client = ClusterClient([("127.0.0.1", 1)], reconnect_backoff_ms=10)
        with pytest.raises(ConnectionLostError):
            await client.refresh_metadata()
        with pytest.raises(ConnectionLostError):
            await client.refresh_metadata()
        await client.close()

    asyncio.run(go())


# -- fetch slicing --------------------------------------------------------------------------


def _batch(base: int, values: list[bytes], epoch: int = 0) -> bytes:
    buf = bytearray(encode_batch(values, base_timestamp=100))
    stamp_batch(buf, 0, base, epoch)
    return bytes(buf)


def test_slice_skips_records_below_the_fetch_offset() -> None:
    buf = _batch(10, [b"a", b"b", b"c", b"d"]) + _batch(14, [b"e"], epoch=2)
    got = slice_records("t", 0, buf, 12, 100)
    assert [(r.offset, r.value) for r in got.records] == [(12, b"c"), (13, b"d"), (14, b"e")]
    assert got.next_offset == 15 and got.last_epoch == 2


def test_slice_ignores_a_partial_trailing_batch() -> None:
    whole = _batch(0, [b"a", b"b"])
    partial = _batch(2, [b"c", b"d"])[:-5]
    got = slice_records("t", 0, whole + partial, 0, 100)
    assert [r.offset for r in got.records] == [0, 1] and got.next_offset == 2


def test_slice_stops_at_max_records_mid_batch() -> None:
    buf = _batch(0, [b"a", b"b", b"c"]) + _batch(3, [b"d"])
    got = slice_records("t", 0, buf, 0, 2)
    assert [r.offset for r in got.records] == [0, 1] and got.next_offset == 2
    rest = slice_records("t", 0, buf, got.next_offset, 10)
    assert [r.offset for r in rest.records] == [2, 3] and rest.next_offset == 4


def test_slice_of_nothing_keeps_the_position() -> None:
    got = slice_records("t", 0, b"", 7, 10)
    assert got.records == [] and got.next_offset == 7 and got.last_epoch == -1


def _reference_slice(
    buf: bytes, fetch_offset: int, records_max: int
) -> tuple[list[ConsumerRecord], int, int]:
    """slice_records as it was before the columnar path (record by record)."""
    out: list[ConsumerRecord] = []
    next_offset, last_epoch = fetch_offset, -1
    for position, header in iter_batches(buf):
        if header.next_offset <= next_offset:
            continue
        if len(out) >= records_max:
            break
        if header.is_control:
            next_offset, last_epoch = header.next_offset, header.partition_leader_epoch
            continue
        batch_done = True
        for record in decode_records(buf, position):
            if record.offset < next_offset:
                continue
            if len(out) >= records_max:
                batch_done = False
                break
            out.append(
                ConsumerRecord(
                    topic="t",
                    partition=3,
                    offset=record.offset,
                    timestamp=record.timestamp,
                    key=record.key,
                    value=record.value,
                    headers=record.headers,
                    leader_epoch=header.partition_leader_epoch,
                )
            )
            next_offset, last_epoch = record.offset + 1, header.partition_leader_epoch
        if batch_done:
            next_offset = max(next_offset, header.next_offset)
            last_epoch = header.partition_leader_epoch
    return out, next_offset, last_epoch


def _gappy_batch(base: int, offsets: list[int], epoch: int) -> bytes:
    """A batch whose records sit at ``offsets`` (compaction gaps), by patching offset deltas."""
    headers = [[("h", b"%d" % o)] for o in offsets]  # one-byte-wide deltas keep lengths equal
    buf = bytearray(encode_batch([b"v"] * len(offsets), headers=headers, base_timestamp=9))
    section = bytearray(buf[61:])
    cursor = 0
    for index, offset in enumerate(offsets):
        size = section[cursor] >> 1
        delta_at = cursor + 3
        assert section[delta_at] == encode_varint(index)[0]
        section[delta_at] = encode_varint(offset - base)[0]
        cursor += 1 + size
    patched = bytearray(buf[:61]) + section
    struct.pack_into(">i", patched, 23, offsets[-1] - base)
    struct.pack_into(">I", patched, 17, crc32c.crc32c(bytes(patched[21:])))
    stamp_batch(patched, 0, base, epoch)
    return bytes(patched)


LOG = (
    _batch(0, [b"a", b"b", b"c"])
    + _gappy_batch(3, [3, 5, 9, 10], epoch=1)
    + _batch(11, [b"%d" % i for i in range(70)], epoch=2)
    + _batch(81, [b"z"], epoch=2)
)


@pytest.mark.parametrize("fetch_offset", [0, 2, 3, 4, 6, 10, 11, 50, 81, 82])
@pytest.mark.parametrize("records_max", [1, 2, 5, 40, 1000])
def test_slice_columns_gives_what_record_by_record_slicing_gave(
    fetch_offset: int, records_max: int
) -> None:
    expected, next_offset, last_epoch = _reference_slice(LOG, fetch_offset, records_max)
    got = slice_columns("t", 3, LOG, fetch_offset, records_max)
    assert [r for piece in got.slices for r in piece.records()] == expected
    assert got.count == len(expected)
    assert (got.next_offset, got.last_epoch) == (next_offset, last_epoch)
    sliced = slice_records("t", 3, LOG, fetch_offset, records_max)
    assert sliced.records == expected
    assert (sliced.next_offset, sliced.last_epoch) == (next_offset, last_epoch)


def test_consumer_poll_columns_returns_what_poll_returns() -> None:
    from replog.broker.shell.cluster import Cluster
    from replog.client import Admin, Consumer, Producer

    with Cluster.local(1) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics("cols", 2, 1)
        with Producer(cluster.bootstrap, acks=1, linger_ms=5) as producer:
            for i in range(600):
                key = None if i % 3 else b"k%d" % i
                headers = [("h", b"x")] if i % 50 == 0 else None
                producer.send("cols", b"v" * (i % 7), key=key, headers=headers, partition=i % 2)
            producer.flush()
        tps = [("cols", 0), ("cols", 1)]
        polled: list[list[ConsumerRecord]] = []
        with Consumer(cluster.bootstrap, auto_reset="earliest") as consumer:
            consumer.assign(tps)
            consumer.seek(tps[1], 17)
            while sum(map(len, polled)) < 583:
                polled.append(consumer.poll(1000, max_records=128))
            positions = [consumer.position(tp) for tp in tps]
        by_columns: list[list[ConsumerRecord]] = []
        with Consumer(cluster.bootstrap, auto_reset="earliest") as consumer:
            consumer.assign(tps)
            consumer.seek(tps[1], 17)
            while sum(map(len, by_columns)) < 583:
                slices = consumer.poll_columns(1000, max_records=128)
                assert all(len(piece) for piece in slices)
                by_columns.append([r for piece in slices for r in piece.records()])
            assert [consumer.position(tp) for tp in tps] == positions
    for tp in tps:  # partitions may interleave differently; each one's records may not
        mine = [r for c in polled for r in c if (r.topic, r.partition) == tp]
        assert [r for c in by_columns for r in c if (r.topic, r.partition) == tp] == mine
    assert len({r.offset for r in mine}) == 283 and mine[0].offset == 17
    assert all(len(chunk) <= 128 for chunk in by_columns)


@pytest.mark.parametrize(
    ("name", "codec"),
    [("none", 0), ("gzip", 1), ("snappy", 2), ("lz4", 3), ("zstd", 4), ("GZIP", 1)],
)
def test_producer_takes_kafkas_compression_names_and_stamps_the_codec_id(
    name: str, codec: int, loop: asyncio.AbstractEventLoop
) -> None:
    config = ProducerConfig(compression=name)
    accumulator = RecordAccumulator(batch_bytes_max=1000, linger_ms=5, buffer_bytes_max=10_000)
    batch = accumulator.append(("t", 0), _record(loop, b"x" * 100), now_ms=0)
    raw = batch.encode(config.compression)
    attributes = struct.unpack_from(">h", raw, 21)[0]
    assert attributes & 0x07 == codec
    assert [r.value for r in decode_records(raw)] == [b"x" * 100]


def test_producer_refuses_an_unknown_compression_name_at_construction() -> None:
    with pytest.raises(ValueError, match="compression must be one of none, gzip"):
        ProducerConfig(compression="brotli")
