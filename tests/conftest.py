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

# The default suite runs the property tests derandomized: the same examples every run, so a run's
# result is the code's, not the draw's. KAVKA_HYPOTHESIS_EXPLORE=1 draws fresh examples; a failure
# found that way is kept as an @example.
settings.register_profile("fixed", derandomize=True, database=None)
if not os.environ.get("KAVKA_HYPOTHESIS_EXPLORE"):
    settings.load_profile("fixed")


# pytest imports readline at start-up (_pytest.capture._readline_workaround), and GNU readline
# sets COLUMNS=80 and LINES=24 in the C environment: os.environ does not show them, but every
# process started after inherits them: an xdist worker (whose os.environ then has them, so kavka's
# CLI run in-process by CliRunner draws its tables 80 wide instead of 200) and every subprocess a
# test starts. Each process of a run puts both back as the user's shell had them (the controller
# hands its own to the workers), so a test sees the same terminal serially and on a worker.
TERMINAL_ENV = ("COLUMNS", "LINES")


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:  # noqa: ANN001 -- xdist's WorkerController (controller side)
    node.workerinput["kavka_terminal_env"] = {k: os.environ.get(k) for k in TERMINAL_ENV}


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config: pytest.Config) -> None:
    workerinput = getattr(config, "workerinput", None)
    wanted = workerinput["kavka_terminal_env"] if workerinput else {k: os.environ.get(k) for k in TERMINAL_ENV}
    for k, v in wanted.items():
        if v is None:
            os.environ.pop(k, None)
            os.unsetenv(k)  # readline's, which os.environ never knew of
        else:
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
