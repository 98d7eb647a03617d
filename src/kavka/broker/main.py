"""Process entry point for `kavka server start`: event loop, signals, exit codes."""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import resource
import signal
import sys

from kavka.broker.node import BrokerNode, StartupError
from kavka.config import BrokerConfig
from kavka.storage.errors import StorageError

log = logging.getLogger("kavka.broker")


def _setup_logging() -> None:
    root = logging.getLogger()
    if not root.handlers:
        logging.basicConfig(
            level=logging.INFO,
            format="[%(asctime)s] %(levelname)s %(name)s: %(message)s",
            stream=sys.stderr,
        )
    # KAVKA_LOG_LEVELS=kavka.server=DEBUG,kavka.raft=WARNING: per-logger levels (log4j's role in Kafka).
    for item in os.environ.get("KAVKA_LOG_LEVELS", "").split(","):
        name, _, level = item.strip().rpartition("=")
        if name and level.upper() in logging.getLevelNamesMapping():
            logging.getLogger(name).setLevel(level.upper())


def _raise_open_file_limit() -> None:
    """Raise the soft open-file limit to the hard one, as Kafka's docs tell operators to (each
    partition with data holds its active segment's descriptor, each connection one). The soft
    limit is often 1,024 where the hard one allows far more; lowering is left to the operator."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as e:  # an unlimited hard limit the kernel refuses as a soft one
        log.warning("open-file limit %s left as it is (hard limit %s): %s", soft, hard, e)
        return
    log.info("raised the open-file limit from %s to the hard limit %s", soft, hard)


async def _serve(config: BrokerConfig) -> int:
    try:
        node = BrokerNode(config)
        await node.start()
    except (StartupError, StorageError, OSError) as e:
        log.error("cannot start: %s", e)
        return 1
    # Everything built at start-up (modules, the wire schemas, the metadata image, the logs'
    # state) lives as long as the process: moved out of the cyclic collector's generations, a
    # full collection scans only what came after, instead of pausing the loop for ~100 ms.
    gc.collect()
    gc.freeze()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    node.request_shutdown = stop.set  # KIP-112: every log dir failed
    # The line tests and scripts wait for: every listener is bound.
    ports = ",".join(str(p) for p in node.bound_ports)
    log.info("kavka started (node.id=%d, ports=%s)", node.node_id, ports)
    print(f"KAVKA_READY ports={ports}", flush=True)
    await stop.wait()
    await node.stop()
    return 1 if node.fatal_error else 0


def run_server(config: BrokerConfig) -> int:
    _setup_logging()
    _raise_open_file_limit()
    try:
        import uvloop  # type: ignore[import-not-found]

        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency on Linux
        runner = asyncio.run
    return runner(_serve(config))
