"""The front page stays a front page, and the docs it maps stay whole.

README.md is at most 200 lines and links every page under docs/; every relative link in README.md and
docs/ reaches an existing file (and, for `page.md#anchor`, a heading of that page); each recipe page
links its paper on arxiv.org; and the code cites papers by arXiv id, never by the project's private
note or seed numbers, which no reader outside the project has.
"""

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = sorted(DOCS.glob("*.md")) + sorted(DOCS.glob("recipes/*.md"))
# Each recipe page and the arXiv id of its paper.
PAPERS = {"grace": "2601.04525", "trust": "2506.15522", "arena": "2505.13258", "lear": "2507.15586",
          "truthrl": "2509.25760", "search": "2503.09516"}
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _without_code_blocks(text: str) -> str:
  return re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)


def _prose(text: str) -> str:
  """`text` without code blocks and inline code spans, where `[x](y)` is not a link."""
  return re.sub(r"`[^`\n]*`", "", _without_code_blocks(text))


def _links(path: pathlib.Path) -> list[str]:
  return LINK.findall(_prose(path.read_text()))


def _anchors(path: pathlib.Path) -> set[str]:
  """GitHub's anchors of the page's headings: lower case, punctuation dropped, spaces to hyphens."""
  headings = re.findall(r"^#{1,6} (.+)$", _without_code_blocks(path.read_text()), flags=re.M)
  return {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}


def test_readme_is_a_front_page():
  lines = README.read_text().splitlines()
  assert len(lines) <= 200, f"README.md has {len(lines)} lines; move detail to a page under docs/"


def test_readme_links_every_docs_page():
  linked = {(ROOT / link.split("#")[0]).resolve() for link in _links(README)}
  missing = [str(p.relative_to(ROOT)) for p in PAGES if p.resolve() not in linked]
  assert PAGES and not missing, f"README.md does not link {missing}"


@pytest.mark.parametrize("page", [README] + PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_reach_files_and_headings(page):
  bad = []
  for link in _links(page):
    if re.match(r"[a-z][a-z0-9+.-]*:", link):  # https:, mailto: …
      continue
    target, _, anchor = link.partition("#")
    path = (page.parent / target).resolve() if target else page
    if not path.exists():
      bad.append(f"{link}: no such file")
    elif anchor and path.suffix == ".md" and anchor not in _anchors(path):
      bad.append(f"{link}: no heading #{anchor} in {path.relative_to(ROOT)}")
  assert not bad, f"{page.relative_to(ROOT)}: broken links {bad}"


@pytest.mark.parametrize("recipe", sorted(PAPERS))
def test_each_recipe_page_links_its_paper(recipe):
  page = DOCS / "recipes" / f"{recipe}.md"
  assert page.is_file(), f"docs/recipes/{recipe}.md is missing"
  url = re.compile(rf"\(https://arxiv\.org/(abs|pdf)/{re.escape(PAPERS[recipe])}(v\d+)?\)")
  assert url.search(page.read_text()), f"{page.relative_to(ROOT)} does not link arXiv:{PAPERS[recipe]}"


def test_code_cites_papers_not_private_notes():
  private = re.compile(r"\b(note|seed) 00[0-4]\b", re.I)
  hits = [f"{path.relative_to(ROOT)}:{i}: {line.strip()}"
          for folder in ("grounding_jax", "configs") for path in sorted((ROOT / folder).rglob("*"))
          if path.is_file() and path.suffix in (".py", ".md")
          for i, line in enumerate(path.read_text().splitlines(), 1) if private.search(line)]
  assert not hits, ("cite the paper's arXiv id and section instead (ids: docs/recipes/*.md):\n"
                    + "\n".join(hits))
