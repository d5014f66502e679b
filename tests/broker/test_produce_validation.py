"""A client's batch with a valid CRC but records no reader could decode is refused on the wire
(CORRUPT_MESSAGE, or INVALID_RECORD for a control batch) and nothing of it is stored: sent as
raw Produce requests to a real broker, then read back with kafka-python, which sees only the
good records, and whose ListOffsets by timestamp is answered normally."""

from __future__ import annotations

import socket

import pytest
from kafka import KafkaConsumer, TopicPartition

from replog import Admin, Cluster
from replog.errors import ErrorCode
from replog.log import encode_batch
from replog.log.compression import Compression
from replog.protocol import FrameReader, RequestHeader, decode_response, encode_request
from replog.protocol import messages as m
from tests.log.test_produce_validation import _GOOD_BODY, _batch, _record
from tests.waiting import eventually

pytestmark = pytest.mark.system

TOPIC = "validated"
_VERSION = 7
_GARBAGE = b"\x00\x01 not compressed at all \xff" * 4


def _malformed() -> dict[str, tuple[bytes, ErrorCode]]:
    from replog.log.encoding import encode_varint
    from replog.log.records import CONTROL_BIT

    overlong = b"\x00" + b"\x80" * 10 + b"\x00" + _GOOD_BODY[2:]
    cases = {
        "record longer than batch": encode_varint(len(_GOOD_BODY) + 50) + _GOOD_BODY,
        "overlong varint": _record(overlong),
        "negative header count": _record(_GOOD_BODY[:-1] + encode_varint(-3)),
    }
    out = {name: (_batch(section, 1), ErrorCode.CORRUPT_MESSAGE) for name, section in cases.items()}
    for codec in (Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD):
        out[f"not {codec.name}"] = (_batch(_GARBAGE, 1, int(codec)), ErrorCode.CORRUPT_MESSAGE)
    for codec_id in (5, 6, 7):
        out[f"codec {codec_id}"] = (
            _batch(_record(_GOOD_BODY), 1, codec_id),
            ErrorCode.CORRUPT_MESSAGE,
        )
    out["control"] = (_batch(_record(_GOOD_BODY), 1, CONTROL_BIT), ErrorCode.INVALID_RECORD)
    return out


def _produce(sock: socket.socket, correlation_id: int, records: bytes) -> int:
    request = m.ProduceRequest(
        transactional_id=None,
        acks=1,
        timeout_ms=10_000,
        topic_data=[
            m.TopicProduceData(
                name=TOPIC, partition_data=[m.PartitionProduceData(index=0, records=records)]
            )
        ],
    )
    header = RequestHeader(
        api_key=m.PRODUCE.api_key, api_version=_VERSION, correlation_id=correlation_id
    )
    sock.sendall(encode_request(header, request))
    reader = FrameReader()
    while True:
        chunk = sock.recv(65536)
        assert chunk, "broker closed the connection"
        frames = reader.feed(chunk)
        if frames:
            break
    got_id, body = decode_response(frames[0], api_key=m.PRODUCE.api_key, api_version=_VERSION)
    assert got_id == correlation_id
    assert isinstance(body, m.ProduceResponse)
    return body.responses[0].partition_responses[0].error_code


def test_malformed_batches_are_refused_and_the_partition_stays_readable() -> None:
    with Cluster.local(1) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics(TOPIC, 1, 1)
        host, port = cluster.bootstrap.split(",")[0].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=30) as sock:
            good = encode_batch([b"before"], base_timestamp=1_000)
            eventually(lambda: _produce(sock, 1, good) == 0, what="the first good produce")
            for n, (name, (batch, code)) in enumerate(_malformed().items()):
                assert _produce(sock, 10 + n, batch) == code, name
            after = encode_batch([b"after"], base_timestamp=2_000)
            assert _produce(sock, 99, after) == 0

        consumer = KafkaConsumer(bootstrap_servers=cluster.bootstrap, enable_auto_commit=False)
        try:
            tp = TopicPartition(TOPIC, 0)
            consumer.assign([tp])
            consumer.seek_to_beginning(tp)
            got: list[bytes] = []

            def read() -> list[bytes]:
                for records in consumer.poll(timeout_ms=200).values():
                    got.extend(r.value for r in records)
                return got

            assert eventually(read, what="both good records", done=lambda v: len(v) >= 2) == [
                b"before",
                b"after",
            ]
            found = consumer.offsets_for_times({tp: 1_500})[tp]
            assert found is not None and found.offset == 1
        finally:
            consumer.close()
