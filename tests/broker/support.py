"""A tiny blocking Kafka-protocol client for broker tests (the protocol codec's client side)."""

from __future__ import annotations

import socket

from replog.log import decode_records, encode_batch, iter_batches
from replog.protocol import FrameReader, RequestHeader, decode_response, encode_request
from replog.protocol import messages as m
from replog.protocol.schema import Message

VERSIONS = {
    m.PRODUCE.api_key: 9,
    m.FETCH.api_key: 12,
    m.METADATA.api_key: 12,
    m.LIST_OFFSETS.api_key: 7,
    m.API_VERSIONS.api_key: 3,
    m.INIT_PRODUCER_ID.api_key: 4,
}


class Client:
    """One blocking connection to a broker."""

    def __init__(self, address: str, timeout_s: float = 10.0) -> None:
        host, port = address.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout_s)
        self.frames = FrameReader()
        self.cid = 0
        #: api key of each request sent, by correlation id (``receive_any``)
        self.sent: dict[int, int] = {}
        self.unread: list[bytes] = []

    def close(self) -> None:
        self.sock.close()

    def send(self, body: Message) -> int:
        self.cid += 1
        key = body.API.api_key
        header = RequestHeader(
            api_key=key, api_version=VERSIONS[key], correlation_id=self.cid, client_id="test"
        )
        self.sock.sendall(encode_request(header, body))
        self.sent[self.cid] = key
        return self.cid

    def receive_any(self) -> tuple[int, Message]:
        """The next response frame, whichever request it answers: (correlation id, body)."""
        while not self.unread:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("closed")
            self.unread.extend(bytes(f) for f in self.frames.feed(data))
        frame = self.unread.pop(0)
        cid = int.from_bytes(frame[:4], "big")
        key = self.sent.pop(cid)
        _, body = decode_response(frame, api_key=key, api_version=VERSIONS[key])
        return cid, body

    def receive(self, api_key: int) -> Message:
        while True:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("closed")
            frames = self.frames.feed(data)
            if frames:
                _, body = decode_response(frames[0], api_key=api_key, api_version=VERSIONS[api_key])
                return body

    def call(self, body: Message) -> Message:
        self.send(body)
        return self.receive(body.API.api_key)


def produce_request(
    topic: str, values: list[bytes], acks: int, partition: int = 0
) -> m.ProduceRequest:
    batch = encode_batch(values, base_timestamp=1_000)
    return m.ProduceRequest(
        acks=acks,
        timeout_ms=10_000,
        topic_data=[
            m.TopicProduceData(
                name=topic,
                partition_data=[m.PartitionProduceData(index=partition, records=batch)],
            )
        ],
    )


def produce(client: Client, topic: str, values: list[bytes], acks: int) -> tuple[int, int]:
    """(error_code, base_offset)."""
    response = client.call(produce_request(topic, values, acks))
    assert isinstance(response, m.ProduceResponse)
    part = response.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def fetch_values(
    client: Client, topic: str, offset: int = 0, *, max_wait_ms: int = 0, min_bytes: int = 1
) -> tuple[int, int, list[bytes]]:
    """(error_code, high_watermark, values)."""
    request = m.FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            m.FetchTopic(
                topic=topic,
                partitions=[
                    m.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    response = client.call(request)
    assert isinstance(response, m.FetchResponse)
    part = response.responses[0].partitions[0]
    values: list[bytes] = []
    data = bytes(part.records or b"")
    for position, _ in iter_batches(data):
        values.extend(r.value or b"" for r in decode_records(data, position))
    return part.error_code, part.high_watermark, values


def metadata(client: Client) -> m.MetadataResponse:
    response = client.call(m.MetadataRequest(topics=None))
    assert isinstance(response, m.MetadataResponse)
    return response
