"""kavka's web console in a real headless Chromium against a real 3-node kavka cluster.

One cluster (three combined nodes, two log dirs each), one `kavka console --port 0` process and
one browser per module. Each page is compared with what kavka's admin API says; the mutations
(create a topic, produce, reset a group's offsets, delete a group) go through the page's form
and its confirm step, and their effect is read back through the admin API. The screenshots the
README shows are taken here (docs/images/console-*.png, rewritten when KAVKA_SCREENSHOTS=1), so they
stay current.
"""

from __future__ import annotations

import json
import re
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kavka.client.admin import AdminClient, NewTopic
from kavka.client.fetcher import Fetcher
from kavka.client.producer import Producer, ProducerConfig
from kavka.console.views import eligible_leaders
from kavka.operations import THROTTLE_KEY, balance_plan
from tests.broker_harness import Cluster, free_port
from tests.console_harness import BROWSER_ARGS, CHROMIUM, Console, shot
from tests.integration.helpers import ck_consumer, ck_producer
from tests.wait import wait_until

playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (scripts/setup.sh --test)")

@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    # The test-only disk fault switch (kavka.faults): a dir listed in a node's control file fails
    # with EIO, as a dying disk does (the last test fails one).
    root = tmp_path_factory.mktemp("console-cluster")
    # Each node's Prometheus endpoint on a port of its own: the console finds them through
    # DescribeConfigs (metrics.prometheus.port) for the Overview's bytes per second.
    racks = {1: "/dc1/r1", 2: "/dc1/r2", 3: "/dc2/r1"}
    c = Cluster(root, 3, log_dirs=2, overrides={"kavka.test.fault.injection.enable": "true"},
                node_overrides={i: {"broker.rack": rack, "metrics.prometheus.port": str(free_port())} for i, rack in racks.items()})
    for i in c.nodes:
        (root / f"failing-dirs-{i}").write_text("")
    c.start(env=lambda i: {"KAVKA_FAULT_INJECTION_FILE": str(root / f"failing-dirs-{i}")})
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def admin(cluster: Cluster) -> Iterator[AdminClient]:
    with AdminClient(cluster.bootstrap) as a:
        yield a


@pytest.fixture(scope="module")
def console(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    c = Console(cluster.bootstrap, tmp_path_factory.mktemp("console") / "console.log")
    try:
        yield c
    finally:
        c.stop()
        assert "Traceback" not in c.log.read_text(), c.log.read_text()


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    with playwright_sync.sync_playwright() as pw:
        ctx = pw.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")), executable_path=CHROMIUM, headless=True,
            args=BROWSER_ARGS, viewport={"width": 1280, "height": 800})
        ctx.set_default_timeout(20_000)
        try:
            yield ctx
        finally:
            ctx.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    p = browser.new_page()
    try:
        yield p
    finally:
        p.close()


def cells(page: Any, selector: str) -> list[list[str]]:
    return page.eval_on_selector_all(selector, "rows => rows.map(r => Array.from(r.cells).map(c => c.innerText.trim()))")


def metric(admin: AdminClient, broker: int, name: str) -> float:
    """One unlabelled gauge from a broker's Prometheus endpoint (its port read through DescribeConfigs)."""
    [port] = [e.value for e in admin.describe_configs("broker", str(broker), keys=["metrics.prometheus.port"])]
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        [value] = [line.split()[1] for line in r.read().decode().splitlines() if line.startswith(name + " ")]
    return float(value)


def unique(prefix: str) -> str:
    return f"{prefix}-{int(time.time() * 1000) % 10**9}"


# ---------------------------------------------------------------------- topics


def test_create_a_topic_through_the_form_and_its_page_matches_the_admin_api(page: Any, console: Console, admin: AdminClient) -> None:
    name = unique("created")
    page.goto(console.url + "/topics")
    page.click("#create-topic summary")
    page.fill("#create-topic input[name=name]", name)
    page.fill("#create-topic input[name=partitions]", "3")
    page.fill("#create-topic input[name=replication_factor]", "2")
    page.fill("#create-topic textarea[name=configs]", "retention.ms=3600000")
    page.click("#create-topic button[type=submit]")
    expect(page.locator("h1")).to_have_text(f"Create topic {name}?")
    assert name not in {t.name for t in admin.list_topics()}  # nothing happens before the confirm
    page.click("#confirm")
    expect(page.locator(".notice")).to_have_text("Topic created.")
    assert page.title() == f"{name} · kavka"  # the title is the name, no markup in it
    assert page.locator("#topic-actions").count() == 1  # the change forms once, in the page body
    [d] = admin.describe_topics([name])
    assert len(d.partitions) == 3 and d.replication_factor == 2
    rows = cells(page, "#partitions tbody tr")
    assert [(int(r[0]), int(r[1]), r[3], r[4]) for r in rows] == [
        (p.partition, p.leader, ",".join(map(str, p.replicas)), ",".join(map(str, p.isr))) for p in d.partitions]
    # KIP-966: the ELR columns show what DescribeTopicPartitions answers (empty lists on a healthy topic).
    elr = eligible_leaders(admin, name)
    assert elr is not None and page.locator("#partitions th", has_text="last known ELR").count() == 1
    assert [(r[9], r[10]) for r in rows] == [(",".join(map(str, elr[p.partition][0])) or "-",
                                              ",".join(map(str, elr[p.partition][1])) or "-") for p in d.partitions]
    config = dict((r[0], (r[1], r[2])) for r in cells(page, "#configs tbody tr"))
    assert config["retention.ms"] == ("3600000", "DYNAMIC_TOPIC_CONFIG")

    # The partition table is live: records produced elsewhere show up without a reload.
    p = ck_producer(admin_bootstrap(admin))
    for i in range(3):
        p.produce(name, value=b"live %d" % i, partition=0)
    assert p.flush(30) == 0
    expect(page.locator("#partitions tr[data-partition='0'] td.end")).to_have_text("3", timeout=15_000)

    page.goto(console.url + "/topics")
    page.fill("#topic-filter", name)
    visible = page.eval_on_selector_all("#topics tbody tr", "rows => rows.filter(r => !r.hidden).map(r => r.dataset.topic)")
    assert visible == [name]
    shot(page, "topics")


