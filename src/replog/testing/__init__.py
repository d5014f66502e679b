"""replog.testing: a deterministic whole-cluster simulator (VOPR-style) and its checkers.

``python -m replog.testing.sim --seeds N`` runs N seeds; ``--seed S`` reproduces one. Only IO
and time are simulated: the real ``replog.log``, ``replog.isr``, ``replog.election``,
``replog.controller`` and the in-memory coordinator run unchanged (see ``sim.py``). The
simulated network comes from ``replog.simkit``, shared with the quorum's simulators:
``raft_sim`` (``python -m replog.testing.raft_sim.sim``) runs the metadata quorum's Raft core
and storage under faults, and ``quorum_sim`` (``python -m replog.testing.quorum_sim``) the
metadata quorum itself (``replog.quorum``) as a workload of it.
"""

from __future__ import annotations

from replog.testing.history import Anomaly, History, check_history

__all__ = ["Anomaly", "History", "check_history"]
