"""The README and the pages under docs/ link to what exists: every relative link names a file of
the repository, and every anchor a heading of the page it points into."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(page: Path) -> set[str]:
    """The anchors GitHub makes of a page's headings (outside code blocks)."""
    found, in_code = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            in_code = not in_code
        heading = re.match(r"^#{1,6} (.*)", line)
        if heading and not in_code:
            text = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            found.add(text.replace(" ", "-"))
    return found


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_link_of_a_page_resolves(page: Path) -> None:
    broken = []
    for url in LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", url):
            continue
        path, _, anchor = url.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists():
            broken.append(f"{url}: no such file")
        elif anchor and target.suffix == ".md" and anchor not in anchors(target):
            broken.append(f"{url}: no such heading")
    assert not broken, broken


def test_the_readme_links_every_page_of_the_docs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    for page in ("getting-started", "ci", "server", "scenarios", "reference"):
        assert f"(docs/{page}.md)" in readme, page
