"""The README starts fast and loses nothing: short, every link and image there, every
docs page reachable from it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _links(page: Path) -> list[str]:
    return [target.split("#")[0] for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text())
            if not target.startswith(("http://", "https://", "#"))]


def test_readme_is_short_and_every_link_and_image_exists() -> None:
    readme = ROOT / "README.md"
    assert len(readme.read_text().splitlines()) <= 180
    links = _links(readme)
    assert any(link.startswith("docs/images/") for link in links)
    for link in links:
        assert (ROOT / link).exists(), link


def test_every_docs_page_is_reachable_from_the_readme() -> None:
    """Each page under docs/ is linked from the README or from a page it links to."""
    seen, todo = set(), [ROOT / "README.md"]
    while todo:
        page = todo.pop()
        if page in seen or page.suffix != ".md" or not page.is_file():
            continue
        seen.add(page)
        todo += [(page.parent / link).resolve() for link in _links(page)]
    pages = set((ROOT / "docs").glob("*.md")) | {ROOT / "docs" / "case-studies" / "README.md"}
    assert not {p.relative_to(ROOT).as_posix() for p in pages - seen}
    for page in seen:
        for link in _links(page):
            assert (page.parent / link).exists(), (page, link)
