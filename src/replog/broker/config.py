"""``BrokerConfig``: everything one broker needs to start, validated when it is built.

Every queue, buffer and connection count has a maximum here (TigerStyle: a limit on everything),
and every value is checked eagerly: a bad value raises ``InvalidConfigError`` from the
constructor or from ``BrokerConfig.from_file``, never at first use. A file is TOML (``.toml``)
or JSON (anything else) whose keys are the attribute names; ``durability`` is ``"fsync"`` or
``"replicated"``; ``log`` is a table of ``LogConfig`` settings (segment size, retention, ...)
for every log on the broker, e.g. ``[log]`` / ``retention_ms = 3600000`` in TOML.

The log cleaner compacts the logs of topics with ``cleanup.policy=compact`` (Kafka's names,
snake_case, units last): ``log_cleaner_enable``, ``log_cleaner_dedupe_buffer_bytes`` (the memory
of the offset map, Kafka's ``log.cleaner.dedupe.buffer.size``), ``log_cleaner_backoff_ms`` (the
pause when no log needs cleaning) and ``log_cleaner_io_bytes_per_second_max`` (None: no limit;
otherwise the next cleaning waits until the bytes the last one read and wrote average out to
this rate). One cleaning runs at a time per broker (Kafka's ``log.cleaner.threads`` = 1).

The controller's policies are broker settings too (Kafka's names, snake_case): the broker that
wins the controller role runs with ``controller_config()`` -- the defaults for every topic
(``default_min_insync_replicas``, ``unclean_leader_election_enable``,
``eligible_leader_replicas_enable``, ``last_known_leader_recovery_enable``), which a topic's
stored configs override, and the auto leader rebalance (``auto_leader_rebalance_enable``,
``leader_imbalance_per_broker_percentage``, ``leader_imbalance_check_interval_ms``). Give every
broker the same values: whichever is controller applies its own.

Consumer groups: ``groups`` is a table of ``replog.groups.GroupConfig`` settings (session
timeout bounds, ``initial_rebalance_delay_ms``, ``offsets_topic_partitions``, offsets retention,
...); ``offsets_topic_replication_factor`` and ``offsets_topic_min_insync_replicas`` are the
``__consumer_offsets`` topic's (capped by the live brokers when it is created), and
``offsets_commit_timeout_ms`` bounds how long a group write waits for acks=all. Give every broker
the same values.

Replication quotas (KIP-73): the rates are dynamic broker configs
(``leader/follower.replication.throttled.rate``, ``replog.broker.driver.replication_throttle``);
``replication_quota_window_count`` windows of ``replication_quota_window_ms`` (Kafka's
``replication.quota.window.num`` 11 and ``replication.quota.window.size.seconds`` 1) are what
their rates are measured over.

Combined mode (Kafka's ``process.roles=broker,controller``): ``process_roles = ["broker",
"controller"]`` makes the broker process also run one voter of the built-in metadata quorum
(``replog.quorum``), with node id ``broker_id``. ``controller_voters`` lists every voter as
``id@host:port,...`` (Kafka's ``controller.quorum.voters``; give every voter the same list, and
this broker's id must be in it: the voter listens on its address); the voter keeps its
metadata log in ``controller_data_dir`` (default: ``controller`` under the first log dir,
which the log manager never takes for a partition); ``quorum`` is a table of the voter's
timeouts (``election_timeout_ms``, ``fetch_timeout_ms``, ``request_timeout_ms``,
``snapshot_interval``; ``replog controller``'s defaults). The ``coordinator`` then defaults to
``raft://`` over the voters (another scheme is an error). ``controller_voters`` alone (roles
``["broker"]``) points a plain broker at voters run elsewhere: its coordinator defaults to
the same ``raft://`` URL.

``coordinator`` defaults to ``memory://default`` otherwise: a store inside this process, right
for ``Cluster.local`` and embedding, wrong across processes. The broker *process*
(``python -m replog.broker``) therefore refuses a config file that names neither a
``coordinator`` nor ``controller_voters`` (see ``replog.broker.__main__``).
"""

from __future__ import annotations

import json
import tomllib
from collections.abc import Mapping
from typing import Any

import attrs

from replog.election.controller import ControllerConfig, TopicPolicy
from replog.errors import InvalidConfigError
from replog.groups.config import GroupConfig
from replog.isr.config import DurabilityMode, PartitionConfig
from replog.log.config import LogConfig
from replog.log.offset_map import OffsetMap

__all__ = ["BrokerConfig", "PROCESS_ROLES"]

