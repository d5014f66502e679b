"""Operator tools: the ``replog`` subcommands that manage a running cluster.

Each tool talks to the cluster only through the Kafka protocol, via replog's own public client
(``replog.client``), never by writing the metadata store, so it works against any broker that
serves the same APIs. Option names follow Kafka's own tools (``--bootstrap-server``,
``--topic``, ...) so an operator's habits carry over; every tool has ``--output json``.

Exit status, shared by every tool (``replog.tools.output``): 0 when the operation succeeded,
1 when it failed (the reason is printed on stderr), 2 on a usage error (argparse's convention).

``register_tools(subparsers)`` adds the tools to the ``replog`` command line and returns, by
command name, the function that runs each one on the parsed arguments.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from replog.tools import (
    configs,
    console_consumer,
    console_producer,
    consumer_groups,
    consumer_perf,
    delete_records,
    elect_leaders,
    get_offsets,
    log_dirs,
    metadata_quorum,
    producer_perf,
    reassign,
    state_change_log,
    topics,
    verify_replicas,
)

__all__ = ["ToolRunner", "register_tools"]

#: runs one tool on its parsed arguments, returning the exit status
ToolRunner = Callable[[argparse.Namespace], int]


def register_tools(
    subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
) -> dict[str, ToolRunner]:
    """Add every operator tool as a subcommand; returns {command name: runner}."""
    runners: dict[str, ToolRunner] = {}
    for module in (
        topics,
        state_change_log,
        reassign,
        elect_leaders,
        consumer_groups,
        verify_replicas,
        console_producer,
        console_consumer,
        get_offsets,
        configs,
        log_dirs,
        delete_records,
        producer_perf,
        consumer_perf,
        metadata_quorum,
    ):
        parser = subparsers.add_parser(module.COMMAND, help=module.HELP, description=module.__doc__)
        module.add_arguments(parser)
        runners[module.COMMAND] = module.run
    return runners
