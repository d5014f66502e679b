"""Stored values written before ``BrokerInfo.clean_shutdown`` existed still decode."""

from __future__ import annotations

import json

from replog.coord import codec
from replog.coord.zookeeper.znodes import decode_broker, encode_broker
from replog.metadata.types import (
    ALL_BROKERS,
    AlterConfigs,
    BrokerConfigsChanged,
    BrokerInfo,
    ConfigChange,
    ConfigOperation,
    ConfigResourceType,
    ElectLeader,
)


def test_broker_info_without_clean_shutdown_decodes_as_clean() -> None:
    stored = {"@": "BrokerInfo", "broker_id": 1, "incarnation_epoch": 7, "host": "h", "port": 1}
    info = codec.loads(json.dumps(stored))
    assert info == BrokerInfo(broker_id=1, incarnation_epoch=7, host="h", port=1)
    assert info.clean_shutdown


def test_clean_shutdown_round_trips_through_both_codecs() -> None:
    info = BrokerInfo(broker_id=2, incarnation_epoch=9, host="h", port=2, clean_shutdown=False)
    assert codec.loads(codec.dumps(info)) == info
    assert decode_broker(2, encode_broker(info)) == info


def test_zookeeper_broker_node_without_clean_shutdown_decodes_as_clean() -> None:
    old = {"version": 5, "host": "h", "port": 3, "broker_epoch": 4, "fenced": False}
    assert decode_broker(3, json.dumps(old).encode()).clean_shutdown


def test_config_and_election_payloads_round_trip() -> None:
    values = [
        AlterConfigs(
            resource_type=ConfigResourceType.TOPIC,
            resource_name="t",
            changes=(
                ConfigChange(operation=ConfigOperation.SET, key="retention.ms", value="1"),
                ConfigChange(operation=ConfigOperation.DELETE, key="segment.bytes"),
            ),
            replace=True,
        ),
        AlterConfigs(resource_type=ConfigResourceType.BROKER, resource_name=""),
        ElectLeader(topic="t", partition=3, unclean=True),
        BrokerConfigsChanged(seq=4, broker_id=ALL_BROKERS, configs={"k": "v"}),
    ]
    for value in values:
        assert codec.loads(codec.dumps(value)) == value
