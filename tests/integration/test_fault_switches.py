"""Fault-injection variables do nothing unless the test-only config enables them (issue 10 item 7).

A broker is started with every fault switch set in its environment -- a crash
point at the first step of a log-dir move, a cut after every Produce, a control
file that fails both log dirs -- but without kavka.test.fault.injection.enable.
It must serve produce, consume and a move as if none were set, and say in its
log that it ignored them. The enabled case is covered by the tests that use
the switches (test_jbod, test_idempotence_cut, test_metrics); the startup warning
when enabled is checked here.
"""

from __future__ import annotations

from kavka.client.admin import AdminClient
from tests.integration.helpers import ck_admin, ck_create_topic
from tests.integration.test_jbod import other_dir, placement, produce_acked, read_all
from tests.wait import wait_until


def test_fault_switches_are_ignored_without_the_test_setting(broker_factory, topic_name, tmp_path):
    b = broker_factory(log_dirs=2, overrides={"log.segment.bytes": "65536"})
    control = tmp_path / "failing-dirs"
    control.write_text("".join(f"{d}\n" for d in b.log_dirs))
    b.start(env={
        "KAVKA_TEST_CRASH_POINT": "future-created",
        "KAVKA_FAULT_CUT_PRODUCE_EVERY": "1",
        "KAVKA_FAULT_INJECTION_FILE": str(control),
    })
    assert "ignoring fault-injection variables" in b.log_text()
    assert "FAULT INJECTION ENABLED" not in b.log_text()
    ck_create_topic(ck_admin(b.bootstrap), topic_name, 1)
    acked = produce_acked(b.bootstrap, topic_name, 300, partitions=1, size=200)
    src = placement(b, topic_name)[0][0]
    dest = other_dir(b, src)
    with AdminClient(b.bootstrap, timeout_s=10) as a:
        a.alter_replica_log_dirs({(1, topic_name, 0): dest})
    wait_until(lambda: placement(b, topic_name) == {0: (dest, False)}, 30, message="the move to finish")
    assert b.alive()
    assert read_all(b.bootstrap, topic_name, 1) == acked
    assert "fault injection" not in b.log_text().replace("ignoring fault-injection", "")
    assert "injected I/O error" not in b.log_text()
    assert b.stop() == 0


def test_enabled_fault_injection_is_announced_at_startup(broker_factory, tmp_path):
    b = broker_factory(overrides={"kavka.test.fault.injection.enable": "true"})
    b.start(env={"KAVKA_FAULT_CUT_PRODUCE_EVERY": "7"})
    text = b.log_text()
    assert "TEST-ONLY FAULT INJECTION ENABLED" in text
    assert "cut every 7 produce" in text
    assert b.stop() == 0
