"""The README and docs/ point only at things that exist: links, anchors and repository paths."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "infra").rglob("README.md"))]
# Backticked words that name a file or directory of this repository.
# (Not docs/: pages use it in examples of exported paths; links to docs pages are checked as links.)
TOP_LEVEL = ("shared/", "tests/", "infra/", "terraform/", "functions/", ".ci/")
TOP_FILES = ("pyproject.toml", "cloudbuild.yaml", "README.md")
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
CODE = re.compile(r"`([^`\s]+)`")
# Placeholders and globs in a path are a pattern, not a file.
PATTERN = re.compile(r"[<>{}*…]|\bNAME\b|\bRUN_ID\b")


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lowercase, punctuation dropped, spaces to hyphens."""
    anchors = set()
    for heading in re.findall(r"^#+ (.+)$", markdown, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        anchors.add(slug)
    return anchors


def _mentions(doc: Path) -> list[tuple[str, str]]:
    text = doc.read_text(encoding="utf-8")
    found = [("link", target) for target in LINK.findall(text)]
    for word in CODE.findall(text):
        if word.startswith(TOP_LEVEL) or word in TOP_FILES:
            found.append(("path", word))
    return found


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_and_repository_path_a_doc_mentions_exists(doc: Path) -> None:
    missing = []
    for kind, target in _mentions(doc):
        if kind == "link" and re.match(r"^[a-z]+:", target):
            continue  # an outside address (https:, mailto:): not ours to check offline
        path_part, _, anchor = target.partition("#")
        if kind == "path" and PATTERN.search(path_part):
            continue
        base = ROOT if kind == "path" else doc.parent
        resolved = (base / path_part).resolve() if path_part else doc
        if not resolved.exists() or ROOT not in (resolved, *resolved.parents):
            missing.append(f"{kind} {target}")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved.read_text(encoding="utf-8")):
            missing.append(f"anchor {target}")
    assert missing == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_user_docs_do_not_send_readers_outside_the_repository(doc: Path) -> None:
    text = doc.read_text(encoding="utf-8")
    assert "../shared/" not in text and "FACTS.md" not in text and "DESIGN.md" not in text


def test_the_readme_stays_a_readme() -> None:
    assert len((ROOT / "README.md").read_text(encoding="utf-8")) <= 12_500
