"""Broker restart with and without the metadata image cache, on ``raft://``.

    python -m benchmarks.image_cache [--topics 1000] [--partitions 3] [--voters 3] [--repeats 5]

A ``LocalQuorum`` of ``--voters`` voters and two brokers in this process (``Cluster.local``);
``--topics`` topics of ``--partitions`` partitions, all on broker 2, are written through the
coordination API with the active controller's epoch (as the controller writes them). Broker 1
hosts nothing, so its restart measures metadata, not log recovery. Each repeat stops broker 1
cleanly (its cache is written), writes one more topic (the cache is behind by a few feed
records) and starts it again, once with ``metadata_image_cache_enable`` and once without
(alternating which goes first); ``restart_s`` is ``Cluster.start`` (registration, the image,
admission by the controller, until ONLINE) and ``image_s`` the part from the call that loads
the image to the image applied. One JSON line per measurement, then a summary per mode.
Figures are reported, never asserted.
"""

from __future__ import annotations

import argparse
import json
import logging
import statistics
import tempfile
from typing import Any

import attrs

from replog import Cluster
from replog.broker.config import BrokerConfig
from replog.broker.driver.metadata_channel import MetadataChannel
from replog.clock import SYSTEM_CLOCK
from replog.metadata.types import PartitionState
from replog.quorum.local import LocalQuorum

_QUORUM = {"election_timeout_ms": 300, "fetch_timeout_ms": 1_000, "request_timeout_ms": 5_000}


def _instrument() -> dict[str, int]:
    """Time ``MetadataChannel.load_image`` to the image applied (``then`` called)."""
    times = {"start_ms": 0, "done_ms": 0}
    original = MetadataChannel.load_image

    def load_image(self: MetadataChannel, then: Any) -> None:
        times["start_ms"] = SYSTEM_CLOCK.monotonic_ms()

        def done() -> None:
            times["done_ms"] = SYSTEM_CLOCK.monotonic_ms()
            then()

        original(self, done)

    MetadataChannel.load_image = load_image  # type: ignore[method-assign]
    return times


def _populate(cluster: Cluster, topics: int, partitions: int, prefix: str) -> None:
    coordinator = cluster.coordinator
    controller = coordinator.current_controller()
    assert controller is not None
    states = [PartitionState.initial([2]) for _ in range(partitions)]
    for i in range(topics):
        coordinator.create_topic(
            f"{prefix}{i:05d}",
            [[2]] * partitions,
            controller_epoch=controller.controller_epoch,
            initial_states=states,
        )


def _restart(cluster: Cluster, enable: bool, times: dict[str, int]) -> dict[str, float]:
    config = cluster.configs[1]
    cluster.configs[1] = BrokerConfig.from_mapping(
        {**_config_fields(config), "metadata_image_cache_enable": enable}
    )
    start_ms = SYSTEM_CLOCK.monotonic_ms()
    cluster.start(1)
    restart_ms = SYSTEM_CLOCK.monotonic_ms() - start_ms
    keeper = cluster.brokers[1].driver.metadata.keeper  # type: ignore[union-attr]
    return {
        "restart_s": restart_ms / 1000,
        "image_s": (times["done_ms"] - times["start_ms"]) / 1000,
        "resumed": float(keeper.cache_resumes),
    }


def _config_fields(config: BrokerConfig) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in attrs.fields(BrokerConfig)}


def main() -> None:
    """Run the benchmark and print JSON lines."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=3)
    parser.add_argument("--voters", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    logging.basicConfig(level=logging.ERROR)
    times = _instrument()
    results: dict[bool, list[dict[str, float]]] = {True: [], False: []}
    with (
        tempfile.TemporaryDirectory(prefix="replog-imagecache-") as base,
        LocalQuorum.start(args.voters, f"{base}/quorum", **_QUORUM) as quorum,
    ):
        quorum.wait_for_leader()
        with Cluster.local(2, base_dir=f"{base}/brokers", coordinator=quorum.url) as cluster:
            # broker 2 must be the controller: broker 1 restarts
            cluster.stop(1)
            cluster.start(1)
            _populate(cluster, args.topics, args.partitions, "t")
            for enable in (True, False):  # warm-up (the controller digests the topics), unmeasured
                cluster.stop(1)
                _restart(cluster, enable, times)
            for repeat in range(args.repeats):
                for enable in (True, False) if repeat % 2 == 0 else (False, True):
                    cluster.stop(1)
                    _populate(cluster, 1, args.partitions, f"r{repeat}-{int(enable)}-")
                    got = _restart(cluster, enable, times)
                    results[enable].append(got)
                    print(json.dumps({"cache": enable, "repeat": repeat, **got}), flush=True)
    for enable, rows in results.items():
        summary = {
            key: {
                "median": statistics.median(r[key] for r in rows),
                "min": min(r[key] for r in rows),
                "max": max(r[key] for r in rows),
            }
            for key in ("restart_s", "image_s")
        }
        print(json.dumps({"summary": True, "cache": enable, "topics": args.topics, **summary}))


if __name__ == "__main__":
    main()