def test_change_a_topic_config_partitions_records_then_delete_it(page: Any, console: Console, admin: AdminClient) -> None:
    name = unique("changed")
    admin.create_topics([NewTopic(name, 2, 2)])
    # kavka's own producer, closed now: a live librdkafka producer would re-create the topic
    # (auto.create.topics.enable) when it refreshes its metadata after the delete below.
    with Producer(admin_bootstrap(admin), ProducerConfig(enable_idempotence=False)) as p:
        for i in range(10):
            p.send(name, b"r%d" % i, partition=0)
        p.flush()
    url = console.url + f"/topics/{name}"

    def configs() -> dict[str, tuple[str | None, str]]:
        return {e.name: (e.value, e.source) for e in admin.describe_configs("topic", name, include_documentation=False)}

    page.goto(url)
    page.fill("#set-config input[name=key]", "retention.ms")
    page.fill("#set-config input[name=value]", "7200000")
    page.click("#set-config button")
    expect(page.locator("h1")).to_have_text(f"Change a config of {name}?")
    assert configs()["retention.ms"][1] != "DYNAMIC_TOPIC_CONFIG"
    page.click("#confirm")
    expect(page.locator(".notice")).to_have_text("Done: set config.")
    assert configs()["retention.ms"] == ("7200000", "DYNAMIC_TOPIC_CONFIG")
    expect(page.locator("#configs tr[data-config='retention.ms'] td").nth(2)).to_have_text("DYNAMIC_TOPIC_CONFIG")

    page.select_option("#delete-config select[name=key]", "retention.ms")
    page.click("#delete-config button")
    page.click("#confirm")
    expect(page.locator(".notice")).to_have_text("Done: delete config.")
    assert configs()["retention.ms"][1] != "DYNAMIC_TOPIC_CONFIG"

    page.fill("#add-partitions input[name=partitions]", "1")
    page.click("#add-partitions button")
    expect(page.locator("#error-message")).to_have_text(
        f"Topic '{name}' has 2 partitions: the new count must be more, got 1.")
    page.goto(url)
    page.fill("#add-partitions input[name=partitions]", "4")
    page.click("#add-partitions button")
    page.click("#confirm")
    expect(page.locator("#partitions tbody tr")).to_have_count(4)
    [d] = admin.describe_topics([name])
    assert len(d.partitions) == 4

    page.fill("#delete-records input[name=partition]", "0")
    page.fill("#delete-records input[name=before]", "6")
    page.click("#delete-records button")
    expect(page.locator("h1")).to_have_text(f"Delete records of {name}?")
    assert admin.list_offsets({(name, 0): "earliest"})[(name, 0)].offset == 0
    page.click("#confirm")
    expect(page.locator("#partitions tr[data-partition='0'] td.start")).to_have_text("6")
    assert admin.list_offsets({(name, 0): "earliest"})[(name, 0)].offset == 6

    page.click("#delete-topic button")
    expect(page.locator("h1")).to_have_text(f"Delete topic {name}?")
    assert name in {t.name for t in admin.list_topics()}
    page.click("#confirm")
    expect(page.locator(".notice")).to_have_text(f"Topic {name} deleted.")
    wait_until(lambda: name not in {t.name for t in admin.list_topics()}, 20, message="the topic gone")
    status, body = console.get(f"/topics/{name}")
    assert status == 404


# ---------------------------------------------------------------------- messages


def test_produce_a_test_record_and_browse_by_offset_and_by_timestamp(page: Any, console: Console, admin: AdminClient) -> None:
    name = unique("msgs")
    admin.create_topics([NewTopic(name, 1, 3)])
    base = int(time.time() * 1000) - 3_600_000
    p = ck_producer(admin_bootstrap(admin))
    for i in range(20):
        p.produce(name, key=f"k{i}".encode(), value=json.dumps({"n": i}).encode(), partition=0, timestamp=base + i * 1000,
                  headers=[("h", b"\x00\xff")] if i == 7 else None)
    assert p.flush(30) == 0

    page.goto(console.url + f"/topics/{name}/messages?partition=0&offset=5&order=oldest&limit=3")
    assert [r[0] for r in cells(page, "#messages tbody tr")] == ["5", "6", "7"]
    row7 = page.locator("#messages tr[data-offset='7']")
    expect(row7.locator(".key pre")).to_have_text("k7")
    expect(row7.locator(".value pre.json")).to_have_text('{\n  "n": 7\n}')
    expect(row7.locator("td").nth(4)).to_contain_text("00 ff")  # a binary header shows as hex

    at = base + 12_500  # between records 12 and 13
    ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at // 1000)) + f".{at % 1000:03d}"
    page.goto(console.url + f"/topics/{name}/messages?partition=0&timestamp={ts}&order=oldest&limit=2")
    assert [r[0] for r in cells(page, "#messages tbody tr")] == ["13", "14"]
    assert admin.list_offsets({(name, 0): base + 12_500})[(name, 0)].offset == 13

    page.goto(console.url + f"/topics/{name}/messages?partition=0&order=newest&filter=k1")
    assert [r[0] for r in cells(page, "#messages tbody tr")] == ["19", "18", "17", "16", "15", "14", "13", "12", "11", "10", "1"]

    page.goto(console.url + f"/topics/{name}/messages?partition=0")
    page.click("#produce summary")
    page.fill("#produce input[name=key]", "<img src=x id=injected>")  # record bytes are text, never markup
    page.fill("#produce textarea[name=value]", "first")
    page.click("#produce button[type=submit]")
    page.click("#confirm")
    expect(page.locator("#messages tbody tr").first.locator(".key pre")).to_have_text("<img src=x id=injected>")
    expect(page.locator("#injected")).to_have_count(0)

    page.click("#produce summary")
    page.fill("#produce input[name=key]", "from-the-console")
    page.fill("#produce textarea[name=value]", "hello, kavka")
    page.fill("#produce textarea[name=headers]", "source=console")
    page.click("#produce button[type=submit]")
    expect(page.locator("h1")).to_have_text(f"Produce a record to {name}?")
    assert admin.list_offsets({(name, 0): "latest"})[(name, 0)].offset == 21
    page.click("#confirm")
    expect(page.locator(".notice")).to_have_text("Record produced.")
    assert admin.list_offsets({(name, 0): "latest"})[(name, 0)].offset == 22
    top = page.locator("#messages tbody tr").first
    expect(top).to_have_attribute("data-offset", "21")
    expect(top.locator(".value pre")).to_have_text("hello, kavka")
    expect(top.locator("td").nth(4)).to_contain_text("source: console")
    shot(page, "messages")


