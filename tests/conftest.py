from __future__ import annotations

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
