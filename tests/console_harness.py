"""The console's test harness: a `kavka console --port 0` process, and Debian's chromium for
Playwright (`playwright install` is not needed: the tests drive the system's browser)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from tests.broker_harness import KAVKA
from tests.wait import wait_until

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
IMAGES = Path(__file__).resolve().parents[1] / "docs" / "images"  # the README shows them
BROWSER_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync"]


class Console:
    def __init__(self, bootstrap: str, log: Path, *extra: str) -> None:
        self.log = log
        self.out = log.open("w")
        self.proc = subprocess.Popen([*KAVKA, "console", "--bootstrap-server", bootstrap, "--port", "0", *extra],
                                     stdout=self.out, stderr=subprocess.STDOUT, text=True)
        line = wait_until(lambda: re.search(r"http://127\.0\.0\.1:\d+/", log.read_text()), 30, message="console listening")
        self.url = line.group(0).rstrip("/")

    def get(self, path: str) -> tuple[int, str]:
        try:
            with urllib.request.urlopen(self.url + path, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def post(self, path: str, fields: dict[str, str], headers: dict[str, str] | None = None) -> tuple[int, str]:
        req = urllib.request.Request(self.url + path, data=urllib.parse.urlencode(fields).encode(),
                                     headers=headers or {}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=30) as r:
                return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        self.out.close()


def shot(page: Any, name: str) -> None:
    """A screenshot of the page. The README's images (docs/images/console-*.png) are rewritten
    only with KAVKA_SCREENSHOTS=1, so a test run leaves the checkout clean; otherwise the picture
    goes to a temporary directory (taking it still checks the page renders)."""
    out = IMAGES if os.environ.get("KAVKA_SCREENSHOTS") == "1" else Path(tempfile.gettempdir()) / "kavka-console-shots"
    out.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out / f"console-{name}.png"))
