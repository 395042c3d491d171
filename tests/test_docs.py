"""The README and docs/ stay a user's documents that point at real things: the README is short
and opens with the two commands, and every relative link, anchor and quoted repository path in
README.md and docs/*.md resolves, as does every quoted ``file.py:name`` (the file defines the
name); docs/structure.md's "where is X" list answers its questions with paths that exist."""
from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
TWO_COMMANDS = ("./scripts/setup.sh && .venv/bin/photon-trace demo",
                "./scripts/setup.sh --test && .venv/bin/python -m pytest -q")
# Pages the README links to before they are written. An entry is allowed to be missing only
# while it is missing.
PENDING: set[str] = set()
# Quoted paths are checked when they start with one of these folders; quoted paths relative to
# the package (as the tools print call sites: ``engine/engine.py:194``) are tried under it too.
REPO_FOLDERS = ("photon_trace/", "tests/", "scripts/", "benchmarks/", "docs/", "traces/", ".ci/")
PACKAGE_FOLDERS = ("engine/", "telemetry/", "dashboard/", "server/", "cli/")
# What the commands write, absent from a fresh clone.
GENERATED = ("traces/runs/",)

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
CODE = re.compile(r"`([^`\n]+)`")
# A quoted reference to a definition: ``engine/engine.py:Engine._tick`` (a call site's line
# number, ``engine/engine.py:194``, is not one: a name starts with a letter or ``_``).
DEFINITION = re.compile(r"([\w./-]+\.py):([A-Za-z_][\w.]*)")
STRUCTURE = ROOT / "docs" / "structure.md"
WHERE_IS = "Where is X"
# What the "where is X" list must answer (issue 27: a newcomer finds these without a search).
QUESTIONS = ("a bubble is measured", "a bubble is explained", "a bubble is drawn", "a trace is read",
             "a trace is analysed", "a trace is exported", "a sync's call site", "the zombie rule",
             "the causes vocabulary", "the gate", "the cli subcommands", "the openai routes",
             "the gpu check script")


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
            path = re.sub(r":[\w.]+$", "", token.rstrip(".,;:)"))   # a line number or a name after it
            candidates = [ROOT / path] + ([ROOT / "photon_trace" / path] if path.startswith(PACKAGE_FOLDERS) else [])
            if not any(c.exists() for c in candidates):
                missing.append(f"{_rel(page)}: `{quoted}`")
    assert not missing, "\n".join(missing)


def _candidates(path: str) -> list[Path]:
    """Where a quoted path may be: the repository root, or the package (paths as call sites print them)."""
    return [ROOT / path, ROOT / "photon_trace" / path]


def _defines(source: Path, dotted: str) -> bool:
    """Whether ``source`` defines ``dotted``: a top-level function, class or assigned name, or
    (``Class.name``) one in that class's body."""
    body = ast.parse(source.read_text(encoding="utf-8")).body
    *outer, last = dotted.split(".")
    for name in outer:
        classes = [n for n in body if isinstance(n, ast.ClassDef) and n.name == name]
        if not classes:
            return False
        body = classes[0].body
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == last:
            return True
        if isinstance(node, ast.Assign):
            targets = node.targets
        else:
            targets = [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == last for t in targets):
            return True
    return False


def test_every_quoted_definition_exists():
    """``file.py:name`` in a page (docs/structure.md is made of them): the file exists and still
    defines the name, so a rename or a move shows here rather than to a reader."""
    broken, seen = [], 0
    for page in PAGES:
        for quoted in CODE.findall(_prose(page.read_text())):
            m = DEFINITION.fullmatch(quoted.strip())
            if not m:
                continue
            seen += 1
            path, name = m.groups()
            files = [c for c in _candidates(path) if c.is_file()]
            if not files:
                broken.append(f"{_rel(page)}: `{quoted}` (no such file)")
            elif not any(_defines(f, name) for f in files):
                broken.append(f"{_rel(page)}: `{quoted}` (the file does not define {name})")
    assert seen, "no `file.py:name` reference found: has the pattern changed?"
    assert not broken, "\n".join(broken)


def _where_is_entries() -> list[str]:
    """docs/structure.md's "where is X" list: one string per item (continuation lines joined)."""
    text = _prose(STRUCTURE.read_text())
    m = re.search(rf"^## {re.escape(WHERE_IS)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"docs/structure.md has no '## {WHERE_IS}' section"
    entries: list[str] = []
    for line in m.group(1).splitlines():
        if line.startswith("- "):
            entries.append(line[2:])
        elif line.startswith("  ") and entries:
            entries[-1] += " " + line.strip()
    return entries


def test_where_is_x_answers_each_question_with_a_path_that_exists():
    """Each entry of the list names at least one file or folder that exists (a route such as
    ``/v1/models`` is not one), and the entries' bold leads cover ``QUESTIONS``."""
    entries = _where_is_entries()
    assert entries, f"the '{WHERE_IS}' section has no list"
    without = []
    for entry in entries:
        quoted = [q.split()[0].rstrip(".,;:)") for q in CODE.findall(entry) if q.split()]
        paths = [re.sub(r":[\w.]+$", "", q) for q in quoted
                 if not q.startswith("/") and ("/" in q or q.endswith(".py"))]
        if not any(c.exists() for p in paths for c in _candidates(p)):
            without.append(entry[:60])
    assert not without, f"entries naming no existing path: {without}"
    leads = [re.match(r"\*\*([^*]+)\*\*", e) for e in entries]
    asked = " | ".join(m.group(1).lower() for m in leads if m)
    unanswered = [q for q in QUESTIONS if q not in asked]
    assert unanswered == [], f"the list's bold leads do not answer: {unanswered}"
