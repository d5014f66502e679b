"""The consumer protocol's subscription and assignment (v0-v3): round trips, agreement with
kafka-python's codec built from Kafka's JSON schemas, and how newer versions are read."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import ConsumerProtocolAssignment as KpAssignment
from kafka.protocol.consumer import ConsumerProtocolSubscription as KpSubscription

from replog.errors import ProtocolError
from replog.protocol.consumer_protocol import (
    ConsumerProtocolAssignment,
    ConsumerProtocolSubscription,
    TopicPartitions,
    subscribed_topics,
)

from .kafka_python_bridge import kafka_python_plain, replog_plain
from .strategies import struct_strategy

VERSIONS = [0, 1, 2, 3]


def _kp_topic_partitions(cls: Any, items: list[TopicPartitions], version: int) -> list[Any]:
    return [cls(version=version, topic=i.topic, partitions=list(i.partitions)) for i in items]


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_subscription_round_trips_and_agrees_with_kafka_python(
    version: int, data: st.DataObject
) -> None:
    subscription = data.draw(struct_strategy(ConsumerProtocolSubscription, version, False))
    ours = subscription.encode(version)
    assert ConsumerProtocolSubscription.decode(ours) == subscription

    theirs_decoded = KpSubscription.decode(ours)
    assert theirs_decoded.version == version
    plain = kafka_python_plain(theirs_decoded, KpSubscription._struct, version)
    assert plain == replog_plain(subscription, version)

    kwargs: dict[str, Any] = {"topics": subscription.topics, "user_data": subscription.user_data}
    if version >= 1:
        kwargs["owned_partitions"] = _kp_topic_partitions(
            KpSubscription.TopicPartition, subscription.owned_partitions, version
        )
    if version >= 2:
        kwargs["generation_id"] = subscription.generation_id
    if version >= 3:
        kwargs["rack_id"] = subscription.rack_id
    theirs = bytes(KpSubscription(version=version, **kwargs).encode())
    assert theirs == ours


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None)
@given(data=st.data())
def test_assignment_round_trips_and_agrees_with_kafka_python(
    version: int, data: st.DataObject
) -> None:
    assignment = data.draw(struct_strategy(ConsumerProtocolAssignment, version, False))
    ours = assignment.encode(version)
    assert ConsumerProtocolAssignment.decode(ours) == assignment

    theirs_decoded = KpAssignment.decode(ours)
    plain = kafka_python_plain(theirs_decoded, KpAssignment._struct, version)
    assert plain == replog_plain(assignment, version)
    theirs = KpAssignment(
        version=version,
        assigned_partitions=_kp_topic_partitions(
            KpAssignment.TopicPartition, assignment.assigned_partitions, version
        ),
        user_data=assignment.user_data,
    ).encode()
    assert bytes(theirs) == ours


def test_a_newer_subscription_version_is_read_as_the_highest_known() -> None:
    v3 = ConsumerProtocolSubscription(topics=["t"], generation_id=4, rack_id="rack-a").encode(3)
    v9 = b"\x00\x09" + v3[2:] + b"fields from the future"
    assert ConsumerProtocolSubscription.decode(v9) == ConsumerProtocolSubscription.decode(v3)


def test_trailing_bytes_after_a_known_version_are_an_error() -> None:
    v1 = ConsumerProtocolSubscription(topics=["t"]).encode(1)
    with pytest.raises(ProtocolError):
        ConsumerProtocolSubscription.decode(v1 + b"junk")


def test_decoded_user_data_is_bytes_not_a_view_of_the_input() -> None:
    data = ConsumerProtocolAssignment(user_data=b"state").encode()
    assert type(ConsumerProtocolAssignment.decode(bytearray(data)).user_data) is bytes


def test_subscribed_topics_reads_the_v0_prefix_of_every_version() -> None:
    subscription = ConsumerProtocolSubscription(
        topics=["a", "b"],
        owned_partitions=[TopicPartitions(topic="a", partitions=[0])],
        rack_id="r",
    )
    for version in VERSIONS:
        assert subscribed_topics(subscription.encode(version)) == {"a", "b"}
    assert subscribed_topics(b"\x00") is None
    assert subscribed_topics(b"not a subscription at all") is None
