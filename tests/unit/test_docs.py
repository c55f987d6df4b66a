"""The docs a maintainer can keep true: one page per registered name, each short enough to read
and to keep in step with the code, linked from both READMEs, and no internal issue numbers (no Ray)."""

from __future__ import annotations

import pathlib
import re

import pytest

from rllib_ext import registry

ROOT = pathlib.Path(__file__).resolve().parents[2]
ALGORITHM_DOCS = ROOT / "docs" / "algorithms"
NOT_PAGES = {"README.md", "TEMPLATE.md"}
PAGES = sorted(p for p in ALGORITHM_DOCS.glob("*.md") if p.name not in NOT_PAGES)

# A page links instead of restating (CleanRL's td3.md is about 7k characters). The generated
# settings tables may grow a little; a page over this limit is to be condensed, not the limit raised.
MAX_PAGE_CHARS = 15_000

# "issue 39", "Issues 21 and 22", "issue #7", "#43": internal tracker numbers mean nothing to a
# reader of the docs; say what changed and when instead.
ISSUE_NUMBER = re.compile(r"\bissues?\s+#?\d+|(?<![\w&/#])#\d+\b", re.IGNORECASE)


def _docs():
    return sorted((ROOT / "docs").rglob("*.md")) + [ROOT / "README.md"]


def test_every_registered_name_has_its_page():
    assert {p.stem for p in PAGES} == {name.lower() for name in registry.ALGORITHMS}


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_algorithm_page_is_at_most_15k_characters(page):
    n = len(page.read_text(encoding="utf-8"))
    assert n <= MAX_PAGE_CHARS, f"{page.name}: {n} characters > {MAX_PAGE_CHARS}; link instead of restating"


def test_results_blocks_are_generated_from_the_rows():
    """Every results block in docs/ is what `make bench-report` makes of the rows in benchmarks/results/:
    a hand edit, or a row added without regenerating, fails here."""
    from benchmarks.harness import report
    from rllib_ext.compare.rows import read_all

    assert report.docs_pages(), "no docs page holds a results block"
    stale = report.results_pages(read_all(report.RESULTS_DIR))
    assert not stale, f"out of date (run `make bench-report`): {stale}"


@pytest.mark.parametrize("readme", ["README.md", "docs/algorithms/README.md"])
def test_readme_links_every_name_to_its_own_page(readme):
    text = (ROOT / readme).read_text(encoding="utf-8")
    for name in registry.ALGORITHMS:
        link = re.compile(rf"\[`{name}`\]\((?:docs/algorithms/)?{name.lower()}\.md\)")
        assert link.search(text), f"{readme} does not link `{name}` to {name.lower()}.md"


def test_docs_name_no_internal_issue_numbers():
    found = [
        f"{path.relative_to(ROOT)}: {m.group(0)!r}"
        for path in _docs()
        for m in ISSUE_NUMBER.finditer(path.read_text(encoding="utf-8"))
    ]
    assert not found, found


def test_the_issue_pattern():
    for text in ("issue 39", "Issues 21", "issue #7", "see #43", "(#12)"):
        assert ISSUE_NUMBER.search(text), text
    for text in ("[x](#known-open-issues)", "issues with 5 seeds", "&#8212;", "a/b#3", "ties#"):
        assert not ISSUE_NUMBER.search(text), text
