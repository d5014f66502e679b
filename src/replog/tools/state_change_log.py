"""``replog state-change-log``: merge the ``state-change.log`` files of several brokers (and
their controller roles) into one time-ordered history, as Kafka's state-change log merger.

``--logs`` (Kafka's name; ``--files`` is an alias) names the files (rotated ones such as
``state-change.log.1`` included); lines are
ordered by their wall-clock stamp (ties keep the order of ``--logs`` and of lines in a file) and
filtered by ``--start-time`` / ``--end-time`` (inclusive; ``YYYY-MM-DD HH:MM:SS[,mmm]`` UTC, as
the lines print them, or ISO 8601), ``--topic`` (a regular expression matched against the whole
topic name) and ``--partitions`` (comma-separated partition numbers). Text output prints the
matching lines unchanged; ``--output json`` prints one document with every record's fields.

Lines that do not parse (a line torn by a crash) are skipped and each is reported on stderr
with its file and line number. Exit status: 0 done, 1 a file could not be read, 2 usage error.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from typing import Any

import attrs

from replog.state_change import StateChange
from replog.state_change_log import parse_state_change_log_line
from replog.tools.output import EXIT_OK, add_output_argument, fail, print_json

__all__ = ["COMMAND", "HELP", "MergedLine", "add_arguments", "merge_files", "parse_time_ms", "run"]

COMMAND = "state-change-log"
HELP = "merge brokers' state-change.log files in time order"


def parse_time_ms(text: str) -> int:
    """Wall-clock ms of ``YYYY-MM-DD HH:MM:SS[,mmm]`` or ISO 8601 (UTC unless it says)."""
    moment = datetime.datetime.fromisoformat(text.strip().replace(",", "."))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.UTC)
    return round(moment.timestamp() * 1000)


def _time_arg(text: str) -> int:
    try:
        return parse_time_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a time: {text!r}") from exc


def _partitions_arg(text: str) -> frozenset[int]:
    try:
        return frozenset(int(p) for p in text.split(","))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not a comma-separated partition list: {text!r}") from exc


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--files`` and the filters (module docstring) plus ``--output``."""
    parser.add_argument("--logs", "--files", dest="files", nargs="+", required=True, metavar="FILE")
    parser.add_argument("--start-time", type=_time_arg, metavar="TIME")
    parser.add_argument("--end-time", type=_time_arg, metavar="TIME")
    parser.add_argument("--topic", type=re.compile, metavar="REGEX")
    parser.add_argument("--partitions", type=_partitions_arg, metavar="P[,P...]")
    add_output_argument(parser)


@attrs.frozen
class MergedLine:
    """One parsed line: its wall-clock ms, record, source file and text."""

    wall_ms: int
    change: StateChange
    path: str
    text: str


@attrs.frozen
class _Filters:
    start_ms: int | None = None
    end_ms: int | None = None
    topic: re.Pattern[str] | None = None
    partitions: frozenset[int] | None = None

    def accept(self, line: MergedLine) -> bool:
        topic, partition = line.change.topic_partition
        return (
            (self.start_ms is None or line.wall_ms >= self.start_ms)
            and (self.end_ms is None or line.wall_ms <= self.end_ms)
            and (self.topic is None or self.topic.fullmatch(topic) is not None)
            and (self.partitions is None or partition in self.partitions)
        )


def merge_files(paths: list[str], bad_lines: list[str]) -> list[MergedLine]:
    """Every parseable line of ``paths`` in wall-clock order (stable); each unparseable line
    is appended to ``bad_lines`` as ``path:number: reason``. Raises ``OSError``."""
    merged: list[MergedLine] = []
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as lines:
            for number, text in enumerate(lines, start=1):
                text = text.rstrip("\n")
                if not text:
                    continue
                try:
                    wall_ms, change = parse_state_change_log_line(text)
                except (ValueError, KeyError) as exc:
                    bad_lines.append(f"{path}:{number}: {exc}")
                    continue
                merged.append(MergedLine(wall_ms, change, path, text))
    merged.sort(key=lambda line: line.wall_ms)  # sort is stable: ties keep file order
    return merged


def _line_json(line: MergedLine) -> dict[str, Any]:
    change = line.change
    return {
        "wall_ms": line.wall_ms,
        "file": line.path,
        "topic": change.topic_partition[0],
        "partition": change.topic_partition[1],
        "kind": change.kind.value,
        "phase": change.phase.value,
        "requester": str(change.requester),
        "target": None if change.target is None else str(change.target),
        "leader_epoch": change.leader_epoch,
        "partition_epoch": change.partition_epoch,
        "error": change.error.name,
        "detail": change.detail,
        "line": line.text,
    }


def run(args: argparse.Namespace) -> int:
    """Run ``replog state-change-log`` on parsed arguments; returns the exit status."""
    filters = _Filters(args.start_time, args.end_time, args.topic, args.partitions)
    bad_lines: list[str] = []
    try:
        merged = [line for line in merge_files(args.files, bad_lines) if filters.accept(line)]
    except OSError as exc:
        return fail(COMMAND, exc)
    for bad in bad_lines:
        print(f"replog {COMMAND}: skipped {bad}", file=sys.stderr)
    if args.output == "json":
        print_json({"records": [_line_json(line) for line in merged], "skipped": bad_lines})
    else:
        for line in merged:
            print(line.text)
    return EXIT_OK
