"""The ZooKeeper backend (``zookeeper://host:port[,host:port]/chroot``, through kazoo): the
contract on Kafka's znode layout, plus replog's change feed and admin queues.
``ZooKeeperCoordinator.from_url`` is its ``replog.coordinators`` entry point."""

from __future__ import annotations

from replog.coord.zookeeper.coordinator import ZooKeeperCoordinator

__all__ = ["ZooKeeperCoordinator"]
