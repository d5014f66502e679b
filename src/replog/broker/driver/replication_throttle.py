"""``ReplicationThrottle``: one broker's replication quotas (KIP-73), as leader and as follower.

Settings (all stored in the coordinator, so they apply live on every broker):

- the broker's rates, dynamic broker configs ``leader.replication.throttled.rate`` and
  ``follower.replication.throttled.rate`` (bytes/s; this broker's own, else the cluster-wide
  default, else unthrottled);
- the throttled replicas, topic configs ``leader.replication.throttled.replicas`` and
  ``follower.replication.throttled.replicas`` (``*`` or ``partition:broker,...``): a partition
  is in this broker's leader (follower) set when the leader (follower) list names its replica
  on this broker;
- the rate windows, ``BrokerConfig.replication_quota_window_count`` / ``_window_ms``.

Leader side (``replog.broker.driver.requests.fetch``): answering a follower's Fetch, a partition in
the leader set whose fetching replica is not in the ISR gets no records (its HW, log start and
the follower's fetch state still move) while the leader quota is exceeded; the bytes sent for
the partitions of the leader set are recorded against it. Follower side
(``replog.broker.driver.fetch_sessions``): a partition in the follower set is left out of the fetch
while the follower quota is exceeded and this replica is not in the ISR; the bytes received for
the partitions of the follower set are recorded against it. The rate accounting and the rule
are pure (``replog.isr.replication_quota``).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from replog.broker.config import BrokerConfig
from replog.config_layers import UNTHROTTLED_RATE, replication_rate
from replog.isr.replication_quota import RateQuota, should_throttle
from replog.metadata.types import ALL_BROKERS, TopicAssignment, TopicConfigs
from replog.topic_config import (
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    stored_throttled_replicas,
)

__all__ = ["FOLLOWER_RATE", "LEADER_RATE", "ReplicationThrottle"]

LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"


@attrs.define
class ReplicationThrottle:
    """See the module docstring."""

    broker_id: int
    leader: RateQuota
    follower: RateQuota

    @classmethod
    def for_config(cls, config: BrokerConfig) -> ReplicationThrottle:
        """Unthrottled quotas with ``config``'s windows."""
        count, window_ms = config.replication_quota_window_count, config.replication_quota_window_ms
        return cls(
            config.broker_id,
            RateQuota(window_count=count, window_ms=window_ms),
            RateQuota(window_count=count, window_ms=window_ms),
        )

    def sync_rates(self, broker_configs: Mapping[int, TopicConfigs]) -> None:
        """Take the rates from the dynamic broker configs (module docstring)."""
        own = dict(broker_configs.get(self.broker_id, ()))
        cluster = dict(broker_configs.get(ALL_BROKERS, ()))
        for quota, key in ((self.leader, LEADER_RATE), (self.follower, FOLLOWER_RATE)):
            rate = replication_rate(own if key in own else cluster, key)
            quota.set_bound(None if rate == UNTHROTTLED_RATE else rate)

    def leader_covers(self, assignment: TopicAssignment | None, partition: int) -> bool:
        """The partition is in this broker's leader set."""
        return self._covers(assignment, partition, LEADER_THROTTLED_REPLICAS)

    def follower_covers(self, assignment: TopicAssignment | None, partition: int) -> bool:
        """The partition is in this broker's follower set."""
        return self._covers(assignment, partition, FOLLOWER_THROTTLED_REPLICAS)

    def leader_holds(
        self, assignment: TopicAssignment | None, partition: int, *, in_sync: bool, now_ms: int
    ) -> bool:
        """Answer this partition's follower fetch without records (module docstring)."""
        return should_throttle(
            in_throttled_set=self.leader_covers(assignment, partition),
            in_sync=in_sync,
            quota_exceeded=self.leader.is_exceeded(now_ms),
        )

    def follower_holds(
        self, assignment: TopicAssignment | None, partition: int, *, in_sync: bool, now_ms: int
    ) -> bool:
        """Leave this partition out of the next fetch (module docstring)."""
        return should_throttle(
            in_throttled_set=self.follower_covers(assignment, partition),
            in_sync=in_sync,
            quota_exceeded=self.follower.is_exceeded(now_ms),
        )

    def _covers(self, assignment: TopicAssignment | None, partition: int, key: str) -> bool:
        if assignment is None or not assignment.configs:
            return False
        return stored_throttled_replicas(assignment.configs, key).covers(partition, self.broker_id)
