"""Every (api, version) a replog broker advertises, spoken by an independent codec.

For each pair in ``supported_api_versions()`` a request about real things (a topic with records,
its partition, its leader epoch, topics to create, delete and grow) is built and encoded with
kafka-python 3's protocol classes, which are generated from Kafka's JSON schemas and share no
code with ``replog.protocol``. It goes to a live broker of a 3-broker cluster over a plain
socket; the answer must carry the request's correlation id, decode with kafka-python's class
for that version, re-encode to exactly the bytes received (so the decoder consumed the whole
frame and nothing is missing), and say the right things (offsets, leaders, record counts).
"""

from __future__ import annotations

import time
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

from replog import Admin, Cluster
from replog.protocol import APIS, supported_api_versions
from tests.waiting import NeverHappened, eventually

from .sweep_groups import GROUP_SCENARIOS, exchange, find_coordinator_port

with warnings.catch_warnings():
    # kafka-python loads its schemas with the deprecated importlib.resources API
    warnings.filterwarnings("ignore", ".*(read_text|open_text) is deprecated", DeprecationWarning)
    from kafka import KafkaProducer
    from kafka.protocol.admin.cluster import (
        DescribeClusterRequest,
        DescribeClusterResponse,
        DescribeLogDirsRequest,
        DescribeLogDirsResponse,
    )
    from kafka.protocol.admin.configs import (
        AlterConfigsRequest,
        AlterConfigsResponse,
        DescribeConfigsRequest,
        DescribeConfigsResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
    )
    from kafka.protocol.admin.topics import (
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreateTopicsRequest,
        CreateTopicsResponse,
        DeleteRecordsRequest,
        DeleteRecordsResponse,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
        ElectLeadersRequest,
        ElectLeadersResponse,
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
    )
    from kafka.protocol.consumer.fetch import FetchRequest, FetchResponse
    from kafka.protocol.consumer.offsets import (
        ListOffsetsRequest,
        ListOffsetsResponse,
        OffsetForLeaderEpochRequest,
        OffsetForLeaderEpochResponse,
    )
    from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse
    from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
    from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
    from kafka.protocol.producer.transaction import InitProducerIdRequest, InitProducerIdResponse
    from kafka.record import MemoryRecords
    from kafka.record.default_records import DefaultRecordBatchBuilder

pytestmark = [pytest.mark.system, pytest.mark.timeout(180)]

TOPIC = "sweep"
PRODUCE_TOPIC = "sweep-produce"
CONFIG_TOPIC = "sweep-configs"
RECORDS = 5
BASE_MS = 1_700_000_000_000
RESOURCE_TOPIC = 2
CASES = [
    (v.api_key, version)
    for v in supported_api_versions()
    for version in range(v.min_version, v.max_version + 1)
]


@attrs.frozen
class Context:
    """The cluster and what the fixture put in it."""

    cluster: Cluster
    leader_ports: dict[str, int]  # topic -> the port of its partition 0's leader
    leader_epoch: int  # of TOPIC's partition 0
    broker_ids: tuple[int, ...]
    brokers: dict[int, int]  # id -> port
    group_port: int  # the port of the sweep groups' coordinator
    topic: str = TOPIC

    @property
    def leader_port(self) -> int:
        return self.leader_ports[TOPIC]


def topic_for(purpose: str, version: int) -> str:
    return f"sweep-{purpose}-v{version}"


