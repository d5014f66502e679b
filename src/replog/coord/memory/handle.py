"""``MemoryHandle``: one handle onto a shared in-process ``MemoryCoordinator`` store.

``connect("memory://name")`` gives every caller its own handle on the one store of that name,
so closing a handle releases only what was made through it -- as closing a ZooKeeper or etcd
client does -- and never the store other handles (a ``Cluster``'s brokers, an ``Admin``) use:
its feed subscriptions and session listeners stop, and the broker sessions it registered end
as a clean unregistration would. Calls on a closed handle raise ``CoordinatorClosedError``.
The store itself lives until ``replog.coord.drop_memory_store`` closes it.

Every contract method forwards to the store; the test hooks of the memory backend
(``SessionFaults``, ``check_sessions``, ``advance``) too.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from replog.coord.contract import Coordinator
from replog.coord.errors import CoordinatorClosedError, CoordinatorError
from replog.coord.memory.coordinator import MemoryCoordinator
from replog.metadata.types import BrokerInfo, Subscription

__all__ = ["MemoryHandle"]


class MemoryHandle(Coordinator):
    """A handle on ``store`` (see the module docstring)."""

    def __init__(self, store: MemoryCoordinator) -> None:
        self.store = store
        self._lock = threading.Lock()
        self._closed = False
        self._subscriptions: list[Subscription] = []
        self._sessions: dict[int, int] = {}  # broker id -> incarnation registered here

    def _live(self) -> MemoryCoordinator:
        if self._closed:
            raise CoordinatorClosedError("this memory coordinator handle is closed")
        return self.store

    def _track(self, subscription: Subscription) -> Subscription:
        with self._lock:
            self._subscriptions = [s for s in self._subscriptions if not s.closed]
            self._subscriptions.append(subscription)
        return subscription

    @property
    def clock(self) -> Any:
        """The store's clock."""
        return self.store.clock

    @property
    def closed(self) -> bool:
        """Whether this handle (not the store) is closed."""
        return self._closed

    def close(self) -> None:
        """Release this handle: its listeners stop and the sessions it registered end (as a
        clean unregistration). The store and every other handle are unaffected."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            subscriptions, self._subscriptions = self._subscriptions, []
            sessions, self._sessions = self._sessions, {}
        for subscription in subscriptions:
            subscription.close()
        for broker_id, incarnation_epoch in sessions.items():
            with contextlib.suppress(CoordinatorError):
                self.store.unregister_broker(broker_id, incarnation_epoch)

    # ---- calls that create something this handle owns ----

    def register_broker(self, broker_id: int, *args: Any, **kwargs: Any) -> BrokerInfo:
        """See ``Coordinator.register_broker``; the session belongs to this handle."""
        info = self._live().register_broker(broker_id, *args, **kwargs)
        with self._lock:
            self._sessions[broker_id] = info.incarnation_epoch
        return info

    def unregister_broker(self, broker_id: int, *args: Any, **kwargs: Any) -> bool:
        """See ``Coordinator.unregister_broker``."""
        done = self._live().unregister_broker(broker_id, *args, **kwargs)
        with self._lock:
            self._sessions.pop(broker_id, None)
        return done

    def subscribe(self, *args: Any, **kwargs: Any) -> Subscription:
        """See ``Coordinator.subscribe``; closed with this handle."""
        return self._track(self._live().subscribe(*args, **kwargs))

    def add_session_listener(self, *args: Any, **kwargs: Any) -> Subscription:
        """See ``Coordinator.add_session_listener``; closed with this handle."""
        return self._track(self._live().add_session_listener(*args, **kwargs))

    # ---- everything else forwards ----

    def heartbeat(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.heartbeat``."""
        return self._live().heartbeat(*args, **kwargs)

    def update_broker(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.update_broker``."""
        return self._live().update_broker(*args, **kwargs)

    def admit_broker(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.admit_broker``."""
        return self._live().admit_broker(*args, **kwargs)

    def get_broker(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.get_broker``."""
        return self._live().get_broker(*args, **kwargs)

    def live_brokers(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.live_brokers``."""
        return self._live().live_brokers(*args, **kwargs)

    def session_state(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.session_state``."""
        return self._live().session_state(*args, **kwargs)

    def elect_controller(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.elect_controller``."""
        return self._live().elect_controller(*args, **kwargs)

    def resign_controller(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.resign_controller``."""
        return self._live().resign_controller(*args, **kwargs)

    def current_controller(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.current_controller``."""
        return self._live().current_controller(*args, **kwargs)

    def create_topic(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.create_topic``."""
        return self._live().create_topic(*args, **kwargs)

    def delete_topic(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.delete_topic``."""
        return self._live().delete_topic(*args, **kwargs)

    def add_partitions(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.add_partitions``."""
        return self._live().add_partitions(*args, **kwargs)

    def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.list_topics``."""
        return self._live().list_topics(*args, **kwargs)

    def get_topic(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.get_topic``."""
        return self._live().get_topic(*args, **kwargs)

    def get_partition_state(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.get_partition_state``."""
        return self._live().get_partition_state(*args, **kwargs)

    def compare_and_set_partition_state(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.compare_and_set_partition_state``."""
        return self._live().compare_and_set_partition_state(*args, **kwargs)

    def changes_since(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.changes_since``."""
        return self._live().changes_since(*args, **kwargs)

    def snapshot(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.snapshot``."""
        return self._live().snapshot(*args, **kwargs)

    def trim_history(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.trim_history``."""
        return self._live().trim_history(*args, **kwargs)

    def submit_admin_request(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.submit_admin_request``."""
        return self._live().submit_admin_request(*args, **kwargs)

    def pending_admin_requests(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.pending_admin_requests``."""
        return self._live().pending_admin_requests(*args, **kwargs)

    def complete_admin_request(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.complete_admin_request``."""
        return self._live().complete_admin_request(*args, **kwargs)

    def allocate_producer_ids(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.allocate_producer_ids``."""
        return self._live().allocate_producer_ids(*args, **kwargs)

    def producer_id_block(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.producer_id_block``."""
        return self._live().producer_id_block(*args, **kwargs)

    def alter_topic_configs(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.alter_topic_configs``."""
        return self._live().alter_topic_configs(*args, **kwargs)

    def alter_broker_configs(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.alter_broker_configs``."""
        return self._live().alter_broker_configs(*args, **kwargs)

    def broker_configs(self, *args: Any, **kwargs: Any) -> Any:
        """See ``Coordinator.broker_configs``."""
        return self._live().broker_configs(*args, **kwargs)

    # ---- the memory backend's test hooks ----

    def expire_session(self, broker_id: int) -> None:
        """See ``MemoryCoordinator.expire_session``."""
        self._live().expire_session(broker_id)

    def suspend_session(self, broker_id: int) -> None:
        """See ``MemoryCoordinator.suspend_session``."""
        self._live().suspend_session(broker_id)

    def resume_session(self, broker_id: int) -> None:
        """See ``MemoryCoordinator.resume_session``."""
        self._live().resume_session(broker_id)

    def check_sessions(self) -> list[int]:
        """See ``MemoryCoordinator.check_sessions``."""
        return self._live().check_sessions()

    def advance(self, now_ms: int) -> list[int]:
        """See ``MemoryCoordinator.advance``."""
        return self._live().advance(now_ms)

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"MemoryHandle({state}, store={self.store!r})"