def admin_bootstrap(admin: AdminClient) -> str:
    return ",".join(f"{h}:{p}" for h, p in admin.bootstrap)


# ---------------------------------------------------------------------- consumer groups


def test_group_lag_then_reset_offsets_with_a_dry_run_first_then_delete(page: Any, console: Console, admin: AdminClient) -> None:
    name, gid = unique("lagged"), unique("group")
    admin.create_topics([NewTopic(name, 2, 2)])
    p = ck_producer(admin_bootstrap(admin))
    for i in range(30):
        p.produce(name, value=b"v%d" % i, partition=i % 2)
    assert p.flush(30) == 0
    admin.alter_group_offsets(gid, {(name, 0): 5, (name, 1): 10})  # an Empty group with committed offsets

    page.goto(console.url + f"/groups/{gid}")
    expect(page.locator("#group-state")).to_have_text("Empty")
    rows = {r[0] + "-" + r[1]: (r[2], r[3], r[4]) for r in cells(page, "#offsets tbody tr")}
    assert rows == {f"{name}-0": ("5", "15", "10"), f"{name}-1": ("10", "15", "5")}
    expect(page.locator("#total-lag")).to_have_text("15")
    assert page.locator("#lag-chart rect").count() == 2

    # The lag trend: 4 more records on partition 0; at the page's next refresh its lag is 14,
    # and the trend holds both samples, in order (the page loads and refreshes are its samples).
    for i in range(4):
        p.produce(name, value=b"more %d" % i, partition=0)
    assert p.flush(30) == 0
    expect(page.locator(f"#offsets tr[data-tp='{name}-0'] td.lag")).to_have_text("14", timeout=15_000)
    trend = page.get_attribute(f"#offsets tr[data-tp='{name}-0'] td.trend", "data-lags").split(",")
    assert trend[-2:] == ["10", "14"] and set(trend) == {"10", "14"}, trend
    assert set(page.get_attribute(f"#offsets tr[data-tp='{name}-1'] td.trend", "data-lags").split(",")) == {"5"}
    assert page.locator("#offsets td.trend svg polyline").count() == 2
    shot(page, "group")

    page.select_option("#reset select[name=target]", "earliest")
    page.click("#reset button[type=submit]")
    expect(page.locator("h1")).to_contain_text("dry run")
    assert [r[3] for r in cells(page, "#plan tbody tr")] == ["0", "0"]
    assert admin.list_group_offsets(gid) == {(name, 0): 5, (name, 1): 10}  # a dry run commits nothing
    page.click("#confirm")
    expect(page.locator(".notice")).to_have_text("Offsets reset.")
    assert admin.list_group_offsets(gid) == {(name, 0): 0, (name, 1): 0}
    expect(page.locator("#total-lag")).to_have_text("34")

    page.select_option("#reset select[name=target]", "offset")
    page.fill("#reset input[name=value]", "12")
    page.click("#reset button[type=submit]")
    assert [r[3] for r in cells(page, "#plan tbody tr")] == ["12", "12"]
    page.click("#confirm")
    assert admin.list_group_offsets(gid) == {(name, 0): 12, (name, 1): 12}

    page.goto(console.url + "/groups")
    expect(page.locator(f"#groups tr[data-group='{gid}']")).to_have_count(1)
    page.goto(console.url + f"/groups/{gid}")
    page.click("#delete button")
    expect(page.locator("h1")).to_have_text(f"Delete consumer group {gid}?")
    page.click("#confirm")
    expect(page.locator(".notice")).to_contain_text(f"Group {gid} deleted.")
    assert gid not in {g.group_id for g in admin.list_groups()}


def test_an_active_groups_members_show_and_its_offsets_cannot_be_reset(page: Any, console: Console, admin: AdminClient) -> None:
    name, gid = unique("active"), unique("members")
    admin.create_topics([NewTopic(name, 2, 1)])
    c = ck_consumer(admin_bootstrap(admin), {"group.id": gid, "client.id": "console-test-member",
                                               "session.timeout.ms": 10_000})
    try:
        c.subscribe([name])
        wait_until(lambda: (c.poll(0.2), len(c.assignment()) == 2)[1], 30, message="the consumer's assignment")
        desc = admin.describe_group(gid)
        assert desc.state == "Stable" and len(desc.members) == 1
        page.goto(console.url + f"/groups/{gid}")
        expect(page.locator("#group-state")).to_have_text("Stable")
        [member] = cells(page, "#members tbody tr")
        assert (member[0], member[1]) == (desc.members[0].member_id, "console-test-member")
        assert member[3] == f"{name}-0, {name}-1"
        page.select_option("#reset select[name=target]", "latest")
        page.fill("#reset input[name=topic]", name)
        page.click("#reset button[type=submit]")
        expect(page.locator("main .error")).to_contain_text("no active members")
        expect(page.locator("#confirm")).to_have_count(0)  # nothing to confirm
        token = next(x["value"] for x in page.context.cookies(console.url) if x["name"] == "kavka_console_csrf")
        status, body = console.post(f"/groups/{gid}/reset", {"target": "latest", "topic": name, "confirmed": "1", "csrf": token},
                                    {"Cookie": f"kavka_console_csrf={token}"})  # a confirm sent anyway
        assert status == 409 and "has no active members" in body
        assert admin.list_group_offsets(gid) == {}
    finally:
        c.close()