@pytest.fixture(scope="module")
def ctx() -> Iterator[Context]:
    with Cluster.local(3, groups={"initial_rebalance_delay_ms": 0}) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics(TOPIC, 1, 3, {"min.insync.replicas": "2"})
            admin.create_topics(PRODUCE_TOPIC, 1, 3)
            admin.create_topics(CONFIG_TOPIC, 1, 3)
            for api, purpose in ((20, "delete"), (37, "grow")):
                info = APIS[api].info
                for version in range(info.min_version, info.max_version + 1):
                    admin.create_topics(topic_for(purpose, version), 1, 3)
            described = admin.describe_topics([TOPIC, PRODUCE_TOPIC])
        ports = {broker_id: broker.port for broker_id, broker in cluster.brokers.items()}
        producer = KafkaProducer(
            bootstrap_servers=cluster.bootstrap, acks="all", enable_idempotence=False
        )
        try:
            for i in range(RECORDS):  # one batch each, timestamps rising
                producer.send(TOPIC, b"v%d" % i, partition=0, timestamp_ms=BASE_MS + i)
                producer.flush(timeout=30)
        finally:
            producer.close(timeout=10)
        yield Context(
            cluster=cluster,
            leader_ports={
                name: cluster.brokers[topic.partitions[0].leader].port
                for name, topic in described.items()
            },
            leader_epoch=described[TOPIC].partitions[0].leader_epoch,
            broker_ids=tuple(sorted(cluster.brokers)),
            brokers=ports,
            group_port=find_coordinator_port(ports[min(ports)], ports),
        )


def current(ctx: Context) -> Context:
    """``ctx`` with the leaders, leader epoch and group coordinator as they are now. The
    cluster lives for the whole module: on a loaded machine a broker's session can lapse and
    leadership move between cases, which would fail every later case aimed at the old leader
    (NOT_LEADER_OR_FOLLOWER) rather than say anything about the codec."""
    deadline = time.monotonic() + 30
    with Admin(ctx.cluster.bootstrap) as admin:
        while True:
            described = admin.describe_topics([TOPIC, PRODUCE_TOPIC])
            leaders = {name: topic.partitions[0].leader for name, topic in described.items()}
            if all(leader in ctx.brokers for leader in leaders.values()):
                break
            assert time.monotonic() < deadline, f"no leaders for the sweep's topics: {leaders}"
            time.sleep(0.1)
    return attrs.evolve(
        ctx,
        leader_ports={name: ctx.brokers[leader] for name, leader in leaders.items()},
        leader_epoch=described[TOPIC].partitions[0].leader_epoch,
        group_port=find_coordinator_port(ctx.brokers[min(ctx.brokers)], ctx.brokers),
    )


# -- one scenario per API: (build the request, check the answer) -------------------------------


def produce(ctx: Context, version: int) -> Any:
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=False,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        batch_size=1 << 20,
    )
    builder.append(0, timestamp=BASE_MS, key=None, value=b"sweep-v%d" % version, headers=[])
    data = ProduceRequest.TopicProduceData.PartitionProduceData(
        index=0, records=bytes(builder.build())
    )
    topic = ProduceRequest.TopicProduceData(name=PRODUCE_TOPIC, partition_data=[data])
    return ProduceRequest(acks=-1, timeout_ms=10_000, topic_data=[topic])


def check_produce(ctx: Context, version: int, response: Any) -> None:
    (topic,) = response.responses
    (part,) = topic.partition_responses
    assert (topic.name, part.index, part.error_code) == (PRODUCE_TOPIC, 0, 0)
    # The record is there, at the offset the answer gave.
    request = fetch_from(PRODUCE_TOPIC, part.base_offset)
    fetched = exchange(ctx.leader_ports[PRODUCE_TOPIC], request, FetchResponse, 12, cid=7)
    assert fetched_values(fetched)[0] == b"sweep-v%d" % version


def fetch_from(topic: str, offset: int) -> Any:
    part = FetchRequest.FetchTopic.FetchPartition(
        partition=0, fetch_offset=offset, partition_max_bytes=1 << 20
    )
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        topics=[FetchRequest.FetchTopic(topic=topic, partitions=[part])],
        forgotten_topics_data=[],
    )


def fetched_values(response: Any) -> list[bytes]:
    """The record values of the (one) partition in a Fetch answer, decoded by kafka-python."""
    (topic,) = response.responses
    (part,) = topic.partitions
    assert part.error_code == 0
    records = MemoryRecords(part.records)
    values = []
    while (batch := records.next_batch()) is not None:
        values += [record.value for record in batch]
    return values


