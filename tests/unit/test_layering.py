"""kavka's layering holds: every import points down the layer list of scripts/check_layers.py
(so there is no package cycle), and the product never imports the test-only `kavka.testing`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_import_points_down_a_layer() -> None:
    r = subprocess.run([sys.executable, str(ROOT / "scripts" / "check_layers.py")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "layering clean" in r.stdout


def test_the_checker_catches_an_upward_import(tmp_path: Path) -> None:
    """The check can fail: a copy of the tree with storage importing the broker is refused."""
    import shutil

    src = tmp_path / "src" / "kavka"
    shutil.copytree(ROOT / "src" / "kavka", src, ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "check_layers.py", tmp_path / "scripts" / "check_layers.py")
    bad = src / "storage" / "upward.py"
    bad.write_text("from kavka.broker.node import BrokerNode  # noqa: F401\n")
    r = subprocess.run([sys.executable, str(tmp_path / "scripts" / "check_layers.py")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1
    assert "kavka/storage/upward.py:1: storage imports kavka.broker.node" in r.stdout
