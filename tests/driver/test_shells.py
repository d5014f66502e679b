"""What both shells (asyncio and the simulator) share: the stop sequence, phase by phase, and
one table entry per kind of effect."""

from __future__ import annotations

import pytest

from replog.broker.driver.stop_sequence import StopPhase, StopSequence
from tests.driver.shell import ScriptedShell


class _Driver:
    """The driver's stop-relevant state, recorded."""

    def __init__(self) -> None:
        self.stop_ready = False
        self.flush_in_flight = False
        self.cleaning_in_flight = False
        self.calls: list[str] = []

    def halt(self) -> None:
        self.calls.append("halt")

    def close_logs(self) -> None:
        self.calls.append("close_logs")

    def unregister(self) -> None:
        self.calls.append("unregister")


def test_the_phases_wait_for_leadership_then_for_the_fsync_and_the_cleaning() -> None:
    driver = _Driver()
    sequence = StopSequence(driver)
    with pytest.raises(RuntimeError):
        sequence.step()
    sequence.begin()
    assert sequence.step() is StopPhase.MOVING_LEADERSHIP and not driver.calls
    driver.stop_ready = True
    assert sequence.step() is StopPhase.STOP_SERVING and not driver.calls
    driver.flush_in_flight = driver.cleaning_in_flight = True
    assert sequence.step() is StopPhase.HALTED and driver.calls == ["halt"]
    assert sequence.step() is StopPhase.DRAINING
    driver.flush_in_flight = False
    assert sequence.step() is StopPhase.DRAINING  # the cleaning still runs
    driver.cleaning_in_flight = False
    assert sequence.step() is StopPhase.DOWN
    assert driver.calls == ["halt", "close_logs", "unregister"]
    assert sequence.step() is StopPhase.DOWN and len(driver.calls) == 3


def test_a_driver_stops_through_the_sequence_and_unregisters(tmp_path: object) -> None:
    shell = ScriptedShell(tmp_path)
    shell.start()
    driver = shell.driver
    driver.begin_stop(shell.now_ms, controlled=False)
    phases = []
    while (phase := driver.stop_sequence.step()) is not StopPhase.DOWN:
        phases.append(phase)
        shell.run()
    assert phases == [StopPhase.STOP_SERVING, StopPhase.HALTED]
    assert [e.what for e in driver.take_effects() if hasattr(e, "what")] == ["unregister"]


def test_both_shells_carry_out_every_kind_of_effect() -> None:
    from typing import get_args

    from replog.broker.driver.effects import Effect
    from replog.broker.shell import broker
    from replog.testing import node

    kinds = set(get_args(Effect))
    assert set(broker._CARRY_OUT) == kinds
    assert set(node._CARRY_OUT) == kinds
