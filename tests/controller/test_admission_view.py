"""The controller's view counts a broker as live and unfenced as soon as it has admitted it.

A broker serves clients once it sees its own admission in the store; a client may then ask at
once for a topic over every broker. The request can reach the controller in the very poll that
wrote the admission, before the feed has brought the admission back (a new controller admits
the registrations its snapshot holds after reading the feed, then handles requests): the
placement must already count the broker (KRaft: the controller's state holds the unfencing it
decided)."""

from __future__ import annotations

from replog.coord.contract import Coordinator
from replog.errors import ErrorCode
from replog.metadata.types import CONTROLLER_TARGET, AdminRequest, CreateTopic

from ._harness import Cluster

CONTROLLER = 100


class _ClientAfterAdmissions:
    """A coordinator proxy that submits ``payload`` right after the ``count``-th admission is
    written, as a client of the just-admitted brokers would: the request is pending before
    the controller's poll reaches its admin requests."""

    def __init__(self, inner: Coordinator, payload: CreateTopic, count: int) -> None:
        self._inner = inner
        self._payload = payload
        self._left = count
        self.requests: list[AdminRequest] = []

    def __getattr__(self, name: str) -> object:
        attr = getattr(self._inner, name)
        if name != "admit_broker":
            return attr

        def admit(*args: object, **kwargs: object) -> object:
            result = attr(*args, **kwargs)
            self._left -= 1
            if self._left == 0:
                request = self._inner.submit_admin_request(CONTROLLER_TARGET, self._payload)
                self.requests.append(request)
            return result

        return admit


def _register_fenced(cluster: Cluster, *broker_ids: int) -> None:
    """Register as the product's brokers do: fenced until the controller admits them."""
    for b in broker_ids:
        cluster.brokers[b] = cluster.coord.register_broker(
            b, "127.0.0.1", 9000 + b, session_timeout_ms=30_000, fenced=True
        )


def test_a_new_controller_counts_the_brokers_it_admits_at_once(coordinator: Coordinator) -> None:
    """Three brokers register fenced before any controller exists (a cluster's start); the
    controller admits all three in its first poll and, in the same poll, places an RF 3 topic
    a client asked for right after the last admission."""
    cluster = Cluster(coordinator)
    _register_fenced(cluster, 1, 2, CONTROLLER)
    payload = CreateTopic(topic="t", partition_count=3, replication_factor=3)
    proxy = _ClientAfterAdmissions(coordinator, payload, count=3)
    cluster.coord = proxy  # type: ignore[assignment]
    controller = cluster.controller(CONTROLLER)
    cluster.poll(controller)
    assert len(proxy.requests) == 1
    completion = cluster.completion(proxy.requests[0])
    assert completion.outcome is ErrorCode.NONE, completion.message
    assert all(set(cluster.state("t", p).replicas) == {1, 2, CONTROLLER} for p in range(3))
    assert all(cluster.state("t", p).leader == cluster.state("t", p).replicas[0] for p in range(3))


def test_a_broker_admitted_from_the_feed_is_counted_in_the_same_poll(
    coordinator: Coordinator,
) -> None:
    """A broker registers while a controller runs: the topic a client asks for right after
    its admission is placed on it too."""
    cluster = Cluster(coordinator)
    _register_fenced(cluster, 1, CONTROLLER)
    controller = cluster.controller(CONTROLLER)
    cluster.settle(controller)
    payload = CreateTopic(topic="t", partition_count=3, replication_factor=3)
    proxy = _ClientAfterAdmissions(coordinator, payload, count=1)
    controller.coordinator = proxy  # type: ignore[assignment]
    _register_fenced(cluster, 2)
    cluster.poll(controller)
    assert len(proxy.requests) == 1
    controller.coordinator = coordinator
    cluster.settle(controller)
    completion = cluster.completion(proxy.requests[0])
    assert completion.outcome is ErrorCode.NONE, completion.message
    assert all(set(cluster.state("t", p).replicas) == {1, 2, CONTROLLER} for p in range(3))
    info = coordinator.get_broker(2)
    assert info is not None and info.admitted and not info.fenced
