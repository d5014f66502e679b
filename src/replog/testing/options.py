"""``SimOptions``: everything one simulation seed decides before the run starts.

``SimOptions.draw(seed)`` picks, from a generator of its own (``"options-<seed>"``), the cluster
shape (brokers, partitions, RF, min ISR), the durability mode, the acks, the network's fault
rates, the fault mix and the admin-operation mix, and what the clients do (fetch sessions, a
churned second topic). The run's own ``random.Random(seed)`` then drives every delay and fault,
so a seed replays exactly.
"""

from __future__ import annotations

import random

import attrs

from replog.isr import DurabilityMode
from replog.simkit.net import NetConfig

__all__ = ["ACKS_ALL", "ADMIN_OPERATIONS", "FAULTS", "SimOptions"]

ACKS_ALL = -1

FAULTS = (
    "crash",
    "crash_controller",
    "power_loss",
    "power_loss_all",
    "partition",
    "one_way",
    "clog",
    "expire_session",
    "suspend_session",
    "fail_fsync",
    "nothing",
)
"""The nemesis's process, network, session and disk faults (``Nemesis._fault_<name>``)."""

ADMIN_OPERATIONS = (
    "add_partitions",
    "reassign",
    "preferred_election",
    "churn_topic",
    "controlled_restart",
)
"""The operator's actions the nemesis takes (``Nemesis._admin_<name>``)."""


@attrs.frozen
class SimOptions:
    """Everything one seed decides up front."""

    seed: int
    brokers: int
    partitions: int
    replication_factor: int
    min_isr: int
    durability: DurabilityMode
    acks: tuple[int, ...]
    net: NetConfig
    fault_interval_ms: int
    fault_weights: tuple[tuple[str, int], ...]
    admin_interval_ms: int = 300
    admin_weights: tuple[tuple[str, int], ...] = ()
    #: min ISR set as the topic's ``min.insync.replicas`` config (stored with the topic) rather
    #: than as the brokers' and controller's default
    min_isr_in_topic: bool = False
    #: consumers use incremental fetch sessions (KIP-227) instead of sessionless fetches
    fetch_sessions: bool = False
    #: a second topic, with tiny segments and retention, deleted and recreated by the nemesis
    churn_topic: bool = False
    #: the main topic grows to at most this many partitions (CreatePartitions)
    partitions_max: int = 1
    #: the coordinator keeps this many feed records (brokers falling behind resync)
    feed_retention_max: int = 100_000
    safety_ms: int = 1_500
    liveness_ms_max: int = 8_000
    #: once every broker is up in the liveness phase, every partition has a leader within this
    leader_bound_ms: int = 3_000
    produce_interval_ms: int = 15
    consume_interval_ms: int = 30
    metadata_max_age_ms: int = 250
    probe_interval_ms: int = 120
    session_ms: int = 600
    heartbeat_ms: int = 100
    metadata_ms: int = 20
    tick_ms: int = 50
    checkpoint_ms: int = 300
    retention_check_ms: int = 200
    controlled_shutdown_ms: int = 600
    disk_ms: int = 2
    fetch_backoff_ms: int = 25
    fetch_timeout_ms: int = 200
    #: followers' long poll on the leader (below fetch_timeout_ms less the network delays)
    replica_fetch_wait_ms: int = 100
    replica_lag_ms_max: int = 800
    request_timeout_ms: int = 400
    produce_timeout_ms: int = 400
    client_timeout_ms: int = 800

    @classmethod
    def draw(cls, seed: int) -> SimOptions:
        """The seed's own options (from a generator separate from the run's)."""
        rng = random.Random(f"options-{seed}")
        brokers = rng.choice((3, 3, 4, 5))
        rf = rng.choice((2, 3, 3))
        min_isr = rng.choice((1, 2, 2))
        durability = rng.choice((DurabilityMode.FSYNC, DurabilityMode.REPLICATED))
        net = NetConfig(
            delay_ms_min=1,
            delay_ms_max=rng.choice((2, 5, 20)),
            drop_rate=rng.choice((0.0, 0.01, 0.05)),
            duplicate_rate=rng.choice((0.0, 0.01, 0.05)),
            clog_delay_ms_max=rng.choice((100, 400)),
        )
        faults = {name: rng.randint(0, 4) for name in FAULTS}
        faults["power_loss_all"] = min(1, faults["power_loss_all"])
        if durability is not DurabilityMode.FSYNC:
            faults["power_loss_all"] = 0  # REPLICATED promises nothing when all lose power
        faults["nothing"] = 2
        admin = {name: rng.randint(0, 3) for name in ADMIN_OPERATIONS}
        partitions = rng.choice((1, 2, 3))
        return cls(
            seed=seed,
            brokers=brokers,
            partitions=partitions,
            replication_factor=rf,
            min_isr=min_isr,
            durability=durability,
            acks=rng.choice(((ACKS_ALL,), (ACKS_ALL,), (ACKS_ALL, 1))),
            net=net,
            fault_interval_ms=rng.choice((100, 200, 400)),
            fault_weights=tuple(sorted(faults.items())),
            admin_interval_ms=rng.choice((150, 300, 600)),
            admin_weights=tuple(sorted(admin.items())),
            min_isr_in_topic=rng.random() < 0.5,
            fetch_sessions=rng.random() < 0.5,
            churn_topic=rng.random() < 0.6,
            partitions_max=partitions + rng.choice((0, 1, 3)),
            feed_retention_max=rng.choice((100_000, 100_000, 60)),
        )

    def describe(self) -> str:
        """One line for logs."""
        faults = ",".join(f"{k}={w}" for k, w in self.fault_weights if w)
        admin = ",".join(f"{k}={w}" for k, w in self.admin_weights if w)
        return (
            f"brokers={self.brokers} partitions={self.partitions}..{self.partitions_max} "
            f"rf={self.replication_factor} "
            f"min_isr={self.min_isr}{'(topic)' if self.min_isr_in_topic else ''} "
            f"durability={self.durability.value} acks={list(self.acks)} "
            f"sessions={self.fetch_sessions} churn={self.churn_topic} "
            f"feed={self.feed_retention_max} net={attrs.asdict(self.net)} "
            f"faults[{faults}]/{self.fault_interval_ms}ms admin[{admin}]/{self.admin_interval_ms}ms"
        )
