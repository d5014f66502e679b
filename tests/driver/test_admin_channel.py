"""The driver's admin channel: completions are routed to their submitter whatever the order in
which the submission's result and the feed's completion record reach the driver."""

from __future__ import annotations

from typing import Any

from replog.broker.driver import BrokerState
from replog.errors import ErrorCode
from replog.metadata.types import CONTROLLER_TARGET, AdminRequestChanged, DeleteTopic

from .shell import ScriptedShell


def test_a_completion_seen_before_the_submission_returns_is_not_lost(tmp_path: Any) -> None:
    """The submit call runs on a worker thread; the controller may complete the request and the
    feed deliver the completion before the submitter registers its waiter (seen once as a flaky
    create_topics under load)."""
    shell = ScriptedShell(tmp_path)
    shell.start()
    assert shell.driver.state is BrokerState.ONLINE
    got: list[tuple[AdminRequestChanged | None, str]] = []
    shell.hold(lambda call: call.what == "submit")
    shell.driver.metadata.submit(
        DeleteTopic(topic="nope"), shell.now_ms + 10_000, lambda c, why: got.append((c, why))
    )
    shell.run()
    (submit,) = shell.held
    (request,) = submit.call(shell.coordinator)  # the worker thread runs it...
    shell.held.clear()
    shell.coordinator.complete_admin_request(request.request_id, message="done early")
    shell.hold(lambda call: False)
    shell.driver.on_feed_notified(shell.now_ms)  # ...and the feed is read before it reports
    shell.run()
    assert got == []
    shell.driver.on_coord_done(submit.token, [request], None, shell.now_ms)
    shell.run()
    assert len(got) == 1 and got[0][0] is not None
    assert (got[0][0].outcome, got[0][0].message) == (ErrorCode.NONE, "done early")


def test_a_request_the_controller_never_completes_times_out(tmp_path: Any) -> None:
    shell = ScriptedShell(tmp_path)
    shell.start()
    shell.driver.controller.drop()
    shell.hold(lambda call: call.what in ("campaign", "controller poll"))  # no controller now
    got: list[tuple[AdminRequestChanged | None, str]] = []
    shell.driver.metadata.submit(
        DeleteTopic(topic="nope"), shell.now_ms + 500, lambda c, why: got.append((c, why))
    )
    shell.run()
    for _ in range(9):
        shell.tick(50)
    assert got == []
    shell.tick(100)
    assert got and got[0][0] is None and "did not complete" in got[0][1]


def test_submissions_go_out_one_call_at_a_time_carrying_all_that_wait(tmp_path: Any) -> None:
    """After a fault a broker leading many partitions proposes an ISR change for each at once:
    a coordinator call apiece filled the shell's threads, so heartbeats and feed reads queued
    behind them for seconds. One call is in flight; the next carries every
    submission that waited, in order, and one that fails fails alone."""
    shell = ScriptedShell(tmp_path)
    shell.start()
    shell.driver.controller.drop()
    shell.hold(lambda call: call.what in ("submit", "campaign", "controller poll"))
    got: list[tuple[str, AdminRequestChanged | None, str]] = []
    for name in ("a", "b", "c", "", "d"):  # "" is refused by the coordinator's validation
        shell.driver.metadata.submit(
            DeleteTopic(topic=name),
            shell.now_ms + 10_000,
            lambda c, why, n=name: got.append((n, c, why)),
        )
    shell.run()
    submits = [call for call in shell.held if call.what == "submit"]
    assert len(submits) == 1  # the first went out; the other four wait for it
    first = submits[0]
    shell.held.remove(first)
    shell.driver.on_coord_done(first.token, first.call(shell.coordinator), None, shell.now_ms)
    shell.run()
    submits = [call for call in shell.held if call.what == "submit"]
    assert len(submits) == 1
    results = submits[0].call(shell.coordinator)
    assert len(results) == 4 and isinstance(results[2], Exception)
    queued = [r.payload.topic for r in results if not isinstance(r, Exception)]
    assert queued == ["b", "c", "d"]  # in order
    shell.held.remove(submits[0])
    shell.driver.on_coord_done(submits[0].token, results, None, shell.now_ms)
    shell.run()
    assert [(n, why.startswith("could not queue")) for n, _, why in got] == [("", True)]
    pending = shell.coordinator.pending_admin_requests(CONTROLLER_TARGET)
    assert [r.payload.topic for r in pending] == ["a", "b", "c", "d"]
