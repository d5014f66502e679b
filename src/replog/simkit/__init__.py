"""replog.simkit: building blocks of deterministic simulators, shared by the cluster simulator
(``replog.testing.sim``) and the metadata quorum's (``replog.testing.raft_sim``).

They depend on nothing else in replog: ``SimNetwork``, a seeded message network with faults,
and ``check_kv``, a linearizability checker for register histories.
"""

from __future__ import annotations

from replog.simkit.linearizability import (
    KvOperation,
    LinearizabilityResult,
    check_kv,
    check_operations,
)
from replog.simkit.net import NetConfig, SimNetwork

__all__ = [
    "KvOperation",
    "LinearizabilityResult",
    "NetConfig",
    "SimNetwork",
    "check_kv",
    "check_operations",
]
