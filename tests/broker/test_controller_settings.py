"""Controller policies are broker settings, and they reach the controller.

Before, the broker built its ``ControllerService`` with ``ControllerConfig()``'s defaults:
``default_min_insync_replicas`` and the unclean-election, ELR and rebalance settings of the
broker config never reached the controller (min ISR 1 in the ELR rules whatever the brokers
said). Checked at the config layer, in the store a running cluster's controller writes, and
with kafka-python's view of the elected leader.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kafka import KafkaAdminClient

from replog import Admin, Cluster
from replog.broker.config import BrokerConfig
from replog.errors import InvalidConfigError
from tests.waiting import eventually

pytestmark = pytest.mark.system


def test_controller_config_carries_every_policy(tmp_path: Any) -> None:
    path = tmp_path / "b.toml"
    path.write_text(
        "broker_id = 1\nlog_dirs = ['/tmp/x']\ndefault_min_insync_replicas = 2\n"
        "unclean_leader_election_enable = true\neligible_leader_replicas_enable = false\n"
        "last_known_leader_recovery_enable = false\nauto_leader_rebalance_enable = false\n"
        "leader_imbalance_per_broker_percentage = 25\n"
        "leader_imbalance_check_interval_ms = 1000\n"
    )
    config = BrokerConfig.from_file(str(path)).controller_config()
    policy = config.default_topic_policy
    assert policy.min_insync_replicas == 2
    assert policy.unclean_leader_election and not policy.eligible_leader_replicas
    assert not policy.last_known_leader_recovery
    assert not config.auto_leader_rebalance
    assert config.leader_imbalance_per_broker_percentage == 25
    assert config.leader_imbalance_check_interval_ms == 1000
    # a topic's stored configs still override the broker's defaults
    election = config.policy_for("t", (("min.insync.replicas", "3"),))
    assert election.min_isr == 3 and election.unclean_allowed


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("unclean_leader_election_enable", "yes"),
        ("eligible_leader_replicas_enable", 1),
        ("auto_leader_rebalance_enable", None),
        ("leader_imbalance_per_broker_percentage", 101),
        ("leader_imbalance_per_broker_percentage", -1),
        ("leader_imbalance_check_interval_ms", 0),
    ],
)
def test_controller_settings_are_validated_eagerly(key: str, value: object) -> None:
    with pytest.raises(InvalidConfigError, match=key):
        BrokerConfig.from_mapping({"broker_id": 1, "log_dirs": ["/tmp/x"], key: value})


def _wait(what: str, probe: Callable[[], Any], done: Callable[[Any], bool]) -> Any:
    return eventually(probe, what=what, done=done)


def _absent(value: object) -> bool:
    return value is None


def test_brokers_min_isr_reaches_the_controllers_elr_rules() -> None:
    """Broker default min ISR 2, no topic config: when a follower dies the ISR falls to 2 of
    3 (still at min ISR, no ELR); when the second does, the ISR is {leader} < 2, so the dead
    follower is kept in the ELR. With min ISR 1 in the controller (the bug) the ELR stays
    empty."""
    with Cluster.local(3, default_min_insync_replicas=2) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics("m", 1, 3)
        state = _wait(
            "a full ISR",
            lambda: cluster.coordinator.get_partition_state("m", 0),
            lambda s: s is not None and len(s.isr) == 3,
        )
        followers = [b for b in state.replicas if b != state.leader]
        for broker_id in followers:
            cluster.kill(broker_id)
        state = _wait(
            "the ISR down to the leader",
            lambda: cluster.coordinator.get_partition_state("m", 0),
            lambda s: s.isr == (state.leader,),
        )
        # whichever follower left the ISR below min ISR 2 (both, if they left together) is kept
        assert state.elr and set(state.elr) <= set(followers), state


def test_brokers_unclean_election_setting_elects_an_out_of_sync_replica() -> None:
    """With unclean_leader_election_enable on the brokers (no topic config), a replica that
    fell out of the ISR is elected once every ISR member is gone, as kafka-python sees it."""
    with Cluster.local(
        2, unclean_leader_election_enable=True, last_known_leader_recovery_enable=False
    ) as cluster:
        with Admin(cluster.bootstrap) as admin:
            admin.create_topics("u", 1, 2)
        state = _wait(
            "a full ISR",
            lambda: cluster.coordinator.get_partition_state("u", 0),
            lambda s: s is not None and len(s.isr) == 2,
        )
        leader = state.leader
        follower = next(b for b in state.replicas if b != leader)
        cluster.stop(follower)
        _wait(
            "the follower out of the ISR",
            lambda: cluster.coordinator.get_partition_state("u", 0),
            lambda s: s.isr == (leader,),
        )
        cluster.kill(leader)
        _wait("the old session to end", lambda: cluster.coordinator.get_broker(leader), _absent)
        cluster.start(follower)
        kafka_admin = KafkaAdminClient(bootstrap_servers=cluster.bootstrap)
        try:
            elected = _wait(
                "an unclean election of the out-of-sync replica",
                lambda: dict(kafka_admin.describe_topics(["u"])[0])["partitions"][0],
                lambda p: p["leader_id"] == follower,
            )
        finally:
            kafka_admin.close()
        assert elected["isr_nodes"] == [follower]
