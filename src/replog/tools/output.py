"""What the tools print and the exit statuses they return.

Text goes to stdout for people; ``--output json`` prints exactly one JSON document on stdout for
scripts. A failure is one line on stderr, ``replog <command>: <reason>``, and exit status 1; a
usage error is argparse's message and exit status 2.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

__all__ = [
    "EXIT_FAILED",
    "EXIT_OK",
    "EXIT_USAGE",
    "add_output_argument",
    "fail",
    "print_json",
    "report",
]

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2


def add_output_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--output text|json`` option every tool shares."""
    parser.add_argument(
        "--output",
        choices=("text", "json"),
        default="text",
        help="text for people (default), json for scripts (one document on stdout)",
    )


def print_json(document: Any, out: TextIO | None = None) -> None:
    """Print ``document`` as one JSON document (keys in a stable order) and a newline."""
    stream = out if out is not None else sys.stdout
    stream.write(json.dumps(document, sort_keys=True) + "\n")


def fail(command: str, reason: object) -> int:
    """Report a failed operation on stderr; returns ``EXIT_FAILED``."""
    print(f"replog {command}: {reason}", file=sys.stderr)
    return EXIT_FAILED


def report(args: argparse.Namespace, document: Any, text: str | list[str]) -> int:
    """A tool's result: ``document`` as JSON with ``--output json``, else ``text`` (lines, or one
    string; nothing when empty); returns ``EXIT_OK``."""
    if args.output == "json":
        print_json(document)
    else:
        body = text if isinstance(text, str) else "\n".join(text)
        if body:
            print(body, file=sys.stdout)
    return EXIT_OK
