"""README.md is the package index's front page: every link in it must work there, where a
relative link has no repository to resolve against, and its examples must at least compile.

The links are read from the README rendered to HTML (Python-Markdown, as the docs site renders
its pages), so inline, reference and autolinks, images and raw HTML are all seen. (The examples
are type-checked and run end to end, against real servers, by tests/test_snippets.py; here they
are only compiled.)"""

from __future__ import annotations

import html.parser
import re
from pathlib import Path

import markdown
import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
#: Where the README's links into the repository point (pyproject's Documentation and Source).
REPOSITORY = "https://github.com/jobwire/jobwire/"

# The info string is read from the fence's own line only ([ \t]*, not \s*, which would take a
# bare fence's next line for it).
_FENCE = re.compile(r"^(```+|~~~+)[ \t]*([\w+-]*)[^\n]*\n(.*?)^\1[ \t]*$", re.M | re.S)


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("href", "src") and value is not None:
                self.found.append(value)


def links(text: str) -> list[str]:
    """Every link and image address in the Markdown ``text``, in order."""
    parser = _Links()
    parser.feed(markdown.markdown(text, extensions=["fenced_code", "tables"]))
    return parser.found


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line, source) of each fenced code block marked ``python`` or ``py`` in ``text``."""
    return [(text.count("\n", 0, m.start()) + 2, m.group(3)) for m in _FENCE.finditer(text)
            if m.group(2).lower() in ("python", "py")]


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]|\[|\]\([^)]*\)", "", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    body = _FENCE.sub("", text)
    return {github_slug(m.group(1)) for m in re.finditer(r"^#{1,6}\s+(.+?)\s*#*\s*$", body, re.M)}


@pytest.fixture(scope="module")
def readme() -> str:
    return README.read_text(encoding="utf-8")


def test_the_readme_links_only_to_absolute_addresses_or_its_own_headings(readme: str) -> None:
    found = links(readme)
    assert found, "no links found: the parser is not seeing the README's links"
    relative = [url for url in found if not url.startswith(("https://", "#"))]
    assert relative == [], "relative links break on the package index page"
    missing = [url for url in found if url.startswith("#") and url[1:] not in anchors(readme)]
    assert missing == []


def test_the_readme_links_into_the_repository_name_files_and_headings_that_exist(
    readme: str,
) -> None:
    checked = 0
    for url in links(readme):
        if not url.startswith(REPOSITORY):
            continue
        address, _, anchor = url.partition("#")
        match = re.fullmatch(r"(?:blob|tree)/main/(.+)", address[len(REPOSITORY):])
        if match is None:
            continue
        target = ROOT / match.group(1)
        assert target.exists(), url
        if anchor:
            assert target.suffix == ".md", url
            assert anchor in anchors(target.read_text(encoding="utf-8")), url
        checked += 1
    assert checked >= 5  # the docs pages, at least


def test_every_python_block_of_the_readme_compiles(readme: str) -> None:
    blocks = python_blocks(readme)
    assert blocks, "no python blocks found"
    for line, source in blocks:
        compile(source, f"README.md, the block at line {line}", "exec")  # SyntaxError names it


def test_the_readme_has_an_example_for_each_system(readme: str) -> None:
    sources = [source for _, source in python_blocks(readme)]
    for package in ("beanstalk_client", "gearman_client", "workq_client", "qless_client"):
        assert any(f"from {package} import" in source for source in sources), package
