"""replog.testing.raft_sim: the metadata quorum's deterministic simulator.

``python -m replog.testing.raft_sim.sim --seeds N`` runs N seeds of real `RaftNode` drivers on
fault-injecting disks and a faulty simulated network (``sim.py``, what a seed decides up front
in ``options.py``); ``checks.py`` holds the safety invariants checked after every event and
``clients.py`` the register clients whose history must be linearizable.
``replog.testing.quorum_sim`` is another workload of it.
"""

from __future__ import annotations

__all__: list[str] = []
