"""What one seed of the quorum simulator decides up front: `RaftSimOptions`.

``RaftSimOptions.draw(seed)`` draws them from a generator of its own, separate from the run's
(``sim.py``), so a seed's options do not depend on anything the run does.
"""

from __future__ import annotations

import random

import attrs

from replog.simkit.net import NetConfig

__all__ = ["RaftSimOptions"]


@attrs.frozen
class RaftSimOptions:
    """Everything one seed decides up front."""

    seed: int
    voters: int
    observers: int
    net: NetConfig
    fault_interval_ms: int
    fault_weights: tuple[tuple[str, int], ...]
    snapshot_interval: int
    snapshot_chunk_bytes: int
    segment_bytes: int
    disk_ms_max: int
    crash_after_send_rate: float
    clients: int = 3
    keys: int = 2
    safety_ms: int = 2_000
    liveness_ms_max: int = 6_000
    election_timeout_ms: int = 80
    fetch_timeout_ms: int = 160
    request_timeout_ms: int = 60
    fetch_backoff_ms: int = 8
    retry_backoff_ms: int = 5
    election_backoff_max_ms: int = 80
    client_timeout_ms: int = 250
    client_think_ms: int = 15

    @classmethod
    def draw(cls, seed: int) -> RaftSimOptions:
        """The seed's own options (from a generator separate from the run's)."""
        rng = random.Random(f"raft-options-{seed}")
        voters = rng.choice((1, 3, 3, 3, 5, 5))
        net = NetConfig(
            delay_ms_min=1,
            delay_ms_max=rng.choice((2, 5, 15)),
            drop_rate=rng.choice((0.0, 0.01, 0.05)),
            duplicate_rate=rng.choice((0.0, 0.01, 0.05)),
            clog_delay_ms_max=rng.choice((100, 300)),
        )
        weights = {
            "crash": rng.randint(0, 4),
            "power_loss": rng.randint(0, 4),
            "power_loss_all": rng.randint(0, 1),
            "power_loss_some": rng.randint(0, 2) if voters > 1 else 0,
            "partition": rng.randint(0, 4) if voters > 1 else 0,
            "one_way": rng.randint(0, 3) if voters > 1 else 0,
            "clog": rng.randint(0, 2),
            "resign": rng.randint(0, 3),
            "fail_fsync": rng.randint(0, 1),
            "unreachable": rng.randint(0, 2) if voters > 1 else 0,
            "nothing": 2,
        }
        return cls(
            seed=seed,
            voters=voters,
            observers=rng.choice((0, 0, 1)),
            net=net,
            fault_interval_ms=rng.choice((100, 200, 400)),
            fault_weights=tuple(sorted(weights.items())),
            snapshot_interval=rng.choice((0, 8, 20, 50)),
            snapshot_chunk_bytes=rng.choice((64, 256, 4096)),
            segment_bytes=rng.choice((512, 2048)),
            disk_ms_max=rng.choice((2, 8, 25)),
            crash_after_send_rate=rng.choice((0.0, 0.0, 0.003, 0.01)),
        )

    def describe(self) -> str:
        """One line for logs."""
        faults = ",".join(f"{k}={w}" for k, w in self.fault_weights if w)
        return (
            f"voters={self.voters} observers={self.observers} "
            f"snapshot_interval={self.snapshot_interval} chunk={self.snapshot_chunk_bytes} "
            f"disk<={self.disk_ms_max}ms crash_after_send={self.crash_after_send_rate} "
            f"net={attrs.asdict(self.net)} faults[{faults}]/{self.fault_interval_ms}ms"
        )
