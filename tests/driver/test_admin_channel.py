"""The driver's admin channel: completions are routed to their submitter whatever the order in
which the submission's result and the feed's completion record reach the driver."""

from __future__ import annotations

from typing import Any

from replog.broker.driver import BrokerState
from replog.coord.types import AdminRequestChanged, DeleteTopic
from replog.errors import ErrorCode

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
    request = submit.call(shell.coordinator)  # the worker thread runs it...
    shell.held.clear()
    shell.coordinator.complete_admin_request(request.request_id, message="done early")
    shell.hold(lambda call: False)
    shell.driver.on_feed_notified(shell.now_ms)  # ...and the feed is read before it reports
    shell.run()
    assert got == []
    shell.driver.on_coord_done(submit.token, request, None, shell.now_ms)
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