# ---------------------------------------------------------------------- disks


def test_disks_page_lists_every_log_dir_with_the_replicas_describe_log_dirs_reports(page: Any, console: Console, admin: AdminClient) -> None:
    name = unique("ondisk")
    admin.create_topics([NewTopic(name, 2, 3)])
    page.goto(console.url + "/disks")
    dirs = admin.describe_log_dirs()
    want = {f"{b}:{d.path}" for b, ds in dirs.items() for d in ds}
    shown = set(page.eval_on_selector_all("#disks tbody tr", "rows => rows.map(r => r.dataset.dir)"))
    assert shown == want and len(want) == 6
    assert page.locator("#disks td.bad").count() == 0

    def holds(broker: int) -> set[str]:
        return {f"{r.topic}-{r.partition}" for d in admin.describe_log_dirs([broker])[broker] for r in d.replicas if r.topic == name}

    assert holds(1) == {f"{name}-0", f"{name}-1"}
    page.reload()
    text = page.text_content("#disks") or ""  # the replica lists sit in closed <details>
    assert text.count(f"{name}-0") == 3 and text.count(f"{name}-1") == 3


# ---------------------------------------------------------------------- disks: moves, throttle, balancer


def where(admin: AdminClient, broker: int, topic: str, partition: int = 0) -> tuple[str | None, bool]:
    """The dir holding the broker's replica, and whether a move of it is still running."""
    dirs = admin.describe_log_dirs([broker], [topic])[broker]
    current = next((d.path for d in dirs for r in d.replicas if r.partition == partition and not r.is_future), None)
    moving = any(r.partition == partition and r.is_future for d in dirs for r in d.replicas)
    return current, moving


