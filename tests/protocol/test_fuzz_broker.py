"""Mutated requests against one real broker: every request the schemas describe (Produce aside,
whose record batches are checked elsewhere), encoded at each version and then damaged (bit
flips, truncations, extreme ints and lengths), from a fixed seed for a few seconds. Oracles:
each input is answered or its connection closed within a bound, nothing logs a traceback, the
broker's memory stays bounded, and a normal produce and read with kafka-python still work."""

from __future__ import annotations

import logging
import random
import resource
import socket
import time

import pytest

from replog.broker.shell.cluster import Cluster
from replog.errors import ProtocolError
from replog.protocol import RequestHeader, encode_request
from replog.protocol.exceptions import EncodeError

from .strategies import all_versions

pytestmark = [pytest.mark.system, pytest.mark.timeout(120)]

SEED = 23
INPUTS_S = 4.0
#: how long one input may go without an answer or a close
ANSWER_S_MAX = 10.0
RSS_GROWTH_BYTES_MAX = 200 * 1024 * 1024
EXTREMES = [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\x7f\xff"]


def _seeds() -> list[bytes]:
    frames = []
    for cls, version in all_versions():
        if cls.API.api_key == 0:
            continue
        try:
            header = RequestHeader(
                api_key=cls.API.api_key, api_version=version, correlation_id=7, client_id="fz"
            )
            frames.append(encode_request(header, cls())[4:])
        except (EncodeError, ProtocolError, ValueError):  # defaults that do not encode: no seed
            continue
    return frames


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    data = bytearray(frame)
    kind = rng.randrange(3)
    if kind == 0 and len(data) > 8:
        for _ in range(rng.randint(1, 4)):
            data[rng.randrange(8, len(data))] ^= 1 << rng.randrange(8)
    elif kind == 1:
        data = data[: rng.randrange(len(data) + 1)]
    elif len(data) > 12:
        value = rng.choice(EXTREMES)
        at = rng.randrange(8, len(data) - len(value) + 1)
        data[at : at + len(value)] = value
    return len(data).to_bytes(4, "big") + bytes(data)


def _answered_or_closed(address: tuple[str, int], frame: bytes) -> None:
    with socket.create_connection(address, timeout=ANSWER_S_MAX) as sock:
        sock.sendall(frame)
        try:
            sock.recv(1 << 16)  # an answer's first bytes, or b"" for a close
        except ConnectionResetError:
            pass


def _rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * resource.getpagesize()


def test_a_broker_survives_mutated_requests(caplog: pytest.LogCaptureFixture) -> None:
    rng = random.Random(SEED)
    seeds = _seeds()
    assert len(seeds) > 50
    with caplog.at_level(logging.INFO), Cluster.local(1) as cluster:
        host, port = cluster.bootstrap.split(",")[0].rsplit(":", 1)
        address = (host, int(port))
        rss_before = _rss_bytes()
        stop = time.monotonic() + INPUTS_S
        sent = 0
        while time.monotonic() < stop:
            _answered_or_closed(address, _mutate(rng, rng.choice(seeds)))
            sent += 1
        assert sent > 0
        assert _rss_bytes() - rss_before < RSS_GROWTH_BYTES_MAX
        _produce_and_read(cluster.bootstrap)
    tracebacks = [r.getMessage() for r in caplog.records if r.exc_info is not None]
    assert tracebacks == []


def _produce_and_read(bootstrap: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    producer.send("after-fuzz", b"still serving").get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, auto_offset_reset="earliest", consumer_timeout_ms=10_000
    )
    consumer.assign([TopicPartition("after-fuzz", 0)])
    values = [r.value for r in consumer]
    consumer.close()
    assert values == [b"still serving"]
