"""The built-in metadata quorum under faults, with real processes: three ``replog
controller`` voters, three broker processes on ``raft://``, an acks=all producer running
throughout. Kill (then restart) or pause (then resume) the active controller -- the quorum's
leader -- or a follower voter: the brokers keep serving, a new active controller is elected
when the old one is gone, and every acknowledged record is read back at its acknowledged
offset, by replog's consumer and by kafka-python's.

Only on the built-in quorum (``REPLOG_FAULTS_COORDINATOR=zookeeper`` skips the module).
"""

from __future__ import annotations

import signal
import time

import pytest

from tests.faults.conftest import COORDINATOR, VOTER_ARGS
from tests.faults.harness import ProcessCluster, QuorumProcesses
from tests.faults.workload import (
    PARTITIONS,
    TOPIC,
    BackgroundProducer,
    check_acked_records_consumed,
    describe,
    read_with_kafka_python,
    wait_until,
)

pytestmark = [
    pytest.mark.faults,
    pytest.mark.timeout(240),
    pytest.mark.skipif(COORDINATOR != "raft", reason="faults of the built-in quorum's voters"),
]

ACKS_BETWEEN_STEPS = 100
#: the voters' election and fetch timeouts (``VOTER_ARGS``)
ELECTION_TIMEOUT_S = int(VOTER_ARGS[VOTER_ARGS.index("--election-timeout-ms") + 1]) / 1000
FETCH_TIMEOUT_S = int(VOTER_ARGS[VOTER_ARGS.index("--fetch-timeout-ms") + 1]) / 1000


def _isr_complete(cluster: ProcessCluster) -> bool:
    return all(len(p.isr) == 3 for p in describe(cluster).values())


@pytest.mark.parametrize("voter", ["leader", "follower"])
@pytest.mark.parametrize("fault", ["kill_restart", "pause_resume"])
def test_brokers_serve_through_voter_faults(
    fault_quorum: QuorumProcesses, cluster: ProcessCluster, voter: str, fault: str
) -> None:
    quorum = fault_quorum
    wait_until("a full ISR", lambda: _isr_complete(cluster), cluster)
    producer = BackgroundProducer(cluster.bootstrap).start()
    try:
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster)
        leader = quorum.leader()
        target = leader if voter == "leader" else next(i for i in quorum.voters if i != leader)
        faulted = time.monotonic()
        if fault == "kill_restart":
            quorum.voters[target].stop(signal.SIGKILL)
        else:
            quorum.voters[target].pause()
        if voter == "leader":
            new_leader = quorum.leader()
            elected_s = time.monotonic() - faulted
            print(
                f"{fault} of leader voter {leader}: voter {new_leader} leads {elected_s:.2f} s on"
            )
            assert new_leader != leader
            # a killed leader's closed port starts an election at once (E9); a paused one is
            # noticed by the followers' fetch timeout; generous bounds for a loaded machine
            bound_s = ELECTION_TIMEOUT_S if fault == "kill_restart" else FETCH_TIMEOUT_S
            assert elected_s < bound_s + ELECTION_TIMEOUT_S + 5, quorum.log_tails()
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster, timeout_s=60)
        if fault == "kill_restart":
            quorum.restart(target)
        else:
            quorum.voters[target].resume()
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster, timeout_s=60)
        # the restarted or resumed voter is a member again: the quorum survives losing another
        others = [i for i in quorum.voters if i not in (target, quorum.leader())]
        quorum.voters[others[0]].stop(signal.SIGKILL)
        producer.wait_for_acks(ACKS_BETWEEN_STEPS, cluster, timeout_s=60)
    finally:
        producer.stop()
    check_acked_records_consumed(cluster, producer)
    got = read_with_kafka_python(cluster.bootstrap, TOPIC, range(PARTITIONS))
    lost = [(p, o, v) for p, o, v in producer.acked if got[p].get(o) != v]
    assert not lost, f"{len(lost)} acknowledged records not read back by kafka-python: {lost[:5]}"
