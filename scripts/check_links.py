"""Check the relative links of README.md and docs/*.md: every file exists, every #anchor is a heading.

Anchors are GitHub's: the heading text lower-cased, punctuation other than `-` and `_` dropped,
spaces turned into `-`, a repeated heading suffixed `-1`, `-2`, ... Headings inside fenced code
blocks do not count. Links to http(s) and mailto are not checked (no network).

    python scripts/check_links.py        # exit code 1 and one line per broken link
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def _strip_code(text: str) -> list[str]:
    """The lines outside fenced code blocks (inside ones become empty, keeping line numbers)."""
    out, fenced = [], False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            out.append("")
            continue
        out.append("" if fenced else line)
    return out


def slug(text: str) -> str:
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out: set[str] = set()
    for line in _strip_code(path.read_text()):
        m = HEADING.match(line)
        if not m:
            continue
        s = slug(m.group(2))
        n = seen.get(s, 0)
        out.add(s if n == 0 else f"{s}-{n}")
        seen[s] = n + 1
    return out


def check(files: list[Path]) -> list[str]:
    errors = []
    for f in files:
        for lineno, line in enumerate(_strip_code(f.read_text()), 1):
            for m in LINK.finditer(re.sub(r"`[^`]*`", "", line)):
                target = m.group(1)
                if re.match(r"^[a-z]+:", target):
                    continue
                path_part, _, anchor = target.partition("#")
                dest = (f.parent / path_part).resolve() if path_part else f
                where = f"{f.relative_to(ROOT)}:{lineno}: {target}"
                if not dest.exists():
                    errors.append(f"{where}: no such file")
                elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                    errors.append(f"{where}: no heading #{anchor} in {dest.relative_to(ROOT)}")
    return errors


def main() -> int:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    errors = check(files)
    for e in errors:
        print(e)
    print(f"{len(files)} files, {len(errors)} broken links", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
