"""CRAG reader (Meta KDD Cup 2024 Task 1&2 `*.jsonl` / `*.jsonl.bz2`), used by TruthRL.

Each record has `query`, `query_time`, `answer`, `alternative_answers` (older files: `alt_ans`) and
`search_results`: up to 5 (Task 1&2) or 50 web pages with `page_name`, `page_url`, `page_snippet`,
`page_result` (the full HTML) and `page_last_modified`. TruthRL does not say how pages were cleaned
or chunked (arXiv:2509.25760 App. A); we offer the search snippet as one passage per page
(`pages="snippet"`) or the page's visible text, extracted with the standard-library HTML parser and
cut into overlapping windows (`pages="html"`). CRAG has no answerability label, so `answerable` is
None; the query time, domain and question type go to meta (TruthRL's prompt shows the query time).
"""

from __future__ import annotations

import ast
import dataclasses
import html.parser
import os
from typing import Any, Iterator

from grounding_jax.data.construct import chunk_passage
from grounding_jax.data.readers.jsonio import field, iter_records, str_list
from grounding_jax.data.schema import DataError, Example, Passage, validate_example

PAGE_MODES = ("snippet", "html")
_SKIP_TAGS = {"script", "style", "noscript", "template", "svg", "head", "iframe", "canvas"}
_BLOCK_TAGS = {"p", "div", "br", "li", "tr", "td", "th", "h1", "h2", "h3", "h4", "h5", "h6", "section",
               "article", "table", "ul", "ol", "header", "footer", "title", "blockquote", "pre"}


class _TextExtractor(html.parser.HTMLParser):
  """Collects visible text; block-level tags become line breaks, script/style/head are dropped."""

  def __init__(self):
    super().__init__(convert_charrefs=True)
    self.parts: list[str] = []
    self.skip_depth = 0

  def handle_starttag(self, tag, attrs):
    if tag in _SKIP_TAGS:
      self.skip_depth += 1
    elif tag in _BLOCK_TAGS:
      self.parts.append("\n")

  def handle_startendtag(self, tag, attrs):
    if tag in _BLOCK_TAGS:
      self.parts.append("\n")

  def handle_endtag(self, tag):
    if tag in _SKIP_TAGS:
      self.skip_depth = max(0, self.skip_depth - 1)
    elif tag in _BLOCK_TAGS:
      self.parts.append("\n")

  def handle_data(self, data):
    if not self.skip_depth:
      self.parts.append(data)


def html_to_text(page_html: str) -> str:
  """Visible text of an HTML page: one line per block, whitespace collapsed, empty lines dropped."""
  parser = _TextExtractor()
  parser.feed(page_html)
  parser.close()
  lines = (" ".join(line.split()) for line in "".join(parser.parts).split("\n"))
  return "\n".join(line for line in lines if line)


def _passages(results: list, source: str, *, pages: str, chunk_tokens: int, chunk_overlap: int,
              tokenizer: Any, max_pages: int | None) -> list[Passage]:
  out = []
  for i, page in enumerate(results[:max_pages] if max_pages is not None else results):
    label = f"search_results[{i}]"
    name = field(page, "page_name", str, source, path=label, required=False, default="")
    url = field(page, "page_url", str, source, path=label, required=False, default="")
    if pages == "snippet":
      # Snippets carry inline markup (<strong>…</strong>) and entities; keep only their text.
      snippet = html_to_text(field(page, "page_snippet", str, source, path=label, required=False, default=""))
      if snippet:
        out.append(Passage(text=" ".join(snippet.split()), title=name, id=url))
      continue
    text = html_to_text(field(page, "page_result", str, source, path=label, required=False, default=""))
    if text:
      page_passage = Passage(text=text, title=name, id=url)
      chunks = chunk_passage(page_passage, tokenizer=tokenizer, max_tokens=chunk_tokens,
                             overlap=chunk_overlap)
      out.extend(dataclasses.replace(c, id=f"{url}#{j}") for j, c in enumerate(chunks))
  return out


def _example(row: dict, source: str, **kw) -> Example:
  answer = field(row, "answer", str, source)
  alt_key = "alternative_answers" if "alternative_answers" in row else "alt_ans"
  alternatives = field(row, alt_key, (list, str), source, required=False, default=[])
  if isinstance(alternatives, str):  # the example dev file stores the list as its repr, e.g. "[]"
    try:
      alternatives = ast.literal_eval(alternatives)
    except (ValueError, SyntaxError) as e:
      raise DataError(f"{source}: field '{alt_key}': a string that is not a list literal") from e
  alternatives = str_list(alternatives, alt_key, source)
  meta = {"dataset": "crag"}
  for key in ("query_time", "domain", "question_type", "static_or_dynamic", "split"):
    if row.get(key) is not None:
      meta[key] = row[key]
  example = Example(
      question=field(row, "query", str, source),
      passages=tuple(_passages(field(row, "search_results", list, source, required=False, default=[]),
                               source, **kw)),
      answers=tuple(dict.fromkeys([answer] + alternatives)),
      answerable=None,
      id=field(row, "interaction_id", str, source, required=False, default=""),
      meta=meta,
  )
  return validate_example(example, source=source)


def read_crag(path: str | os.PathLike, *, pages: str = "snippet", chunk_tokens: int = 512,
              chunk_overlap: int = 64, tokenizer: Any = None, max_pages: int | None = None,
              limit: int | None = None) -> Iterator[Example]:
  """Streams `Example`s from a CRAG jsonl(.bz2) file.

  Args:
    path: the file.
    pages: "snippet" (one passage per search result) or "html" (chunks of the page's visible text).
    chunk_tokens, chunk_overlap: window size/overlap for "html" (tokens with a tokenizer, else words).
    tokenizer: optional HF tokenizer for chunking.
    max_pages: use only the first `max_pages` search results.
    limit: stop after this many examples.
  """
  if pages not in PAGE_MODES:
    raise ValueError(f"pages={pages!r}; choose one of {PAGE_MODES}")
  n = 0
  for rec in iter_records(path):
    if limit is not None and n >= limit:
      return
    yield _example(rec.value, rec.source, pages=pages, chunk_tokens=chunk_tokens,
                   chunk_overlap=chunk_overlap, tokenizer=tokenizer, max_pages=max_pages)
    n += 1
