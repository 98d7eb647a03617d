"""The console's Tiered storage page in a real headless Chromium against a real kavka broker with
tiered storage (KIP-405, the local-directory plugin): per partition, where its offsets live
(remote only, both, local only) as ListOffsets' earliest, earliest-local, latest-tiered and latest
answer them, and the leader's local bytes; a topic without remote storage is not listed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kavka.client.admin import AdminClient, NewTopic
from kavka.client.fetcher import Fetcher
from kavka.client.producer import Producer, ProducerConfig
from tests.broker_harness import BrokerProcess, free_port
from tests.console_harness import BROWSER_ARGS, CHROMIUM, Console, shot
from tests.wait import wait_until

playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect

QUOTA = 1 << 20  # remote.log.manager.fetch.max.bytes.per.second: over the ~150 KiB read below, so it never waits

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (scripts/setup.sh --test)")


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    root = tmp_path_factory.mktemp("console-tiered")
    b = BrokerProcess(root, overrides={
        "remote.log.storage.system.enable": "true",
        "remote.log.storage.manager.class.name": "local",
        "rsm.config.dir": str(root / "remote"),
        "remote.log.manager.task.interval.ms": "200",
        "log.retention.check.interval.ms": "200",
        "remote.log.metadata.topic.num.partitions": "1",
        "metrics.prometheus.port": str(free_port()),  # the page reads the remote fetch quota's measure there
        "remote.log.manager.fetch.max.bytes.per.second": str(QUOTA),
    })
    b.format()
    b.start()
    try:
        yield b
    finally:
        b.stop()


def test_the_tiered_page_shows_where_each_partitions_offsets_live(broker: BrokerProcess, tmp_path: Path) -> None:
    name, plain = "tiered-orders", "local-only"
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([
            NewTopic(name, 2, 1, {"remote.storage.enable": "true", "segment.bytes": "8192", "local.retention.bytes": "16384",
                                  "retention.ms": "-1"}),
            NewTopic(plain, 1, 1)])
        with Producer(broker.bootstrap, ProducerConfig(enable_idempotence=False)) as p:
            for i in range(160):
                p.send(name, b"%04d" % i + b"x" * 1000, partition=0)
                if i % 4 == 3:
                    p.flush()  # batches well under segment.bytes
            p.send(name, b"one record", partition=1)
            p.flush()
        tp = (name, 0)

        def offsets() -> tuple[int, int, int, int]:
            return tuple(admin.list_offsets({tp: s})[tp].offset  # type: ignore[return-value]
                         for s in ("earliest", "earliest-local", "latest-tiered", "latest"))

        # Closed segments copied, and the local ones beyond local.retention.bytes deleted.
        wait_until(lambda: (lambda o: o[1] > 0 and o[2] >= o[1])(offsets()), 60, message="segments tiered and deleted locally")
        console = Console(broker.bootstrap, tmp_path / "console.log")
        try:
            with playwright_sync.sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
                try:
                    page: Any = browser.new_page(viewport={"width": 1280, "height": 800})
                    page.set_default_timeout(20_000)
                    page.goto(console.url + "/")
                    page.click("header nav a:text('Tiered storage')")
                    expect(page.locator("h1")).to_have_text("Tiered storage")
                    assert page.locator(f".tiered-topic[data-topic='{plain}']").count() == 0
                    row = page.locator(f"#tiered-{name} tr[data-partition='0']")

                    def shown() -> tuple[int, int, int, int]:
                        return tuple(int(row.locator(f"td.{c}").inner_text())  # type: ignore[return-value]
                                     for c in ("log-start", "local-start", "tiered-offset", "end"))

                    # The page and the admin API agree (the copier may move on between two reads:
                    # read again until one page matches the offsets asked right after it).
                    def sizes() -> dict[str, int]:
                        dirs = admin.describe_log_dirs([1], [name])[1]
                        return {("remote" if d.path.startswith("remote:") else "local"): r.size
                                for d in dirs for r in d.replicas if r.partition == 0 and not r.is_future}

                    def shown_bytes() -> dict[str, int]:
                        return {k: int(row.locator(f"td.{k}-bytes").get_attribute("data-bytes") or -1)
                                for k in ("local", "remote")}

                    def agree() -> bool:
                        page.reload()
                        return shown() == offsets() and shown_bytes() == sizes()

                    wait_until(agree, 30, message="the page shows ListOffsets' offsets and DescribeLogDirs' bytes")
                    start, local, tiered, end = shown()
                    assert start == 0 and 0 < local <= tiered < end == 160
                    assert int(row.locator("td.remote-only").inner_text()) == local
                    assert int(row.locator("td.copy-lag").inner_text()) == end - tiered - 1
                    # The leader's local dir holds only the tail (local.retention.bytes), the remote
                    # store the copied segments.
                    b = shown_bytes()
                    assert b["local"] < 3 * 16384 < b["remote"]
                    one = page.locator(f"#tiered-{name} tr[data-partition='1']")
                    expect(one.locator("td.tiered-offset")).to_have_text("none")  # its only segment is active
                    expect(one.locator("td.copy-lag")).to_have_text("1")

                    # The remote fetch quota in use: read the offsets only in remote storage, and the
                    # page shows the broker's measure of those reads against the configured quota.
                    [entry] = admin.describe_configs("broker", "1", keys=["remote.log.manager.fetch.max.bytes.per.second"])
                    assert entry.value == str(QUOTA)
                    q = page.locator("#remote-fetch-quota tr[data-broker='1']")
                    assert float(q.locator("td.rate").get_attribute("data-rate") or -1) == 0.0  # nothing read remotely yet
                    with Fetcher(broker.bootstrap) as f:
                        assert sum(len(c.offsets) for c in f.read_range(name, 0, 0, local)) == local
                    page.reload()
                    assert q.locator("td.quota").get_attribute("data-quota") == entry.value
                    rate = float(q.locator("td.rate").get_attribute("data-rate") or 0)
                    assert rate > 0
                    assert q.locator("td.pct").inner_text().strip() == f"{round(100 * rate / QUOTA, 1)}%"
                    shot(page, "tiered")
                finally:
                    browser.close()
        finally:
            console.stop()
        assert "Traceback" not in console.log.read_text()
