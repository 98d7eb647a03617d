"""The Prometheus scrape thread never iterates state the event loop mutates (issue 10 item 8).

A real MetricsServer is started on an event loop running in a thread; a task
on that loop keeps adding and removing partitions, offline dirs and
connections (as a busy broker does) while the test scrapes /metrics over HTTP
from its own thread. Reading those dicts from the scrape thread raises
"dictionary changed size during iteration" (an HTTP 500); a snapshot taken on
the loop never does, and its numbers are consistent with one loop state.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from kavka.broker.client_quotas import ClientQuotas
from kavka.broker.metrics import MetricsServer
from kavka.metadata.image import MetadataImage

BASE = 20_000  # partitions always present: iterating them spans many GIL switches
DIRS = ["/data/a", "/data/b"]


class FakeLogManager:
    def __init__(self) -> None:
        self.log_dirs = list(DIRS)
        self.offline_dirs: dict[str, str] = {}
        self.offline_partitions: dict[tuple[str, int], bool] = {}

    @property
    def offline_log_directory_count(self) -> int:
        return len(self.offline_dirs)

    def is_offline(self, topic: str, partition: int) -> bool:
        return (topic, partition) in self.offline_partitions


@pytest.fixture
def churning_node() -> Iterator[tuple[SimpleNamespace, asyncio.AbstractEventLoop, MetricsServer]]:
    old_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, so a race shows up within a few scrapes
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    lm = FakeLogManager()
    partitions: dict[_Tp, object] = {}
    for i in range(BASE):
        partitions[_Tp("t", i)] = object()
    node = SimpleNamespace(log_manager=lm, replica_manager=SimpleNamespace(partitions=partitions, leader_partitions=list,
                                                                           isr_shrinks=0, isr_expands=0, bytes_out={}, bytes_in={}),
                           server=SimpleNamespace(connections=set()), replica_fetchers=None, assignments=None,
                           quorum_controller=None, client_quotas=ClientQuotas(2, 1.0, MetadataImage), transactions=None,
                           broker_state=3, remote_log_manager=None)
    stop = asyncio.Event()

    async def churn() -> None:
        n = 0
        while not stop.is_set():
            for _ in range(500):
                n += 1
                partitions[_Tp("churn", n)] = object()
                lm.offline_partitions[("churn", n)] = True
                node.server.connections.add(n)
                if n > 50:
                    del partitions[_Tp("churn", n - 50)]
                    del lm.offline_partitions[("churn", n - 50)]
                    node.server.connections.discard(n - 50)
                if n % 97 == 0:
                    lm.offline_dirs[DIRS[n % 2]] = "EIO"
                elif n % 89 == 0:
                    lm.offline_dirs.pop(DIRS[n % 2], None)
                if n % 50 == 0:
                    time.sleep(0)  # let other threads run mid-burst, as real handlers do
            await asyncio.sleep(0)

    async def start() -> MetricsServer:
        return MetricsServer(node, "127.0.0.1", 0)  # type: ignore[arg-type]

    server = asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    task = asyncio.run_coroutine_threadsafe(churn(), loop)
    try:
        yield node, loop, server
    finally:
        loop.call_soon_threadsafe(stop.set)
        task.result(10)
        server.close()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
        sys.setswitchinterval(old_interval)


class _Tp:
    __slots__ = ("topic", "partition")

    def __init__(self, topic: str, partition: int) -> None:
        self.topic, self.partition = topic, partition

    def __hash__(self) -> int:
        return hash((self.topic, self.partition))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Tp) and (self.topic, self.partition) == (other.topic, other.partition)


def test_scrape_while_the_loop_mutates_never_fails(churning_node) -> None:  # noqa: ANN001
    node, loop, server = churning_node
    failures: list[str] = []
    scrapes = 0
    deadline = time.monotonic() + 4.0
    while time.monotonic() < deadline and scrapes < 60:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=20) as r:
                text = r.read().decode()
        except urllib.error.HTTPError as e:
            failures.append(f"HTTP {e.code}: {e.read().decode(errors='replace')[-200:]}")
            scrapes += 1
            continue
        scrapes += 1
        values = {s.name: s.value for fam in text_string_to_metric_families(text) for s in fam.samples
                  if not s.labels}
        # One loop state: the churning partitions are exactly the offline ones (<= 50 of them).
        parts = values["kafka_server_replicamanager_partitioncount"]
        offline = values["kafka_server_replicamanager_offlinereplicacount"]
        assert parts - BASE == offline, (parts, offline)
        assert 0 <= offline <= 50
    assert scrapes >= 5, "too few scrapes to mean anything"
    assert failures == [], f"{len(failures)} of {scrapes} scrapes failed, first: {failures[0]}"
