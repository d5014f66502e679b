"""A broker whose storage can lose power: ``python -m tests.faults.powerloss_broker --config F``.

Same contract as ``python -m replog.broker`` (one JSON line when serving, SIGTERM stops), but
the ``LogManager`` runs on a ``FaultInjectingFileSystem`` rooted at the broker's log dir. On
SIGUSR1 it models a power cut: ``crash(tear=True)`` puts every file the broker wrote back to its
last fsynced content (plus a seeded torn prefix of the first unsynced append), then the process
dies at once with ``os._exit(137)`` -- no flush, no checkpoint, no goodbye to the coordinator.
Restart the broker with the ordinary module afterwards: the files on disk are what a disk would
hold after the outage.

The ``Broker`` has no filesystem parameter, so this wrapper patches ``LogManager.open`` (the one
place the broker opens its logs) before the broker starts.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from typing import Any

from replog.broker.__main__ import serve
from replog.broker.config import BrokerConfig
from replog.broker.shell.broker import Broker
from replog.log import FaultInjectingFileSystem, LogManager

POWER_LOSS_EXIT = 137


def _patch_log_manager(fs: FaultInjectingFileSystem) -> None:
    original = LogManager.open

    def open_on_fault_fs(*args: Any, **kwargs: Any) -> LogManager:
        kwargs["fs"] = fs
        return original(*args, **kwargs)

    LogManager.open = open_on_fault_fs  # type: ignore[method-assign,assignment]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stderr)
    config = BrokerConfig.from_file(args.config)
    os.makedirs(config.log_dirs[0], exist_ok=True)
    fs = FaultInjectingFileSystem(config.log_dirs[0], seed=config.broker_id)
    _patch_log_manager(fs)

    def lose_power() -> None:
        fs.crash(tear=True)
        print("power loss: files reverted to their fsynced content", file=sys.stderr, flush=True)
        os._exit(POWER_LOSS_EXIT)

    def on_serving(broker: Broker) -> None:
        del broker
        asyncio.get_running_loop().add_signal_handler(signal.SIGUSR1, lose_power)

    return asyncio.run(serve(config, on_serving=on_serving))


if __name__ == "__main__":
    sys.exit(main())
