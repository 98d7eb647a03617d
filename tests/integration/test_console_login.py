"""The console's log-in mode in a real headless Chromium against a real kavka broker that needs
SASL (PLAIN, and SCRAM-SHA-512 for a second console) and enforces ACLs.

The console is started with a `--command-config` that names the protocol and mechanism but no
credentials, so it asks each user to log in; it then makes every admin call as that user, and the
broker's ACLs decide what the pages show and what changes succeed. Checked: pages redirect to the
log-in page without a session; a wrong password is refused with a readable message; a limited user
sees only the topics its ACLs let it describe and is refused a topic creation; a super user in
another browser sees everything at the same time; log-out ends the session; the session cookie
holds a random id (HttpOnly), and no password reaches the page, the cookies or the console's log.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kavka.authorizer import Acl
from kavka.client.admin import AdminClient, NewTopic
from kavka.client.producer import Producer, ProducerConfig
from kavka.common import AclOperation, AclPermissionType, PatternType, ResourceType
from kavka.scram import MECHANISMS, salted_password
from tests.broker_harness import BrokerProcess, free_port
from tests.console_harness import BROWSER_ARGS, CHROMIUM, Console
from tests.wait import wait_until

playwright_sync = pytest.importorskip("playwright.sync_api")
expect = playwright_sync.expect

pytestmark = pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="Debian's chromium is not installed (scripts/setup.sh --test)")

PLAIN_USERS = {"lou": "lou-Secret-4711", "ada": "ada-Secret-0815"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{p}"' for u, p in PLAIN_USERS.items()) + ";")
SCRAM_USER, SCRAM_PASSWORD = "sid", "sid-Scram-2718"  # a SCRAM-SHA-512 user, its credential in the metadata log
PASSWORDS = {**PLAIN_USERS, SCRAM_USER: SCRAM_PASSWORD}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    plain, sasl, metrics = free_port(), free_port(), free_port()
    b = BrokerProcess(tmp_path_factory.mktemp("console-login"), port=plain, overrides={
        "metrics.prometheus.port": str(metrics),
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL://127.0.0.1:{sasl}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl.plain.sasl.jaas.config": JAAS,
        "authorizer.class.name": "kavka",
        "super.users": "User:ANONYMOUS;User:ada;User:sid",  # the test's own admin client comes in over PLAINTEXT
    })
    b.format()
    b.start()
    b.sasl_port = sasl  # type: ignore[attr-defined]
    b.metrics_url = f"1=http://127.0.0.1:{metrics}/metrics"  # type: ignore[attr-defined]
    try:
        yield b
    finally:
        b.stop()


def test_each_user_logs_in_and_the_clusters_acls_apply_to_what_they_see_and_do(broker: BrokerProcess, tmp_path: Path) -> None:
    with AdminClient(broker.bootstrap) as admin:
        admin.create_topics([NewTopic("lou-visible", 1, 1), NewTopic("hidden-topic", 1, 1)])
        # lou may describe and read the topics under lou- and nothing else.
        assert [code for code, _ in admin.create_acls([
            Acl(ResourceType.TOPIC, "lou-", PatternType.PREFIXED, "User:lou", "*", op, AclPermissionType.ALLOW)
            for op in (AclOperation.DESCRIBE, AclOperation.READ)])] == [0, 0]
        config = tmp_path / "console.properties"
        config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")  # no credentials: log-in mode
        console = Console(f"127.0.0.1:{broker.sasl_port}", tmp_path / "console.log", "--command-config", str(config),  # type: ignore[attr-defined]
                          "--metrics-url", broker.metrics_url)  # type: ignore[attr-defined]
        try:
            assert "(log-in with SASL/PLAIN)" in console.log.read_text()
            with playwright_sync.sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
                try:
                    run_the_sessions(browser, console, admin)
                    byte_rates_follow_the_acls(browser, console, broker.bootstrap)
                finally:
                    browser.close()
            scram_login(admin, tmp_path, f"127.0.0.1:{broker.sasl_port}")  # type: ignore[attr-defined]
            # Without a session a change is refused, whatever the form carries.
            token = "t" * 43
            status, body = console.post("/topics/create", {"name": "anon-topic", "confirmed": "1", "csrf": token},
                                        {"Cookie": f"kavka_console_csrf={token}"})
            assert status == 401 and "Log in first" in body
            assert "anon-topic" not in {t.name for t in admin.list_topics()}
        finally:
            console.stop()
    text = console.log.read_text()
    assert "Traceback" not in text, text
    assert not any(p in text for p in PASSWORDS.values()), text  # no password in the console's log
    assert "log-in of 'lou' refused" in text  # the refusal is logged, by name only


def byte_rates_follow_the_acls(browser: Any, console: Console, bootstrap: str) -> None:
    """The brokers' metrics are read as the console, so the Overview lists per topic only the
    topics the logged-in user may describe: lou sees lou-visible's bytes, not hidden-topic's."""
    pages = {}
    for user in ("lou", "ada"):
        p = browser.new_context().new_page()
        p.set_default_timeout(20_000)
        p.goto(console.url + "/")
        log_in(p, console, user, PASSWORDS[user])
        expect(p.locator("#count-brokers")).to_have_text("1")  # the first sample
        pages[user] = p
    with Producer(bootstrap, ProducerConfig(enable_idempotence=False)) as prod:
        for name in ("lou-visible", "hidden-topic"):
            prod.send(name, b"counted", partition=0)
        prod.flush()
    for user, seen in (("lou", ["lou-visible"]), ("ada", ["hidden-topic", "lou-visible"])):
        p = pages[user]
        p.reload()
        expect(p.locator("#throughput-topics th", has_text="bytes in/s")).to_have_count(1)
        assert sorted(p.eval_on_selector_all("#throughput-topics tbody tr[data-topic]", "rows => rows.map(r => r.dataset.topic)")) == seen
        p.context.close()


def log_in(page: Any, console: Console, user: str, password: str) -> None:
    page.fill("#login input[name=username]", user)
    page.fill("#login input[name=password]", password)
    page.click("#login button")


def run_the_sessions(browser: Any, console: Console, admin: AdminClient) -> None:
    lou_ctx, ada_ctx = browser.new_context(), browser.new_context()
    lou, ada = lou_ctx.new_page(), ada_ctx.new_page()
    for p in (lou, ada):
        p.set_default_timeout(20_000)

    lou.goto(console.url + "/topics")
    assert lou.url == console.url + "/login?next=%2Ftopics"  # no session: the log-in page first
    log_in(lou, console, "lou", "not-the-password")
    expect(lou.locator("#error-message")).to_contain_text("Log-in refused")
    assert not [c for c in lou_ctx.cookies() if c["name"] == "kavka_console_session"]

    log_in(lou, console, "lou", PASSWORDS["lou"])
    expect(lou.locator("h1")).to_have_text("Topics")  # back where it was going
    expect(lou.locator("header #user")).to_have_text("lou")
    shown = set(lou.eval_on_selector_all("#topics tbody tr", "rows => rows.map(r => r.dataset.topic)"))
    assert shown == {"lou-visible"}  # the ACLs: hidden-topic is not described to lou
    [session] = [c for c in lou_ctx.cookies() if c["name"] == "kavka_console_session"]
    assert session["httpOnly"] and session["sameSite"] == "Strict" and len(session["value"]) >= 40
    assert not any(p in c["value"] for c in lou_ctx.cookies() for p in PASSWORDS.values())
    assert PASSWORDS["lou"] not in lou.content()

    # A change lou's ACLs do not allow: refused by the cluster, readably.
    lou.click("#create-topic summary")
    lou.fill("#create-topic input[name=name]", "lou-new")
    lou.fill("#create-topic input[name=partitions]", "1")
    lou.click("#create-topic button[type=submit]")
    lou.click("#confirm")
    expect(lou.locator("#error-message")).to_contain_text("AUTHORIZATION_FAILED")
    assert "lou-new" not in {t.name for t in admin.list_topics()}

    # ada, a super user, in another browser at the same time: every topic, and the change works.
    ada.goto(console.url + "/")
    log_in(ada, console, "ada", PASSWORDS["ada"])
    expect(ada.locator("header #user")).to_have_text("ada")
    ada.goto(console.url + "/topics")
    shown = set(ada.eval_on_selector_all("#topics tbody tr", "rows => rows.map(r => r.dataset.topic)"))
    assert {"lou-visible", "hidden-topic"} <= shown
    ada.goto(console.url + "/topics/hidden-topic")
    expect(ada.locator("#partitions tbody tr")).to_have_count(1)
    lou.goto(console.url + "/topics/hidden-topic")  # lou's session is still lou's
    expect(lou.locator("#error-message")).to_have_text("Topic 'hidden-topic' does not exist.")

    lou.goto(console.url + "/topics")
    lou.click("#logout button")
    expect(lou.locator("h1")).to_have_text("Log in to " + console_bootstrap(console))
    lou.goto(console.url + "/groups")
    assert lou.url.startswith(console.url + "/login")  # the session is gone on the server too
    ada.goto(console.url + "/groups")
    expect(ada.locator("h1")).to_have_text("Consumer groups")
    lou_ctx.close()
    ada_ctx.close()


def console_bootstrap(console: Console) -> str:
    return console.log.read_text().split(" for ", 1)[1].split()[0]


def scram_login(admin: AdminClient, tmp_path: Path, bootstrap: str) -> None:
    """The same log-in with SCRAM-SHA-512: a second console whose config names that mechanism."""
    salt = os.urandom(16)
    admin.alter_user_scram_credentials([(SCRAM_USER, "SCRAM-SHA-512", 4096, salt,
                                         salted_password(MECHANISMS["SCRAM-SHA-512"], SCRAM_PASSWORD, salt, 4096))])
    wait_until(lambda: admin.describe_user_scram_credentials([SCRAM_USER]).get(SCRAM_USER), 20, message="the credential applied")
    config = tmp_path / "scram.properties"
    config.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n")
    console = Console(bootstrap, tmp_path / "scram-console.log", "--command-config", str(config))
    try:
        assert "(log-in with SASL/SCRAM-SHA-512)" in console.log.read_text()
        with playwright_sync.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True, args=BROWSER_ARGS)
            try:
                page = browser.new_page()
                page.set_default_timeout(20_000)
                page.goto(console.url + "/topics")
                log_in(page, console, SCRAM_USER, "wrong")
                expect(page.locator("#error-message")).to_contain_text("Log-in refused")
                log_in(page, console, SCRAM_USER, SCRAM_PASSWORD)
                expect(page.locator("header #user")).to_have_text(SCRAM_USER)
                expect(page.locator("#topics tr[data-topic='hidden-topic']")).to_have_count(1)
            finally:
                browser.close()
    finally:
        console.stop()
    text = console.log.read_text()
    assert "Traceback" not in text and SCRAM_PASSWORD not in text, text