#: what ``process_roles`` may name; a broker process always has the broker role
PROCESS_ROLES = ("broker", "controller")
#: the ``quorum`` table's keys (``replog.quorum.server.VoterConfig`` fields)
QUORUM_SETTINGS = (
    "election_timeout_ms",
    "fetch_timeout_ms",
    "request_timeout_ms",
    "snapshot_interval",
)


def _durability(value: object) -> DurabilityMode:
    if isinstance(value, DurabilityMode):
        return value
    try:
        return DurabilityMode(str(value).lower())
    except ValueError as exc:
        raise InvalidConfigError(
            f"durability must be 'fsync' or 'replicated', got {value!r}"
        ) from exc


def _log_config(value: object) -> LogConfig:
    if isinstance(value, LogConfig):
        return value
    if not isinstance(value, Mapping):
        raise InvalidConfigError(f"log must be a table of log settings, got {value!r}")
    known = {a.name for a in attrs.fields(LogConfig)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise InvalidConfigError(f"unknown log config keys: {unknown} (known: {sorted(known)})")
    return LogConfig(**dict(value))


def _group_config(value: object) -> GroupConfig:
    if isinstance(value, GroupConfig):
        return value
    if not isinstance(value, Mapping):
        raise InvalidConfigError(f"groups must be a table of group settings, got {value!r}")
    known = {a.name for a in attrs.fields(GroupConfig)}
    unknown = sorted(set(value) - known)
    if unknown:
        raise InvalidConfigError(f"unknown groups config keys: {unknown} (known: {sorted(known)})")
    return GroupConfig(**dict(value))


def _log_dirs(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InvalidConfigError(f"log_dirs must be a list of paths, got {value!r}")
    return tuple(value)


def _process_roles(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        value = tuple(v.strip() for v in value.split(","))
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise InvalidConfigError(f"process_roles must be a list of roles, got {value!r}")
    unknown = sorted(set(value) - set(PROCESS_ROLES))
    if unknown:
        raise InvalidConfigError(f"unknown process_roles {unknown} (known: {list(PROCESS_ROLES)})")
    roles = tuple(r for r in PROCESS_ROLES if r in value)
    if "broker" not in roles:
        raise InvalidConfigError(
            "a broker config needs the broker role; a controller-only process is "
            "`replog controller --node-id N --voters ... --data-dir D`"
        )
    return roles


def _quorum_settings(value: object) -> tuple[tuple[str, int], ...]:
    if isinstance(value, tuple):
        value = dict(value)
    if not isinstance(value, Mapping):
        raise InvalidConfigError(f"quorum must be a table of voter settings, got {value!r}")
    unknown = sorted(set(value) - set(QUORUM_SETTINGS))
    if unknown:
        raise InvalidConfigError(f"unknown quorum keys: {unknown} (known: {list(QUORUM_SETTINGS)})")
    for key, setting in value.items():
        if not isinstance(setting, int) or isinstance(setting, bool) or setting < 0:
            raise InvalidConfigError(f"quorum.{key} must be an int >= 0, got {setting!r}")
    return tuple(sorted(value.items()))


def _voters(text: str) -> dict[int, tuple[str, int]]:
    """``id@host:port,...`` (the format of ``replog controller --voters``)."""
    voters: dict[int, tuple[str, int]] = {}
    for part in text.split(","):
        node, sep, address = part.strip().partition("@")
        host, colon, port = address.rpartition(":")
        if not sep or not colon or not node.isdigit() or not port.isdigit() or not host:
            raise InvalidConfigError(f"a controller voter is <id>@<host>:<port>, not {part!r}")
        if int(node) in voters:
            raise InvalidConfigError(f"controller voter {node} is listed twice in {text!r}")
        voters[int(node)] = (host, int(port))
    return voters


def _default_coordinator(config: BrokerConfig) -> str:
    if config.controller_voters is None:
        return "memory://default"
    addresses = _voters(config.controller_voters).values()
    return "raft://" + ",".join(f"{host}:{port}" for host, port in addresses)


_POSITIVE = (
    "session_timeout_ms",
    "heartbeat_interval_ms",
    "default_min_insync_replicas",
    "default_replication_factor",
    "default_partition_count",
    "replica_lag_ms_max",
    "replica_fetch_bytes_max",
    "replica_fetch_backoff_ms",
    "request_timeout_ms",
    "controlled_shutdown_timeout_ms",
    "frame_bytes_max",
    "fetch_bytes_max",
    "inflight_requests_max",
    "connections_max",
    "delayed_operations_max",
    "alter_partition_queue_max",
    "tick_interval_ms",
    "checkpoint_interval_ms",
    "metadata_poll_interval_ms",
    "metadata_image_cache_interval_ms",
    "retention_check_interval_ms",
    "producer_id_expiration_check_interval_ms",
    "leader_imbalance_check_interval_ms",
    "replication_quota_window_count",
    "replication_quota_window_ms",
    "offsets_topic_replication_factor",
    "offsets_topic_min_insync_replicas",
    "offsets_commit_timeout_ms",
    "log_cleaner_dedupe_buffer_bytes",
    "log_cleaner_backoff_ms",
    "state_change_log_bytes_max",
    "state_change_log_backups",
)
_NON_NEGATIVE = (
    "port",
    "replica_fetch_wait_ms_max",
    "replica_fetch_min_bytes",
    "fetch_session_cache_slots",
)
_BOOLEAN = (
    "auto_create_topics_enable",
    "unclean_leader_election_enable",
    "eligible_leader_replicas_enable",
    "last_known_leader_recovery_enable",
    "auto_leader_rebalance_enable",
    "log_cleaner_enable",
)


@attrs.frozen(kw_only=True)
class BrokerConfig:
    """One broker's settings. Times in ms, sizes in bytes; ``port`` 0 picks a free port."""

    broker_id: int
    log_dirs: tuple[str, ...] = attrs.field(converter=_log_dirs)
    host: str = "127.0.0.1"
    port: int = 0
    #: the address clients and other brokers are told (metadata, registration) when it differs
    #: from the bound one: binding 0.0.0.0, NAT, containers, a proxy in front of the broker
    advertised_host: str | None = None
    advertised_port: int | None = None
    rack: str | None = None
    #: combined mode (module docstring); declared before ``coordinator``, whose default
    #: they decide
    process_roles: tuple[str, ...] = attrs.field(default=("broker",), converter=_process_roles)
    controller_voters: str | None = None
    controller_data_dir: str | None = None
    #: the voter's settings as (name, value) pairs (given as a table)
    quorum: tuple[tuple[str, int], ...] = attrs.field(default=(), converter=_quorum_settings)
    coordinator: str = attrs.field(default=attrs.Factory(_default_coordinator, takes_self=True))
    session_timeout_ms: int = 6_000
    heartbeat_interval_ms: int = 500
    durability: DurabilityMode = attrs.field(default=DurabilityMode.FSYNC, converter=_durability)
    default_min_insync_replicas: int = 1
    #: Kafka's default.replication.factor and num.partitions: topics created without them
    #: (CreateTopics with -1, auto-created topics)
    default_replication_factor: int = 1
    default_partition_count: int = 1
    #: Kafka's auto.create.topics.enable: a Metadata request (allowing it, v4+) or a Produce
    #: for a topic that does not exist creates it with the defaults above
    auto_create_topics_enable: bool = True
    replica_lag_ms_max: int = 30_000
    replica_fetch_wait_ms_max: int = 500
    replica_fetch_min_bytes: int = 1
    replica_fetch_bytes_max: int = 1_048_576
    replica_fetch_backoff_ms: int = 100
    #: incremental fetch sessions (KIP-227) kept for followers and consumers (Kafka's
    #: max.incremental.fetch.session.cache.slots); 0 answers every Fetch in full
    fetch_session_cache_slots: int = 1_000
    #: the replication quotas' rate windows (Kafka's replication.quota.window.num and
    #: replication.quota.window.size.seconds; the rates are dynamic broker configs, KIP-73)
    replication_quota_window_count: int = 11
    replication_quota_window_ms: int = 1_000
    request_timeout_ms: int = 30_000
    controlled_shutdown_timeout_ms: int = 10_000
    #: limits: a request frame, a fetch response, pipelined requests per connection, clients
    frame_bytes_max: int = 100 * 1024 * 1024
    fetch_bytes_max: int = 50 * 1024 * 1024
    inflight_requests_max: int = 16
    connections_max: int = 1_000
    #: purgatory size per partition (acks=all produces waiting for the HW)
    delayed_operations_max: int = 10_000
    #: AlterPartition requests waiting for the controller
    alter_partition_queue_max: int = 10_000
    tick_interval_ms: int = 50
    checkpoint_interval_ms: int = 5_000
    metadata_poll_interval_ms: int = 200
    #: keep the metadata image in ``<first log dir>/__cluster_metadata_image`` and resume the
    #: feed from it at start (``raft://`` only: it needs the store's cluster id), rewritten at
    #: most every ``metadata_image_cache_interval_ms`` while the image changes, and at a clean
    #: shutdown (``replog.broker.driver.image_cache``)
    metadata_image_cache_enable: bool = True
    metadata_image_cache_interval_ms: int = 10_000
    #: how often retention deletes old segments (Kafka's log.retention.check.interval.ms)
    retention_check_interval_ms: int = 300_000
    #: how often idle idempotent producers' state is dropped (Kafka's
    #: producer.id.expiration.check.interval.ms; the age is ``log.producer_id_expiration_ms``)
    producer_id_expiration_check_interval_ms: int = 600_000
    #: segment size, retention and the other settings of every log on this broker
    log: LogConfig = attrs.field(factory=LogConfig, converter=_log_config)
    #: the log cleaner (module docstring)
    log_cleaner_enable: bool = True
    log_cleaner_dedupe_buffer_bytes: int = 128 * 1024 * 1024
    log_cleaner_backoff_ms: int = 15_000
    log_cleaner_io_bytes_per_second_max: int | None = None
    #: controller policies (module docstring); topic configs override the first three
    unclean_leader_election_enable: bool = False
    eligible_leader_replicas_enable: bool = True
    last_known_leader_recovery_enable: bool = True
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_ms: int = 300_000
    #: ``state-change.log`` in the first log dir: rotated at this size, this many old files kept
    state_change_log_bytes_max: int = 10 * 1024 * 1024
    state_change_log_backups: int = 5
    #: serve Prometheus metrics on this port (0: a free one; None: off;
    #: ``replog.broker.shell.metrics``)
    metrics_port: int | None = None
    #: consumer groups (module docstring): the coordinator's settings, and the replication of
    #: ``__consumer_offsets`` (Kafka's offsets.topic.replication.factor; min ISR 2 as asked of
    #: the topic, both capped by the live brokers at creation)
    groups: GroupConfig = attrs.field(factory=GroupConfig, converter=_group_config)
    offsets_topic_replication_factor: int = 3
    offsets_topic_min_insync_replicas: int = 2
    #: how long a group coordinator write waits for acks=all (Kafka's offsets.commit.timeout.ms)
    offsets_commit_timeout_ms: int = 5_000

    def __attrs_post_init__(self) -> None:
        if not isinstance(self.broker_id, int) or self.broker_id < 0:
            raise InvalidConfigError(f"broker_id must be an int >= 0, got {self.broker_id!r}")
        if not self.log_dirs:
            raise InvalidConfigError("at least one log dir is required")
        if "://" not in self.coordinator:
            raise InvalidConfigError(f"coordinator must be a URL, got {self.coordinator!r}")
        self._check_combined_mode()
        for name in _POSITIVE:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise InvalidConfigError(f"{name} must be an int > 0, got {value!r}")
        for name in _NON_NEGATIVE:
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise InvalidConfigError(f"{name} must be an int >= 0, got {value!r}")
        for name in _BOOLEAN:
            flag = getattr(self, name)
            if not isinstance(flag, bool):
                raise InvalidConfigError(f"{name} must be true or false, got {flag!r}")
        percentage = self.leader_imbalance_per_broker_percentage
        is_int = isinstance(percentage, int) and not isinstance(percentage, bool)
        if not is_int or not 0 <= percentage <= 100:
            raise InvalidConfigError(
                f"leader_imbalance_per_broker_percentage must be 0..100, got {percentage!r}"
            )
        OffsetMap.for_memory(self.log_cleaner_dedupe_buffer_bytes)  # room for one key at least
        rate = self.log_cleaner_io_bytes_per_second_max
        if rate is not None and (not isinstance(rate, int) or isinstance(rate, bool) or rate <= 0):
            raise InvalidConfigError(
                f"log_cleaner_io_bytes_per_second_max must be an int > 0 or None, got {rate!r}"
            )
        if self.port > 65535:
            raise InvalidConfigError(f"port must be <= 65535, got {self.port}")
        metrics_port = self.metrics_port
        if metrics_port is not None and (
            not isinstance(metrics_port, int) or isinstance(metrics_port, bool)
            or not 0 <= metrics_port <= 65535
        ):  # fmt: skip
            raise InvalidConfigError(f"metrics_port must be 0..65535 or None, got {metrics_port!r}")
        if self.advertised_port is not None and not 0 < self.advertised_port <= 65535:
            raise InvalidConfigError(
                f"advertised_port must be 1..65535, got {self.advertised_port}"
            )
        if self.advertised_host is None and self.host in ("", "0.0.0.0", "::"):
            raise InvalidConfigError(
                f"host {self.host!r} binds every interface, which clients cannot connect to: "
                "set advertised_host to the name clients and brokers should use"
            )
        if self.advertised_host is not None and not self.advertised_host.strip():
            raise InvalidConfigError("advertised_host must not be empty")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise InvalidConfigError("heartbeat_interval_ms must be below session_timeout_ms")
        if self.fetch_bytes_max > self.frame_bytes_max:
            raise InvalidConfigError("fetch_bytes_max must not exceed frame_bytes_max")
        if self.replica_fetch_bytes_max > self.fetch_bytes_max:
            raise InvalidConfigError("replica_fetch_bytes_max must not exceed fetch_bytes_max")

    def _check_combined_mode(self) -> None:
        voters = None if self.controller_voters is None else _voters(self.controller_voters)
        if not self.is_controller:
            if self.controller_data_dir is not None or self.quorum:
                raise InvalidConfigError(
                    "controller_data_dir and quorum apply only with process_roles "
                    '["broker", "controller"]'
                )
            return
        if voters is None:
            raise InvalidConfigError(
                "process_roles with controller needs controller_voters (id@host:port,...)"
            )
        if self.broker_id not in voters:
            raise InvalidConfigError(
                f"broker_id {self.broker_id} is not among controller_voters "
                f"{sorted(voters)}: a combined broker is the voter with its own id"
            )
        if not self.coordinator.startswith("raft://"):
            raise InvalidConfigError(
                f"a combined broker uses its quorum (raft://), not {self.coordinator!r}"
            )

    @property
    def is_controller(self) -> bool:
        """Whether this process also runs a voter of the metadata quorum (combined mode)."""
        return "controller" in self.process_roles

    def controller_voter_addresses(self) -> dict[int, tuple[str, int]]:
        """``controller_voters`` as ``{id: (host, port)}`` (empty without it)."""
        return {} if self.controller_voters is None else _voters(self.controller_voters)

    def controller_data_path(self) -> str:
        """Where a combined broker's voter keeps its metadata log."""
        return self.controller_data_dir or f"{self.log_dirs[0]}/controller"

    def partition_config(self, min_insync_replicas: int | None = None) -> PartitionConfig:
        """The ``PartitionConfig`` every partition on this broker runs with."""
        return PartitionConfig(
            min_insync_replicas=min_insync_replicas or self.default_min_insync_replicas,
            replica_lag_ms_max=self.replica_lag_ms_max,
            durability=self.durability,
            request_timeout_ms=self.request_timeout_ms,
            fetch_bytes_max=self.replica_fetch_bytes_max,
            fetch_min_bytes=self.replica_fetch_min_bytes,
            fetch_wait_ms_max=self.replica_fetch_wait_ms_max,
            delayed_operations_max=self.delayed_operations_max,
        )

    def topic_policy(self) -> TopicPolicy:
        """The election policy of a topic with no configs of its own."""
        return TopicPolicy(
            min_insync_replicas=self.default_min_insync_replicas,
            unclean_leader_election=self.unclean_leader_election_enable,
            eligible_leader_replicas=self.eligible_leader_replicas_enable,
            last_known_leader_recovery=self.last_known_leader_recovery_enable,
        )

    def controller_config(self) -> ControllerConfig:
        """The ``ControllerConfig`` this broker runs the controller role with."""
        return ControllerConfig(
            default_topic_policy=self.topic_policy(),
            auto_leader_rebalance=self.auto_leader_rebalance_enable,
            leader_imbalance_per_broker_percentage=self.leader_imbalance_per_broker_percentage,
            leader_imbalance_check_interval_ms=self.leader_imbalance_check_interval_ms,
        )

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> BrokerConfig:
        """Build from a dict of attribute names; unknown keys raise ``InvalidConfigError``."""
        known = {a.name for a in attrs.fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise InvalidConfigError(f"unknown broker config keys: {unknown}")
        try:
            return cls(**dict(values))
        except TypeError as exc:  # a missing required key
            raise InvalidConfigError(f"bad broker config: {exc}") from exc

    @classmethod
    def from_file(cls, path: str) -> BrokerConfig:
        """Load a TOML (``*.toml``) or JSON file."""
        return cls.from_mapping(cls.read_file(path))

    @staticmethod
    def read_file(path: str) -> dict[str, Any]:
        """The keys and values of a TOML (``*.toml``) or JSON config file, unchecked."""
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as exc:
            raise InvalidConfigError(f"cannot read broker config {path}: {exc}") from exc
        try:
            if path.endswith(".toml"):
                values: Any = tomllib.loads(data.decode("utf-8"))
            else:
                values = json.loads(data)
        except (ValueError, UnicodeDecodeError) as exc:
            raise InvalidConfigError(f"cannot parse broker config {path}: {exc}") from exc
        if not isinstance(values, dict):
            raise InvalidConfigError(f"broker config {path} must be a table/object")
        return values
