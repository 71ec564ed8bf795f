"""What the multi-turn sampler asks of a tool: a retriever called inside the rollout.

Search-R1 (arXiv 2503.09516, §3.1 and its template, Table 1): the policy writes a query between
`<search>` and `</search>`; generation stops there, the host runs the query, and the retrieved
passages go back into the context between `<information>` and `</information>`, after which the
policy continues. The sampler only needs what is here: a callable from queries to results, and the
tags. Retrievers that satisfy `Tool` live in grounding_jax/tools/; a recipe names its tags.

A prompt may withhold passages from its searches (`Withheld`: a gold_removed prompt of an
evidence-contrast group searches the corpus without its question's gold passages, data/contrast.py):
the sampler then passes each query its row's `Withheld`, and only a tool that says it can filter
(`withholds = True`) is called so.
"""

from __future__ import annotations

import dataclasses
from typing import Iterable, Protocol, Sequence


def same_text(text: str) -> str:
  """A passage's text with its whitespace collapsed: how a passage is recognised under another id."""
  return " ".join(str(text).split())


@dataclasses.dataclass(frozen=True)
class Withheld:
  """The passages one prompt's searches must never return: a passage is hidden when its id is one
  of `ids`, or its text, whitespace aside, one of `texts` (a corpus may hold a paragraph that
  several questions share under one id). Hashable: it is part of a tool's cache key. Empty = none."""
  ids: frozenset = frozenset()
  texts: frozenset = frozenset()

  @classmethod
  def of(cls, passages: Iterable) -> "Withheld":
    """The Withheld of `passages` (anything with `id` and `text`)."""
    passages = list(passages)
    return cls(frozenset(str(p.id) for p in passages if p.id),
               frozenset(same_text(p.text) for p in passages if str(p.text).strip()))

  def __bool__(self) -> bool:
    return bool(self.ids or self.texts)

  @property
  def size(self) -> int:
    """How many passages it names (at least; what an over-fetching tool asks for beyond top k)."""
    return max(len(self.ids), len(self.texts))

  def hides(self, doc_id: str, text: str) -> bool:
    return (bool(doc_id) and str(doc_id) in self.ids) or same_text(text) in self.texts


@dataclasses.dataclass(frozen=True)
class ToolResult:
  """One query's answer: the text the policy reads, and what it came from."""
  text: str                       # goes between the result tags (formatted passages)
  doc_ids: tuple[str, ...] = ()   # the retrieved passages' ids: retrieval recall of the gold passage
  error: str = ""                 # non-empty when the call failed and on_error chose to go on
  # The retrieved passages' texts: recall also finds a gold passage stored under another id (a
  # paragraph shared by questions sits in a corpus once, under one of its ids).
  doc_texts: tuple[str, ...] = ()


class Tool(Protocol):
  """A batch of queries in, one ToolResult per query out (in order). A tool handles its own failures
  (timeouts, retries, `on_error`); it raises only when told to.

  A tool that can withhold passages per query sets `withholds = True` and takes
  `withheld=[Withheld per query]`: then no result of query i holds a passage `withheld[i]` hides, and
  the results are the best of the others (grounding_jax/tools/: RetrieverTool, HttpRetriever).
  The sampler passes `withheld` only when some prompt of the rollout withholds passages."""

  def __call__(self, queries: Sequence[str]) -> list[ToolResult]:
    ...


def withholds(tool) -> bool:
  """Can `tool` withhold passages per query (Tool's docstring)?"""
  return bool(getattr(tool, "withholds", False))


@dataclasses.dataclass(frozen=True)
class ToolFormat:
  """The tags of a tool call and of its result (Search-R1's by default)."""
  call_open: str = "<search>"
  call_close: str = "</search>"
  result_open: str = "<information>"
  result_close: str = "</information>"
  separator: str = "\n\n"  # around the result (Search-R1 puts blank lines around it)

  def wrap(self, result: ToolResult) -> str:
    """The text inserted into the context after a call."""
    return f"{self.separator}{self.result_open}{result.text}{self.result_close}{self.separator}"

  def inserted_spans(self, text: str) -> list[tuple[int, int]]:
    """[start, end) character spans of the results `wrap` inserted into `text`: each result block
    that follows a closed call with only whitespace between, from the end of the call's close tag
    through the result's close tag and the separator after it (when there). These are the tokens
    the rollout marks as not the policy's (multiturn.py: policy_mask False) and SFT gives no loss;
    a result block the policy wrote elsewhere is not one, and an unclosed one ends the search."""
    spans, pos = [], 0
    while (i := text.find(self.call_close, pos)) >= 0:
      start = j = pos = i + len(self.call_close)
      while j < len(text) and text[j].isspace():
        j += 1
      if not text.startswith(self.result_open, j):
        continue
      end = text.find(self.result_close, j + len(self.result_open))
      if end < 0:
        break
      pos = end = end + len(self.result_close)
      if text.startswith(self.separator, end):
        end += len(self.separator)
      spans.append((start, end))
    return spans

  def query(self, text: str) -> str | None:
    """The query of the last call in `text` if `text` ends with a closed call, else None."""
    stripped = text.rstrip()
    if not stripped.endswith(self.call_close):
      return None
    body = stripped[:-len(self.call_close)]
    start = body.rfind(self.call_open)
    return None if start < 0 else body[start + len(self.call_open):].strip()
