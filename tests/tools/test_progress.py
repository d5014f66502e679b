"""``replog.tools.progress``: plain lines off a terminal, a rich bar on one, and the deadline."""

from __future__ import annotations

import io

from replog.tools.progress import ProgressReport, wait_until_done


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


def reports(*steps: tuple[int, int]) -> list[ProgressReport]:
    return [ProgressReport(done, total, "partitions complete") for done, total in steps]


def test_off_a_terminal_each_change_is_one_plain_line() -> None:
    queue = reports((0, 3), (0, 3), (2, 3), (3, 3))
    out = io.StringIO()
    last = wait_until_done(
        lambda: queue.pop(0), label="Moving", timeout_ms=60_000, interval_ms=1, out=out
    )
    assert last == ProgressReport(3, 3, "partitions complete")
    assert out.getvalue().splitlines() == [
        "Moving: 0/3 partitions complete",
        "Moving: 2/3 partitions complete",
        "Moving: 3/3 partitions complete",
    ]
    assert not queue


def test_on_a_terminal_a_rich_bar_is_drawn() -> None:
    queue = reports((1, 2), (2, 2))
    out = Terminal()
    wait_until_done(lambda: queue.pop(0), label="Moving", timeout_ms=60_000, interval_ms=1, out=out)
    drawn = out.getvalue()
    assert "\x1b[" in drawn and "2/2" in drawn and "Moving" in drawn
    assert "Moving: 2/2" not in drawn  # not the plain-line format


def test_the_deadline_returns_the_last_incomplete_report() -> None:
    calls: list[int] = []

    def poll() -> ProgressReport:
        calls.append(1)
        return ProgressReport(0, 1)

    out = io.StringIO()
    last = wait_until_done(poll, label="Stuck", timeout_ms=30, interval_ms=5, out=out)
    assert last == ProgressReport(0, 1) and len(calls) >= 2
    assert out.getvalue() == "Stuck: 0/1\n"