def fetch(ctx: Context, version: int) -> Any:
    return fetch_from(TOPIC, 0)


def check_fetch(ctx: Context, version: int, response: Any) -> None:
    (topic,) = response.responses
    (part,) = topic.partitions
    assert (topic.topic, part.partition_index, part.error_code) == (TOPIC, 0, 0)
    assert part.high_watermark == RECORDS
    assert fetched_values(response) == [b"v%d" % i for i in range(RECORDS)]


def list_offsets(ctx: Context, version: int) -> Any:
    specs = [-1, -2] + ([-3] if version >= 7 else [])
    partitions = [
        ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(partition_index=0, timestamp=ts)
        for ts in specs
    ]
    # One query per request partition: Kafka answers each entry, duplicates included.
    return ListOffsetsRequest(
        replica_id=-1,
        isolation_level=0,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(name=TOPIC, partitions=[p]) for p in partitions
        ],
    )


def check_list_offsets(ctx: Context, version: int, response: Any) -> None:
    answers = [
        (t.name, p.partition_index, p.error_code, p.offset)
        for t in response.topics
        for p in t.partitions
    ]
    expected = [(TOPIC, 0, 0, RECORDS), (TOPIC, 0, 0, 0)]
    if version >= 7:
        expected.append((TOPIC, 0, 0, RECORDS - 1))  # the record with the largest timestamp
    assert answers == expected
    epochs = {p.leader_epoch for t in response.topics for p in t.partitions}
    assert epochs == ({ctx.leader_epoch} if version >= 4 else {-1})


def metadata(ctx: Context, version: int) -> Any:
    return MetadataRequest(
        topics=[MetadataRequest.MetadataRequestTopic(name=TOPIC)],
        allow_auto_topic_creation=False,
    )


def check_metadata(ctx: Context, version: int, response: Any) -> None:
    assert sorted(b.node_id for b in response.brokers) == list(ctx.broker_ids)
    (topic,) = response.topics
    (part,) = topic.partitions
    assert (topic.name, topic.error_code, part.partition_index, part.error_code) == (TOPIC, 0, 0, 0)
    leader_port = {b.node_id: b.port for b in response.brokers}[part.leader_id]
    assert leader_port == ctx.leader_port
    assert sorted(part.replica_nodes) == list(ctx.broker_ids)


def api_versions(ctx: Context, version: int) -> Any:
    return ApiVersionsRequest(client_software_name="sweep", client_software_version="1.0")


def check_api_versions(ctx: Context, version: int, response: Any) -> None:
    assert response.error_code == 0
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [
        (v.api_key, v.min_version, v.max_version) for v in supported_api_versions()
    ]


def create_topics(ctx: Context, version: int) -> Any:
    config = CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(
        name="min.insync.replicas", value="2"
    )
    topic = CreateTopicsRequest.CreatableTopic(
        name=topic_for("create", version),
        num_partitions=2,
        replication_factor=3,
        assignments=[],
        configs=[config],
    )
    return CreateTopicsRequest(topics=[topic], timeout_ms=20_000, validate_only=False)


def check_create_topics(ctx: Context, version: int, response: Any) -> None:
    (topic,) = response.topics
    assert (topic.name, topic.error_code) == (topic_for("create", version), 0)
    with Admin(ctx.cluster.bootstrap) as admin:
        assert len(admin.describe_topics([topic.name])[topic.name].partitions) == 2
        assert admin.describe_configs([topic.name])[topic.name]["min.insync.replicas"] == "2"


def delete_topics(ctx: Context, version: int) -> Any:
    name = topic_for("delete", version)
    if version >= 6:
        state = DeleteTopicsRequest.DeleteTopicState(name=name, topic_id=uuid.UUID(int=0))
        return DeleteTopicsRequest(topics=[state], timeout_ms=20_000)
    return DeleteTopicsRequest(topic_names=[name], timeout_ms=20_000)


