"""Progress of a long operation (a reassignment, a catch-up) for the operator tools.

On a terminal a ``rich`` progress bar redraws in place; anywhere else (a pipe, a log file, a
test's captured stream) each change is one plain line, ``<label>: <done>/<total> <detail>``,
so scripts and logs see the same facts without control characters.

``wait_until_done`` polls an operation until it reports completion or a deadline passes,
showing its progress; time comes from ``replog.clock``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

import attrs
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from replog import clock

__all__ = ["ProgressReport", "wait_until_done"]


@attrs.frozen
class ProgressReport:
    """One poll of an operation: ``done`` of ``total`` steps, and a short ``detail``."""

    done: int
    total: int
    detail: str = ""


@attrs.define
class _Display:
    """A rich bar on a terminal, plain lines (printed when something changed) elsewhere."""

    label: str
    out: TextIO
    bar: Progress | None = None
    task: TaskID | None = None
    last: ProgressReport | None = None

    @classmethod
    def open(cls, label: str, out: TextIO) -> _Display:
        display = cls(label=label, out=out)
        if out.isatty():
            display.bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TextColumn("{task.fields[detail]}"),
                console=Console(file=out),
            )
            display.bar.start()
        return display

    def show(self, report: ProgressReport) -> None:
        if self.bar is not None:
            if self.task is None:
                self.task = self.bar.add_task(self.label, total=report.total, detail="")
            self.bar.update(
                self.task, completed=report.done, total=report.total, detail=report.detail
            )
        elif report != self.last:
            detail = f" {report.detail}" if report.detail else ""
            self.out.write(f"{self.label}: {report.done}/{report.total}{detail}\n")
            self.out.flush()
        self.last = report

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


def wait_until_done(
    poll: Callable[[], ProgressReport],
    *,
    label: str,
    timeout_ms: int,
    interval_ms: int = 500,
    out: TextIO | None = None,
) -> ProgressReport:
    """Call ``poll`` every ``interval_ms`` until it reports ``done >= total`` or ``timeout_ms``
    has passed, showing each report on ``out`` (stdout by default); returns the last report
    (not complete: the deadline passed)."""
    display = _Display.open(label, out if out is not None else sys.stdout)
    deadline_ms = clock.monotonic_ms() + timeout_ms
    try:
        while True:
            report = poll()
            display.show(report)
            if report.done >= report.total or clock.monotonic_ms() >= deadline_ms:
                return report
            clock.sleep_s(interval_ms / 1000)
    finally:
        display.close()
