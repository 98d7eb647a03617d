"""Per-file run times of the test suite, from a pytest JUnit XML report, written to
tests/file_durations.json: the order in which `scripts/test.sh` hands files to its two xdist
workers (longest first; tests/conftest.py). Regenerate after a full run made with
`--junitxml=PATH`:

    python scripts/file_durations.py PATH

A testcase's time in the report is its setup, call and teardown together, so a module fixture's
start-up counts toward its file. Figures are rounded to whole seconds; only the order matters.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "file_durations.json"


def test_file(classname: str) -> str | None:
    """tests.integration.test_x(.TestClass) -> tests/integration/test_x.py, if that file exists."""
    parts = classname.split(".")
    for n in range(len(parts), 0, -1):
        path = "/".join(parts[:n]) + ".py"
        if (ROOT / path).is_file():
            return path
    return None


def main(report: str) -> None:
    seconds: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).getroot().iter("testcase"):
        path = test_file(case.get("classname", ""))
        if path is not None:
            seconds[path] += float(case.get("time", "0"))
    ordered = dict(sorted(((p, round(s)) for p, s in seconds.items()), key=lambda kv: (-kv[1], kv[0])))
    OUT.write_text(json.dumps(ordered, indent=0) + "\n")
    total = sum(seconds.values())
    print(f"{len(ordered)} files, {total / 60:.1f} test-minutes, written to {OUT.relative_to(ROOT)}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