def check_delete_topics(ctx: Context, version: int, response: Any) -> None:
    (result,) = response.responses
    assert (result.name, result.error_code) == (topic_for("delete", version), 0)
    with Admin(ctx.cluster.bootstrap) as admin:
        assert wait_for(lambda: result.name not in admin.list_topics())


def offset_for_leader_epoch(ctx: Context, version: int) -> Any:
    part = OffsetForLeaderEpochRequest.OffsetForLeaderTopic.OffsetForLeaderPartition(
        partition=0, current_leader_epoch=ctx.leader_epoch, leader_epoch=ctx.leader_epoch
    )
    topic = OffsetForLeaderEpochRequest.OffsetForLeaderTopic(topic=TOPIC, partitions=[part])
    return OffsetForLeaderEpochRequest(replica_id=-1, topics=[topic])


def check_offset_for_leader_epoch(ctx: Context, version: int, response: Any) -> None:
    (topic,) = response.topics
    (part,) = topic.partitions
    assert (topic.topic, part.partition, part.error_code) == (TOPIC, 0, 0)
    assert (part.leader_epoch, part.end_offset) == (ctx.leader_epoch, RECORDS)


def create_partitions(ctx: Context, version: int) -> Any:
    topic = CreatePartitionsRequest.CreatePartitionsTopic(
        name=topic_for("grow", version), count=3, assignments=None
    )
    return CreatePartitionsRequest(topics=[topic], timeout_ms=20_000, validate_only=False)


def check_create_partitions(ctx: Context, version: int, response: Any) -> None:
    (result,) = response.results
    assert (result.name, result.error_code) == (topic_for("grow", version), 0)
    with Admin(ctx.cluster.bootstrap) as admin:
        assert len(admin.describe_topics([result.name])[result.name].partitions) == 3


def init_producer_id(ctx: Context, version: int) -> Any:
    return InitProducerIdRequest(
        transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1
    )


def check_init_producer_id(ctx: Context, version: int, response: Any) -> None:
    assert (response.error_code, response.producer_epoch) == (0, 0)
    assert response.producer_id >= 0


def describe_configs(ctx: Context, version: int) -> Any:
    resource = DescribeConfigsRequest.DescribeConfigsResource(
        resource_type=RESOURCE_TOPIC,
        resource_name=TOPIC,
        configuration_keys=["min.insync.replicas", "retention.ms"],
    )
    return DescribeConfigsRequest(
        resources=[resource], include_synonyms=True, include_documentation=False
    )


def check_describe_configs(ctx: Context, version: int, response: Any) -> None:
    (result,) = response.results
    assert (result.resource_name, result.error_code) == (TOPIC, 0)
    values = {c.name: (c.value, c.config_source) for c in result.configs}
    assert values == {
        "min.insync.replicas": ("2", 1),  # DYNAMIC_TOPIC_CONFIG
        # DEFAULT_CONFIG: the brokers' config leaves log.retention.ms at its built-in default
        "retention.ms": (str(7 * 24 * 3600 * 1000), 5),
    }


def delete_records(ctx: Context, version: int) -> Any:
    part = DeleteRecordsRequest.DeleteRecordsTopic.DeleteRecordsPartition(
        partition_index=0, offset=0
    )
    topic = DeleteRecordsRequest.DeleteRecordsTopic(name=PRODUCE_TOPIC, partitions=[part])
    return DeleteRecordsRequest(topics=[topic], timeout_ms=20_000)


def check_delete_records(ctx: Context, version: int, response: Any) -> None:
    (topic,) = response.topics
    (part,) = topic.partitions
    assert (topic.name, part.partition_index, part.error_code) == (PRODUCE_TOPIC, 0, 0)
    assert part.low_watermark == 0  # deleting below offset 0 moves nothing


