"""The broker driver as the request handlers see it: ``DriverServices`` is the narrow
``RequestServices`` interface (``replog.broker.driver.requests.base``) over a ``BrokerDriver``
-- the metadata image, the replicas, produce and fetch, configs, groups and log dirs -- so a
handler never holds the whole driver."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from replog.broker.config import BrokerConfig
from replog.broker.driver.change_feed import ChangeFeed
from replog.broker.driver.fetch_session_cache import FetchSessionCache
from replog.broker.driver.group_host import GroupHost
from replog.broker.driver.log_dirs import LogDirReport, describe_log_dirs
from replog.broker.driver.ports import DriverCore
from replog.broker.driver.producer_ids import ProducerIdManager
from replog.broker.driver.replication_throttle import ReplicationThrottle
from replog.broker.driver.requests import GroupServices
from replog.broker.driver.requests.metadata import CLUSTER_ID as DEFAULT_CLUSTER_ID
from replog.errors import ErrorCode
from replog.isr import (
    Partition,
    PartitionFetchRequest,
    PartitionFetchResponse,
    ProduceResult,
)
from replog.log.log import Log
from replog.metadata.types import (
    BrokerInfo,
    ControllerInfo,
    CreateTopic,
    PartitionState,
    TopicAssignment,
    TopicConfigs,
)
from replog.topics import TopicPartition

__all__ = ["DriverServices"]


class ServicesHost(DriverCore, Protocol):
    """What the request services use of the driver (see ``replog.broker.driver.ports``)."""

    @property
    def producer_ids(self) -> ProducerIdManager:
        """Producer id blocks."""

    @property
    def replication_throttle(self) -> ReplicationThrottle:
        """The replication quotas."""

    @property
    def fetch_session_cache(self) -> FetchSessionCache:
        """The incremental fetch sessions this broker keeps."""

    @property
    def groups(self) -> GroupHost:
        """The group coordinator host."""

    def create_topic_in_background(self, payload: CreateTopic) -> bool:
        """Queue an automatic topic creation."""


class DriverServices:
    """The driver as request handlers see it (``RequestServices``)."""

    def __init__(self, driver: ServicesHost) -> None:
        self._driver = driver

    @property
    def broker_id(self) -> int:
        return self._driver.broker_id

    @property
    def broker_epoch(self) -> int:
        return self._driver.incarnation_epoch

    @property
    def config(self) -> BrokerConfig:
        return self._driver.config

    @property
    def producer_ids(self) -> ProducerIdManager:
        return self._driver.producer_ids

    @property
    def brokers(self) -> Mapping[int, BrokerInfo]:
        return self._driver.rm.image.brokers

    @property
    def topics(self) -> Mapping[str, TopicAssignment]:
        return self._driver.rm.image.topics

    @property
    def states(self) -> Mapping[TopicPartition, PartitionState]:
        return self._driver.rm.image.partitions

    @property
    def cluster_id(self) -> str:
        return self._driver.rm.image.cluster_id or DEFAULT_CLUSTER_ID

    @property
    def controller(self) -> ControllerInfo | None:
        return self._driver.rm.image.controller

    @property
    def groups(self) -> GroupServices:
        return self._driver.groups

    def partition(self, topic: str, partition: int) -> Partition | None:
        return self._driver.rm.partition(topic, partition)

    def log(self, topic: str, partition: int) -> Log | None:
        return self._driver.rm.log(topic, partition)

    def produce(
        self, topic: str, partition: int, batch: bytes, acks: int, now_ms: int, *, timeout_ms: int
    ) -> tuple[int, ProduceResult | None]:
        return self._driver.rm.produce(topic, partition, batch, acks, now_ms, timeout_ms=timeout_ms)

    def fetch(
        self, topic: str, partition: int, request: PartitionFetchRequest, now_ms: int
    ) -> PartitionFetchResponse:
        return self._driver.rm.fetch(topic, partition, request, now_ms)

    @property
    def broker_configs(self) -> Mapping[int, TopicConfigs]:
        return self._driver.rm.image.broker_configs

    @property
    def partition_changes(self) -> ChangeFeed:
        return self._driver.rm.changes

    @property
    def replication_throttle(self) -> ReplicationThrottle:
        return self._driver.replication_throttle

    @property
    def fetch_session_cache(self) -> FetchSessionCache:
        return self._driver.fetch_session_cache

    def create_topic_in_background(self, payload: CreateTopic) -> bool:
        return self._driver.create_topic_in_background(payload)

    def delete_records(
        self, topic: str, partition: int, offset: int, now_ms: int
    ) -> tuple[ErrorCode, int]:
        return self._driver.rm.admin.delete_records(topic, partition, offset, now_ms)

    def low_watermark(self, topic: str, partition: int) -> int:
        return self._driver.rm.admin.low_watermark(topic, partition)

    def log_dirs(self, wanted: set[TopicPartition] | None) -> list[LogDirReport]:
        return describe_log_dirs(self._driver.log_manager, wanted)
