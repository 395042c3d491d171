"""The README and docs/ stay a user's documents that point at real things: the README is short
and opens with the two commands, and every relative link, anchor and quoted repository path in
README.md and docs/*.md resolves."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
TWO_COMMANDS = ("./scripts/setup.sh && .venv/bin/photon-trace demo",
                "./scripts/setup.sh --test && .venv/bin/python -m pytest -q")
# Pages the README links to before they are written (the lead writes docs/structure.md once the
# package's files have moved). An entry is allowed to be missing only while it is missing.
PENDING = {"docs/structure.md"}
# Quoted paths are checked when they start with one of these folders; quoted paths relative to
# the package (as the tools print call sites: ``engine/engine.py:194``) are tried under it too.
REPO_FOLDERS = ("photon_trace/", "tests/", "scripts/", "benchmarks/", "docs/", "traces/", ".ci/")
PACKAGE_FOLDERS = ("engine/", "telemetry/", "dashboard/", "server/", "cli/")
# What the commands write, absent from a fresh clone.
GENERATED = ("traces/runs/",)

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`([^`\n]+)`")


def _prose(text: str) -> str:
    """``text`` without its fenced code blocks (their paths are examples, not references)."""
    return FENCE.sub("", text)


def _slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text, lower case, punctuation dropped, spaces as '-'."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").replace("*", "")
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for line in _prose(page.read_text()).splitlines():
        m = re.match(r"#{1,6} (.+)", line)
        if m:
            slug = _slug(m.group(1))
            n = seen.get(slug, 0)
            seen[slug] = n + 1
            out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links(page: Path) -> list[str]:
    return [t for t in LINK.findall(_prose(page.read_text())) if not re.match(r"[a-z]+:", t)]


def _rel(path: Path) -> str:
    return path.resolve().relative_to(ROOT).as_posix()


def test_the_readme_is_short_and_opens_with_the_two_commands():
    text = README.read_text()
    assert len(text.splitlines()) <= 200
    first_block = FENCE.search(text).group(0)
    assert text.index(first_block) < text.index("\n## "), "the two commands come before any section"
    for command in TWO_COMMANDS:
        assert command in first_block, command
    assert 'readme = "README.md"' in (ROOT / "pyproject.toml").read_text()


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for page in PAGES:
        for target in _links(page):
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            if not dest.exists():
                if _rel(dest) not in PENDING:
                    broken.append(f"{_rel(page)}: {target}")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{_rel(page)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_pending_pages_are_still_missing():
    written = [p for p in PENDING if (ROOT / p).exists()]
    assert not written, f"{written} exist now: take them out of PENDING in tests/test_docs.py"


def test_every_quoted_repository_path_exists():
    missing = []
    for page in PAGES:
        for quoted in CODE.findall(_prose(page.read_text())):
            token = quoted.split()[0] if quoted.split() else ""
            if (any(c in token for c in "*<>{}$") or not token.startswith(REPO_FOLDERS + PACKAGE_FOLDERS)
                    or token.startswith(GENERATED)):
                continue
            path = re.sub(r":\d+$", "", token.rstrip(".,;:)"))
            candidates = [ROOT / path] + ([ROOT / "photon_trace" / path] if path.startswith(PACKAGE_FOLDERS) else [])
            if not any(c.exists() for c in candidates):
                missing.append(f"{_rel(page)}: `{quoted}`")
    assert not missing, "\n".join(missing)