def alter_configs(ctx: Context, version: int) -> Any:
    config = AlterConfigsRequest.AlterConfigsResource.AlterableConfig(
        name="retention.ms", value=str(60_000 + version)
    )
    resource = AlterConfigsRequest.AlterConfigsResource(
        resource_type=RESOURCE_TOPIC, resource_name=CONFIG_TOPIC, configs=[config]
    )
    return AlterConfigsRequest(resources=[resource], validate_only=False)


def check_alter_configs(ctx: Context, version: int, response: Any) -> None:
    (result,) = response.responses
    assert (result.resource_name, result.error_code) == (CONFIG_TOPIC, 0)
    with Admin(ctx.cluster.bootstrap) as admin:
        expected = str(60_000 + version)
        assert wait_for(
            lambda: admin.describe_configs([CONFIG_TOPIC])[CONFIG_TOPIC]["retention.ms"] == expected
        )


def incremental_alter_configs(ctx: Context, version: int) -> Any:
    config = IncrementalAlterConfigsRequest.AlterConfigsResource.AlterableConfig(
        name="segment.ms", config_operation=0, value=str(3_600_000 + version)
    )
    resource = IncrementalAlterConfigsRequest.AlterConfigsResource(
        resource_type=RESOURCE_TOPIC, resource_name=CONFIG_TOPIC, configs=[config]
    )
    return IncrementalAlterConfigsRequest(resources=[resource], validate_only=False)


def check_incremental_alter_configs(ctx: Context, version: int, response: Any) -> None:
    (result,) = response.responses
    assert (result.resource_name, result.error_code) == (CONFIG_TOPIC, 0)
    with Admin(ctx.cluster.bootstrap) as admin:
        expected = str(3_600_000 + version)
        assert wait_for(
            lambda: admin.describe_configs([CONFIG_TOPIC])[CONFIG_TOPIC]["segment.ms"] == expected
        )


def describe_log_dirs(ctx: Context, version: int) -> Any:
    topic = DescribeLogDirsRequest.DescribableLogDirTopic(topic=TOPIC, partitions=[0])
    return DescribeLogDirsRequest(topics=[topic])


def check_describe_log_dirs(ctx: Context, version: int, response: Any) -> None:
    (log_dir,) = response.results
    assert log_dir.error_code == 0
    (topic,) = log_dir.topics
    (part,) = topic.partitions
    assert (topic.name, part.partition_index) == (TOPIC, 0)
    assert part.partition_size > 0


def elect_leaders(ctx: Context, version: int) -> Any:
    topic = ElectLeadersRequest.TopicPartitions(topic=TOPIC, partitions=[0])
    return ElectLeadersRequest(election_type=0, topic_partitions=[topic], timeout_ms=20_000)


def check_elect_leaders(ctx: Context, version: int, response: Any) -> None:
    (topic,) = response.replica_election_results
    (part,) = topic.partition_result
    # the preferred replica leads since the topic was created
    assert (topic.topic, part.partition_id, part.error_code) == (TOPIC, 0, 84)


def alter_partition_reassignments(ctx: Context, version: int) -> Any:
    part = AlterPartitionReassignmentsRequest.ReassignableTopic.ReassignablePartition(
        partition_index=0, replicas=None
    )
    topic = AlterPartitionReassignmentsRequest.ReassignableTopic(name=TOPIC, partitions=[part])
    return AlterPartitionReassignmentsRequest(
        timeout_ms=20_000, allow_replication_factor_change=True, topics=[topic]
    )


def check_alter_partition_reassignments(ctx: Context, version: int, response: Any) -> None:
    (topic,) = response.responses
    (part,) = topic.partitions
    # cancelling when nothing is being reassigned
    assert (topic.name, part.partition_index, part.error_code) == (TOPIC, 0, 85)


def list_partition_reassignments(ctx: Context, version: int) -> Any:
    return ListPartitionReassignmentsRequest(timeout_ms=20_000, topics=None)


def check_list_partition_reassignments(ctx: Context, version: int, response: Any) -> None:
    assert (response.error_code, response.topics) == (0, [])


