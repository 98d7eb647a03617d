from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from tests import broker_harness
from tests.broker_harness import BrokerProcess
from tests.kafka_reference import KafkaReference

# The default suite runs the property tests derandomized: the same examples every run, so a run's
# result is the code's, not the draw's. KAVKA_HYPOTHESIS_EXPLORE=1 draws fresh examples; a failure
# found that way is kept as an @example.
# No per-example deadline: a property test checks behaviour, never speed (a loaded CI machine or a
# second xdist worker would otherwise fail it on time alone).
settings.register_profile("fixed", derandomize=True, database=None, deadline=None)
if not os.environ.get("KAVKA_HYPOTHESIS_EXPLORE"):
    settings.load_profile("fixed")


# pytest imports readline at start-up (_pytest.capture._readline_workaround), and GNU readline
# sets COLUMNS=80 and LINES=24 in the C environment: os.environ does not show them, but processes
# started after inherit them. An xdist worker is one: its os.environ has them, so kavka's CLI run
# in-process (CliRunner) drew its tables 80 wide there instead of the 200 of a serial run. A worker
# takes them out of os.environ when the controller's os.environ had none, and leaves them in the C
# environment (os.putenv) for the subprocesses its tests start, exactly as in a serial run.
TERMINAL_ENV = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # noqa: ANN001 -- xdist's WorkerController (controller side)
    node.workerinput["kavka_terminal_env"] = {k: os.environ.get(k) for k in TERMINAL_ENV}


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None:
        return
    for k, v in workerinput["kavka_terminal_env"].items():
        if v is None and k in os.environ:
            os.putenv(k, os.environ.pop(k))  # pop unsets it in C too; put readline's value back there
        elif v is not None:
            os.environ[k] = v


# scripts/test.sh runs the suite on two pytest-xdist workers with `--dist loadfile
# --no-loadscope-reorder`: each file goes whole to one worker (its module fixtures start once), in
# collection order, the next file to whichever worker runs out. The workers collect the files
# longest first (tests/file_durations.json, measured; scripts/file_durations.py rewrites it), so
# the long integration and Spark files start early and the short unit files fill both workers'
# ends. A file not listed yet counts as UNLISTED_S. Serial runs keep pytest's own order.
UNLISTED_S = 30


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    measured = json.loads((Path(__file__).parent / "file_durations.json").read_text())
    root = config.rootpath
    weight = {}
    for item in items:
        path = item.path.relative_to(root).as_posix() if item.path.is_relative_to(root) else str(item.path)
        weight[item.nodeid] = measured.get(path, UNLISTED_S)
    items.sort(key=lambda item: -weight[item.nodeid])  # stable: a file's tests keep their order


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator:
    """A failed test's report carries the logs of the brokers it started (and of those still up)."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed:
        return
    began = item.stash.get(_STARTED_AT, float("inf"))
    seen: set[int] = set()
    for at, b in broker_harness.STARTED:
        if id(b) in seen or not (at >= began or b.alive()):
            continue
        seen.add(id(b))
        lines = b.output[-150:]
        if lines:
            report.sections.append((f"kavka node {b.node_id} at {b.root} (last {len(lines)} lines)", "".join(lines)))
    del broker_harness.STARTED[:-200]


_STARTED_AT = pytest.StashKey[float]()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_STARTED_AT] = time.monotonic()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """One shared broker for tests that only need a working cluster (use unique topic names)."""
    b = BrokerProcess(tmp_path_factory.mktemp("broker"), overrides={"auto.create.topics.enable": "true"})
    b.start()
    yield b
    code = b.stop()
    assert code == 0, f"broker exited with {code}:\n{b.log_text()}"


@pytest.fixture(scope="session")
def kafka_reference(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaReference]:
    """One real Apache Kafka broker (KRaft, combined mode) per session and xdist worker: the
    reference the oracle tests compare kavka with (tests/kafka_reference.py). Use unique topic
    names."""
    k = KafkaReference(tmp_path_factory.mktemp("kafka-reference"))
    k.start()
    try:
        yield k
    finally:
        k.stop()


@pytest.fixture
def broker_factory(tmp_path: Path) -> Iterator:
    """Private brokers for tests that restart, kill or configure them."""
    made: list[BrokerProcess] = []

    def make(**kwargs) -> BrokerProcess:  # noqa: ANN003
        b = BrokerProcess(tmp_path / f"b{len(made)}", **kwargs)
        made.append(b)
        return b

    yield make
    for b in made:
        b.kill()


@pytest.fixture
def topic_name() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"