def fill(admin: AdminClient, topic: str, partition: int, total: int) -> None:
    with Producer(admin_bootstrap(admin), ProducerConfig(enable_idempotence=False)) as p:
        for i in range(total // 32_768):
            p.send(topic, bytes([i % 251]) * 32_768, partition=partition)
        p.flush()


def test_move_a_replica_between_log_dirs_under_a_throttle_and_watch_it_finish(page: Any, console: Console, admin: AdminClient) -> None:
    name = unique("moved")
    admin.create_topics([NewTopic(name, assignments={0: [1]})])
    fill(admin, name, 0, 2 << 20)
    source, _ = wait_until(lambda: (lambda w: w if w[0] else None)(where(admin, 1, name)), 20, message="the replica on disk")
    dest = next(d.path for d in admin.describe_log_dirs([1])[1] if d.path != source)

    page.goto(console.url + "/disks")
    page.select_option("#throttle select[name=broker]", "1")
    page.fill("#throttle input[name=rate]", "250000")
    page.click("#throttle button")
    expect(page.locator("h1")).to_have_text("Change the move throttle of broker 1?")
    page.click("#confirm")
    expect(page.locator(".notice")).to_have_text("Move throttle changed.")
    [entry] = admin.describe_configs("broker", "1", include_documentation=False, keys=[THROTTLE_KEY])
    assert (entry.value, entry.source) == ("250000", "DYNAMIC_BROKER_CONFIG")
    expect(page.locator("#throttles tr[data-broker='1'] td.rate")).to_have_text("250000 B/s")

    page.select_option("#move select[name=broker]", "1")
    page.fill("#move input[name=topic]", name)
    page.fill("#move input[name=partition]", "0")
    page.fill("#move input[name=dir]", dest)
    page.click("#move button")
    expect(page.locator("h1")).to_have_text(f"Move {name}-0 on broker 1?")
    assert where(admin, 1, name) == (source, False)  # nothing moves before the confirm
    page.click("#confirm")
    expect(page.locator(".notice")).to_contain_text("Move started")
    # About 8 s at 250 kB/s: the page shows the move with its progress while it runs...
    moving = page.locator(f"#disks tr[data-dir='1:{dest}'] .move[data-move='1:{name}-0']")
    expect(moving).to_have_count(1, timeout=15_000)
    expect(moving.locator("progress")).to_have_count(1)
    assert where(admin, 1, name)[1], "the admin API sees the move running too"
    shot(page, "disks")
    # ... and drops it once the copy was swapped in, where the admin API then finds the replica.
    expect(moving).to_have_count(0, timeout=60_000)
    assert where(admin, 1, name) == (dest, False)
    expect(page.locator(f"#disks tr[data-dir='1:{dest}'] td.replicas details")).to_contain_text(f"{name}-0")

    page.fill("#throttle input[name=rate]", "")
    page.click("#throttle button")
    page.click("#confirm")
    expect(page.locator("#throttles tr[data-broker='1'] td.rate")).to_have_text("none")
    [entry] = admin.describe_configs("broker", "1", include_documentation=False, keys=[THROTTLE_KEY])
    assert entry.source != "DYNAMIC_BROKER_CONFIG"


def test_the_disk_balancers_plan_is_reviewed_then_executed(page: Any, console: Console, admin: AdminClient) -> None:
    big, small = unique("heavy"), unique("light")
    admin.create_topics([NewTopic(big, assignments={0: [2]}), NewTopic(small, assignments={0: [2]})])
    fill(admin, big, 0, 1 << 20)
    fill(admin, small, 0, 512 << 10)
    # Both in one dir of broker 2, so the other is far emptier.
    dirs = [d.path for d in admin.describe_log_dirs([2])[2]]
    moves = {(2, t, 0): dirs[0] for t in (big, small) if where(admin, 2, t)[0] != dirs[0]}
    if moves:
        assert set(admin.alter_replica_log_dirs(moves).values()) == {0}
    wait_until(lambda: all(where(admin, 2, t) == (dirs[0], False) for t in (big, small)), 60, message="both in one dir")

    page.goto(console.url + "/disks")
    page.select_option("#balance select[name=broker]", "2")
    page.click("#balance button")
    expect(page.locator("h1")).to_have_text("Balance the log dirs of broker 2: plan")
    plan = balance_plan(admin, 2)  # what kavka log-dirs balance plans from the same DescribeLogDirs
    assert plan.moves, "the dirs are uneven: the balancer must move something"
    shown = {r[0]: (r[2], r[3]) for r in cells(page, "#balance-moves tbody tr")}
    assert shown == {f"{m.topic}-{m.partition}": (m.source, m.destination) for m in plan.moves}
    before = {d: int(page.get_attribute(f"#balance-bytes tr[data-dir='{d}'] td.before", "data-bytes") or -1) for d in dirs}
    assert before == plan.before
    after = {d: int(page.get_attribute(f"#balance-bytes tr[data-dir='{d}'] td.after", "data-bytes") or -1) for d in dirs}
    assert max(after.values()) - min(after.values()) < max(before.values()) - min(before.values())
    page.click("#confirm")
    expect(page.locator(".notice")).to_have_text("Balance moves started.")
    wait_until(lambda: all(where(admin, 2, m.topic, m.partition) == (m.destination, False) for m in plan.moves), 60,
               message="the planned moves done")


# ---------------------------------------------------------------------- reassignments and elections


def replicas_of(admin: AdminClient, topic: str) -> dict[int, list[int]]:
    [d] = admin.describe_topics([topic])
    return {p.partition: list(p.replicas) for p in d.partitions}


def test_a_throttled_rebalance_plan_runs_to_the_end_and_another_reassignment_is_cancelled(
        page: Any, console: Console, admin: AdminClient) -> None:
    done, slow = unique("rebalanced"), unique("cancelled")
    admin.create_topics([NewTopic(done, assignments={0: [3], 1: [3]}), NewTopic(slow, assignments={0: [3]})])
    fill(admin, done, 0, 256 << 10)
    fill(admin, slow, 0, 1 << 20)

    # The minimal-move planner takes both partitions off broker 3; executed with a throttle.
    page.goto(console.url + "/reassignments")
    expect(page.locator("#ongoing tbody")).to_contain_text("No reassignment in progress.")
    page.fill("#rebalance input[name=topics]", done)
    page.fill("#rebalance input[name=remove]", "3")
    page.fill("#rebalance input[name=throttle]", "10000000")
    page.click("#rebalance button")
    expect(page.locator("h1")).to_have_text("Reassignment plan")
    planned = {r[0]: (r[1], r[2]) for r in cells(page, "#plan tbody tr")}
    assert set(planned) == {f"{done}-0", f"{done}-1"} and all(cur == "3" for cur, _ in planned.values())
    targets = {int(tp.rsplit("-", 1)[1]): [int(b) for b in new.split(",")] for tp, (_, new) in planned.items()}
    assert all(len(t) == 1 and t[0] in (1, 2) for t in targets.values()), targets
    expect(page.locator("#plan-summary")).to_contain_text("moves 2 of 2 replicas")
    assert replicas_of(admin, done) == {0: [3], 1: [3]}  # the review changes nothing
    page.click("#confirm")
    expect(page.locator(".notice")).to_have_text("Reassignment started.")
    wait_until(lambda: replicas_of(admin, done) == targets and not admin.list_partition_reassignments(), 60,
               message="the plan executed")
    [rate] = admin.describe_configs("broker", str(targets[0][0]), include_documentation=False,
                                    keys=["follower.replication.throttled.rate"])
    assert rate.value == "10000000"  # the plan ran throttled
    expect(page.locator("#ongoing tbody")).to_contain_text("No reassignment in progress.", timeout=15_000)
    page.click("#clear-throttles button")
    page.click("#confirm")
    expect(page.locator(".notice")).to_have_text("Throttles cleared.")
    [rate] = admin.describe_configs("broker", str(targets[0][0]), include_documentation=False,
                                    keys=["follower.replication.throttled.rate"])
    assert rate.source != "DYNAMIC_BROKER_CONFIG"

    # One partition moved at 1 kB/s: it stays in progress until cancelled.
    page.goto(console.url + f"/topics/{slow}")
    page.fill("#reassign-partition input[name=replicas]", "1")
    page.fill("#reassign-partition input[name=throttle]", "1000")
    page.click("#reassign-partition button")
    expect(page.locator("#plan tr[data-tp='" + slow + "-0'] td.target")).to_have_text("1")
    page.click("#confirm")
    row = page.locator(f"#ongoing tr[data-tp='{slow}-0']")
    expect(row.locator("td.adding")).to_have_text("1")
    expect(row.locator("td.removing")).to_have_text("3")
    assert set(admin.list_partition_reassignments()) == {(slow, 0)}
    shot(page, "reassignments")
    # Another plan while this one runs is refused (Kafka's rule) unless "while others run" is ticked.
    token = next(c["value"] for c in page.context.cookies(console.url) if c["name"] == "kavka_console_csrf")
    status, body = console.post("/reassignments/plan", {"confirmed": "1", "target": f"{done}\t0\t3", "csrf": token},
                                {"Cookie": f"kavka_console_csrf={token}"})
    assert status == 409 and "existing partition assignment" in body and 'Tick &#34;while others run&#34;' in body, body[:2000]
    assert replicas_of(admin, done) == targets
    row.locator("button").click()
    expect(page.locator("h1")).to_have_text("Cancel reassignment?")
    page.click("#confirm")
    expect(page.locator(".notice")).to_contain_text("Reassignment cancelled")
    assert admin.list_partition_reassignments() == {}
    wait_until(lambda: replicas_of(admin, slow) == {0: [3]}, 20, message="back to its replicas")
    topic_throttles = {e.name: e.source for e in admin.describe_configs("topic", slow, include_documentation=False)}
    assert topic_throttles["leader.replication.throttled.replicas"] != "DYNAMIC_TOPIC_CONFIG"
    expect(page.locator("#ongoing tbody")).to_contain_text("No reassignment in progress.")


def test_preferred_leader_election_from_the_topic_page(page: Any, console: Console, admin: AdminClient) -> None:
    name = unique("elected")
    admin.create_topics([NewTopic(name, assignments={0: [2, 3, 1]})])
    wait_until(lambda: admin.describe_topics([name])[0].partitions[0].leader == 2, 20, message="2 leads")
    # A reordering reassignment makes 3 the preferred replica while 2 keeps leading.
    assert admin.alter_partition_reassignments({(name, 0): [3, 1, 2]})[(name, 0)][0] == 0
    wait_until(lambda: replicas_of(admin, name) == {0: [3, 1, 2]} and len(admin.describe_topics([name])[0].partitions[0].isr) == 3,
               20, message="the new order")
    assert admin.describe_topics([name])[0].partitions[0].leader == 2
    page.goto(console.url + f"/topics/{name}")
    expect(page.locator("#partitions tr[data-partition='0'] td.leader")).to_have_text("2")
    page.fill("#elect input[name=partition]", "0")
    page.select_option("#elect select[name=type]", "preferred")
    page.click("#elect button")
    expect(page.locator("h1")).to_have_text(f"Elect preferred leaders of {name}?")
    page.click("#confirm")
    expect(page.locator("#election-result")).to_have_text(f"Leader election: preferred leader elected for {name}-0.")
    assert admin.describe_topics([name])[0].partitions[0].leader == 3
    expect(page.locator("#partitions tr[data-partition='0'] td.leader")).to_have_text("3")
    page.click("#elect button")  # all partitions again: nothing to do, and it says so
    page.click("#confirm")
    expect(page.locator("#election-result")).to_have_text(f"Leader election: valid leader already elected for {name}-0.")


# ---------------------------------------------------------------------- overview (the topics above are in it)


def test_overview_shows_the_brokers_racks_quorum_and_counts_the_admin_api_reports(page: Any, console: Console, admin: AdminClient) -> None:
    page.goto(console.url + "/")
    cluster = admin.describe_cluster()
    quorum = admin.describe_quorum()
    rows = cells(page, "#brokers tbody tr")
    assert [(r[0].split()[0], r[1], r[2]) for r in rows] == [
        (str(b.node_id), f"{b.host}:{b.port}", b.rack) for b in cluster.brokers]
    assert all(r[3] == "running" for r in rows)
    # The state beyond fenced (controlled shutdown...) is each broker's own BrokerState gauge.
    for b in cluster.brokers:
        state = metric(admin, b.node_id, "kafka_server_kafkaserver_brokerstate")
        assert page.get_attribute(f"#brokers tr[data-broker='{b.node_id}'] td.state", "data-state") == str(int(state)) == "3"
    assert [r[0].split()[0] for r in rows if "controller" in r[0]] == [str(quorum.leader_id)]  # the active controller
    expect(page.locator("#count-brokers")).to_have_text("3")
    expect(page.locator("#count-offline")).to_have_text("0")
    topics = admin.list_topics(include_internal=True)
    expect(page.locator("#count-topics")).to_have_text(str(sum(1 for t in topics if not t.is_internal)))
    expect(page.locator("#count-partitions")).to_have_text(str(sum(t.partition_count for t in topics)))
    assert page.inner_text("#quorum-leader").startswith(f"leader {quorum.leader_id}")
    voters = {r[0] for r in cells(page, "#quorum tbody tr") if r[1] in ("leader", "voter")}
    assert voters == {str(v.node_id) for v in quorum.voters}
    racks = page.inner_text("#racks")
    assert racks.index("dc1") < racks.index("r1") and "dc2" in racks

    # Throughput: records written between two samples of the log end offsets (two page loads),
    # and bytes in and out between two scrapes of the brokers' metrics: the bytes appended are the
    # replica's size on disk (one replica, one segment), and a consumer reading them all once is
    # sent exactly those bytes.
    name = unique("busy")
    admin.create_topics([NewTopic(name, assignments={0: [2]})])
    page.reload()
    with Producer(admin_bootstrap(admin), ProducerConfig(enable_idempotence=False)) as p:
        for i in range(100):
            p.send(name, b"r%d" % i, partition=0)
        p.flush()
    with Fetcher(admin_bootstrap(admin)) as f:
        assert sum(len(cols.offsets) for cols in f.read_range(name, 0, 0, 100)) == 100
    [size] = [r.size for d in admin.describe_log_dirs([2], [name])[2] for r in d.replicas if r.topic == name]
    page.reload()
    row = f"#throughput-topics tr[data-topic='{name}']"
    expect(page.locator(f"{row} td.records")).to_have_text("100")
    assert float(page.inner_text(f"{row} td.rate")) > 0
    assert int(page.inner_text("#throughput-brokers tr[data-broker='2'] td.records")) >= 100
    assert size > 100 * 2
    assert page.get_attribute(f"{row} td.bytes-in", "data-bytes") == str(size)
    assert page.get_attribute(f"{row} td.bytes-out-rate", "data-bytes") == str(size)
    assert page.inner_text(f"{row} td.bytes-in-rate").endswith("/s")
    assert page.inner_text("#throughput-brokers tr[data-broker='2'] td.bytes-in-rate") != "-"
    expect(page.locator("#metrics-unreachable")).to_have_count(0)
    shot(page, "overview")


# ---------------------------------------------------------------------- bad input, CSRF, read-only


def test_bad_input_gives_a_readable_message_never_a_stack_trace(console: Console, admin: AdminClient) -> None:
    name = unique("bad")
    admin.create_topics([NewTopic(name, 1, 1)])
    cases = [
        ("/topics/no-such-topic", 404, "Topic 'no-such-topic' does not exist."),
        ("/topics/no-such-topic/messages", 404, "Topic 'no-such-topic' does not exist."),
        (f"/topics/{name}/messages?offset=twelve", 400, "The offset must be a whole number, got 'twelve'."),
        (f"/topics/{name}/messages?offset=-3", 400, "The offset must be at least 0, got -3."),
        (f"/topics/{name}/messages?partition=7", 404, f"Topic '{name}' has no partition 7 (it has 1)."),
        (f"/topics/{name}/messages?timestamp=yesterday", 400, "ISO-8601"),
        (f"/topics/{name}/messages?order=sideways", 400, "The order must be newest or oldest"),
        ("/no/such/page", 404, "No such page."),
        ("/groups/no-such-group", 404, "Consumer group 'no-such-group' does not exist."),
    ]
    for path, status, message in cases:
        got, body = console.get(path)
        assert got == status, (path, got, body[:500])
        assert message.replace("'", "&#39;") in body, (path, body[:1500])
        assert "Traceback" not in body and 'File "' not in body
    gid = unique("badreset")
    admin.alter_group_offsets(gid, {(name, 0): 0})
    token = "t" * 43  # double submit: any token works when the cookie and the field agree
    posts = [
        (f"/groups/{gid}/reset", {"target": "sideways"}, 400, "Unknown reset target 'sideways'"),
        (f"/groups/{gid}/reset", {"target": "offset", "value": "ten"}, 400, "The offset must be a whole number, got 'ten'."),
        (f"/groups/{gid}/reset", {"target": "timestamp", "value": "soon"}, 400, "ISO-8601"),
        (f"/groups/{gid}/reset", {"target": "earliest", "topic": "no-such-topic"}, 404, "Topic 'no-such-topic' does not exist."),
        ("/topics/create", {"name": "", "partitions": "1"}, 400, "A topic needs a name."),
        ("/topics/create", {"name": "x", "partitions": "many"}, 400, "The partitions must be a whole number, got 'many'."),
        ("/topics/create", {"name": name, "partitions": "1", "confirmed": "1"}, 409, "TOPIC_ALREADY_EXISTS"),
        (f"/topics/{name}/produce", {"partition": "-1", "value": "v"}, 400, "The partition must be at least 0, got -1."),
        ("/reassignments/plan", {"kind": "rebalance", "add": "9"}, 404, "Unknown broker id(s) 9"),
        ("/reassignments/plan", {"kind": "rebalance", "remove": "x"}, 400, "The brokers to remove must be a whole number, got 'x'."),
        ("/reassignments/plan", {"kind": "rebalance", "topics": "no-such-topic"}, 404, "Topic(s) no-such-topic not found."),
        ("/reassignments/plan", {"kind": "partition", "topic": name, "partition": "0", "replicas": "1,9"}, 404,
         "Unknown broker id(s) 9 (brokers: 1, 2, 3)."),
        ("/reassignments/plan", {"confirmed": "1", "target": "no tabs here"}, 400, "A planned partition is malformed"),
        ("/disks/move", {"broker": "1", "topic": name, "partition": "0", "dir": "/nowhere"}, 400, "Broker 1 has no log dir '/nowhere'"),
        ("/disks/move", {"broker": "7", "topic": name, "partition": "0", "dir": "/x"}, 404, "There is no broker 7"),
        ("/disks/throttle", {"broker": "1", "rate": "fast"}, 400, "The throttle (bytes per second) must be a whole number, got 'fast'."),
        ("/disks/balance", {"broker": "one"}, 400, "The broker must be a whole number, got 'one'."),
        (f"/topics/{name}/elect", {"type": "sideways"}, 400, "Unknown election type 'sideways'"),
        (f"/topics/{name}/elect", {"type": "preferred", "partition": "4"}, 404, f"Topic '{name}' has no partition 4"),
    ]
    for path, fields, status, message in posts:
        got, body = console.post(path, {**fields, "csrf": token}, {"Cookie": f"kavka_console_csrf={token}"})
        assert got == status, (path, fields, got, body[:1500])
        assert message.replace("'", "&#39;") in body, (path, fields, body[:1500])
        assert "Traceback" not in body and 'File "' not in body
    assert admin.list_group_offsets(gid) == {(name, 0): 0}


def test_state_changing_requests_need_the_pages_csrf_token_and_same_origin(browser: Any, console: Console, admin: AdminClient) -> None:
    name = unique("csrf")
    form = {"name": name, "partitions": "1", "replication_factor": "1", "confirmed": "1"}
    status, body = console.post("/topics/create", {**form, "csrf": "x" * 43})  # no cookie: a forged request
    assert status == 403 and "CSRF token" in body
    status, body = console.post("/topics/create", {**form, "csrf": "x" * 43},
                                {"Cookie": "kavka_console_csrf=" + "y" * 43})  # a cookie that does not match
    assert status == 403
    status, body = console.post("/topics/create", {**form, "csrf": "z" * 43},
                                {"Cookie": "kavka_console_csrf=" + "z" * 43, "Origin": "http://evil.example"})
    assert status == 403 and "Cross-site request refused" in body
    assert name not in {t.name for t in admin.list_topics()}
    # A page of another origin (localhost is not 127.0.0.1) posting to the console, in a browser
    # that holds the console's cookie: refused, whatever the form carries.
    p = browser.new_page()
    try:
        p.goto(console.url + "/topics")  # the console's cookie exists in this browser
        p.goto(console.url.replace("127.0.0.1", "localhost") + "/healthz")
        p.set_content(f'<form method="post" action="{console.url}/topics/create">'
                      + "".join(f'<input name="{k}" value="{v}">' for k, v in form.items())
                      + '<button id="go">go</button></form>')
        p.click("#go")
        expect(p.locator("#error-message")).to_contain_text("Cross-site request refused")
    finally:
        p.close()
    assert name not in {t.name for t in admin.list_topics()}


def test_read_only_mode_hides_the_forms_and_refuses_changes(page: Any, cluster: Cluster, admin: AdminClient, tmp_path: Path) -> None:
    ro = Console(cluster.bootstrap, tmp_path / "ro.log", "--read-only")
    try:
        page.goto(ro.url + "/topics")
        expect(page.locator("header .ro")).to_have_text("read-only")
        expect(page.locator("#create-topic")).to_have_count(0)
        name = unique("ro-topic")
        admin.create_topics([NewTopic(name, 1, 1)])
        page.goto(ro.url + f"/topics/{name}")
        expect(page.locator("#partitions tbody tr")).to_have_count(1)
        expect(page.locator("#topic-actions")).to_have_count(0)
        expect(page.locator("#elect")).to_have_count(0)
        page.goto(ro.url + "/disks")
        expect(page.locator("#disks tbody tr")).to_have_count(6)
        expect(page.locator("#disk-actions")).to_have_count(0)
        page.goto(ro.url + "/reassignments")
        expect(page.locator("#ongoing")).to_have_count(1)
        expect(page.locator("#reassign-actions")).to_have_count(0)
        page.goto(ro.url + "/topics")  # has the cookie now: a well-formed request is still refused
        token = next(c["value"] for c in page.context.cookies(ro.url) if c["name"] == "kavka_console_csrf")
        status, body = ro.post("/topics/create", {"name": unique("ro"), "confirmed": "1", "csrf": token},
                               {"Cookie": f"kavka_console_csrf={token}"})
        assert status == 403 and "read-only mode" in body
        for path, fields in (("/disks/throttle", {"broker": "1", "rate": "1000"}), ("/reassignments/cancel", {}),
                             (f"/topics/{name}/elect", {"type": "preferred"})):
            status, body = ro.post(path, {**fields, "confirmed": "1", "csrf": token}, {"Cookie": f"kavka_console_csrf={token}"})
            assert status == 403 and "read-only mode" in body, (path, status)
    finally:
        ro.stop()


# ---------------------------------------------------------------------- a failed dir (last: broker 1 keeps it)


def test_a_failed_dir_shows_offline_and_its_partitions_leaders_moved(page: Any, cluster: Cluster, console: Console, admin: AdminClient) -> None:
    name = unique("faildir")
    admin.create_topics([NewTopic(name, assignments={0: [1, 2, 3]})])
    wait_until(lambda: admin.describe_topics([name])[0].partitions[0].leader == 1, 20, message="1 leads")
    data_dirs = [d.path for d in admin.describe_log_dirs([1])[1]]
    metadata_dir = str(cluster.nodes[1].log_dirs[0])  # metadata.log.dir: the first of log.dirs; it must stay
    failing = next(d for d in data_dirs if d != metadata_dir)
    if where(admin, 1, name)[0] != failing:
        assert admin.alter_replica_log_dirs({(1, name, 0): failing}) == {(1, name, 0): 0}
        wait_until(lambda: where(admin, 1, name) == (failing, False), 30, message="the replica in the dir to fail")
    # The controller must know which dir the replica is in (KIP-858's AssignReplicasToDirs) before
    # that dir fails, or it has no replica to take the leadership from.
    wait_until(lambda: metric(admin, 1, "kafka_server_kafkaserver_nummismatchingreplicatologdirassignments") == 0, 30,
               message="the controller told the replica's new dir")
    (cluster.root / "failing-dirs-1").write_text(failing + "\n")
    with Producer(admin_bootstrap(admin), ProducerConfig(enable_idempotence=False, acks=1)) as p:
        p.send(name, b"hits the failed disk", partition=0)  # the write that finds the disk dead
        try:
            p.flush()
        except Exception:  # KAFKA_STORAGE_ERROR, or a retry to the new leader: either is fine
            pass
    leader = wait_until(lambda: (lambda ld: ld if ld in (2, 3) else None)(admin.describe_topics([name])[0].partitions[0].leader),
                        30, message="leadership moved off the failed dir")
    page.goto(console.url + "/disks")
    expect(page.locator(f"#disks tr[data-dir='1:{failing}'] td.state")).to_have_text("offline (KAFKA_STORAGE_ERROR)")
    expect(page.locator(f"#disks tr[data-dir='1:{metadata_dir}'] td.state")).to_have_text("online")
    expect(page.locator(f"#offline-replicas tr[data-offline='1:{name}-0'] td.leader")).to_have_text(str(leader))
    page.goto(console.url + f"/topics/{name}")
    expect(page.locator("#partitions tr[data-partition='0'] td.leader")).to_have_text(str(leader))
    assert 1 in admin.describe_topics([name])[0].partitions[0].offline_replicas


def test_a_stopped_broker_shows_fenced_and_every_page_still_renders(page: Any, cluster: Cluster, console: Console,
                                                                       admin: AdminClient) -> None:
    """Last of all: node 2 stops (a controlled shutdown). The Overview shows what DescribeCluster
    says of it (fenced) and that its metrics are out of reach, without an error page."""
    quorum_leader = admin.describe_quorum().leader_id
    stopped = next(i for i in (2, 3) if i != quorum_leader)
    page.goto(console.url + "/")
    expect(page.locator(f"#brokers tr[data-broker='{stopped}'] td.state")).to_have_text("running")
    cluster.nodes[stopped].stop()
    wait_until(lambda: next(b.fenced for b in admin.describe_cluster().brokers if b.node_id == stopped), 30,
               message="the controller fences the stopped broker")

    def shown() -> tuple[int, str]:
        status, body = console.get("/")
        m = re.search(rf'<tr data-broker="{stopped}">.*?<td class="state"[^>]*><span[^>]*>([^<]*)</span>', body, re.S)
        return status, m.group(1) if m else body[-1500:]

    # The console's own admin client learns it from DescribeCluster too (wait_until reports the
    # last page it saw).
    wait_until(lambda: (lambda got: got if got == (200, "fenced") else None)(shown()), 30, message="the page shows it fenced")
    page.reload()  # a sample without its metrics: its bytes are left out of this window, and the page says so
    expect(page.locator(f"#brokers tr[data-broker='{stopped}'] td.state")).to_have_text("fenced")
    expect(page.locator("#metrics-unreachable")).to_contain_text(f"No metrics from broker {stopped} ")
    for path in ("/", "/topics", "/disks", "/reassignments", "/groups"):
        status, body = console.get(path)
        assert status == 200 and "error-message" not in body, (path, body[:500])