def describe_cluster(ctx: Context, version: int) -> Any:
    return DescribeClusterRequest(
        include_cluster_authorized_operations=False, endpoint_type=1, include_fenced_brokers=False
    )


def check_describe_cluster(ctx: Context, version: int, response: Any) -> None:
    assert (response.error_code, response.cluster_id) == (0, "replog")
    assert sorted(b.broker_id for b in response.brokers) == list(ctx.broker_ids)
    assert response.controller_id in ctx.broker_ids


def wait_for(condition: Callable[[], bool], timeout_s: float = 30.0) -> bool:
    """Whether ``condition`` came true (``eventually``), for checks that report, not fail."""
    try:
        eventually(condition, what="the condition", timeout_s=timeout_s)
    except NeverHappened:
        return False
    return True


Scenario = tuple[
    Callable[[Context, int], Any], Any, Callable[[Context, int, Any], None], str | None
]
COORDINATOR = "<the groups' coordinator>"
#: api key -> (request builder, kafka-python response class, check, the topic whose leader is
#: asked, COORDINATOR, or None for any broker)
SCENARIOS: dict[int, Scenario] = {
    0: (produce, ProduceResponse, check_produce, PRODUCE_TOPIC),
    1: (fetch, FetchResponse, check_fetch, TOPIC),
    2: (list_offsets, ListOffsetsResponse, check_list_offsets, TOPIC),
    3: (metadata, MetadataResponse, check_metadata, None),
    18: (api_versions, ApiVersionsResponse, check_api_versions, None),
    19: (create_topics, CreateTopicsResponse, check_create_topics, None),
    20: (delete_topics, DeleteTopicsResponse, check_delete_topics, None),
    23: (
        offset_for_leader_epoch,
        OffsetForLeaderEpochResponse,
        check_offset_for_leader_epoch,
        TOPIC,
    ),
    22: (init_producer_id, InitProducerIdResponse, check_init_producer_id, None),
    21: (delete_records, DeleteRecordsResponse, check_delete_records, PRODUCE_TOPIC),
    32: (describe_configs, DescribeConfigsResponse, check_describe_configs, None),
    33: (alter_configs, AlterConfigsResponse, check_alter_configs, None),
    35: (describe_log_dirs, DescribeLogDirsResponse, check_describe_log_dirs, None),
    37: (create_partitions, CreatePartitionsResponse, check_create_partitions, None),
    43: (elect_leaders, ElectLeadersResponse, check_elect_leaders, None),
    44: (
        incremental_alter_configs,
        IncrementalAlterConfigsResponse,
        check_incremental_alter_configs,
        None,
    ),
    45: (
        alter_partition_reassignments,
        AlterPartitionReassignmentsResponse,
        check_alter_partition_reassignments,
        None,
    ),
    46: (
        list_partition_reassignments,
        ListPartitionReassignmentsResponse,
        check_list_partition_reassignments,
        None,
    ),
    60: (describe_cluster, DescribeClusterResponse, check_describe_cluster, None),
    **{key: (*scenario, COORDINATOR) for key, scenario in GROUP_SCENARIOS.items()},
}


def test_every_advertised_api_has_a_scenario() -> None:
    assert set(SCENARIOS) == {v.api_key for v in supported_api_versions()}


@pytest.mark.parametrize("case", CASES, ids=[f"{APIS[k].info.name}-v{v}" for k, v in CASES])
def test_kafka_python_codec_gets_a_well_formed_answer(ctx: Context, case: tuple[int, int]) -> None:
    api_key, version = case
    build, response_class, check, leader_of = SCENARIOS[api_key]
    ctx = current(ctx)
    request = build(ctx, version)
    assert api_key == request.API_KEY
    any_broker = ctx.cluster.brokers[ctx.broker_ids[0]].port
    if leader_of is None:
        port = any_broker
    else:
        port = ctx.group_port if leader_of == COORDINATOR else ctx.leader_ports[leader_of]
    response = exchange(port, request, response_class, version, cid=1000 + api_key * 100 + version)
    check(ctx, version, response)
