"""Tag parsing shared by every recipe: `<tag>…</tag>` blocks, the text after `</think>`, `\\boxed{}`.

Each function is total (any string in, a result out, nothing raised) and linear in the length of the
text, so adversarial model output (thousands of unclosed `<answer>` or `\\boxed{` openers) costs no
more than reading it. The semantics are those of the regular expressions the papers' code uses, which
the tests check on random strings:

  first_block(t, "answer")       re.search(r"<answer>(.*?)</answer>", t, re.S).group(1)
  blocks(t, "answer")            re.findall(r"<answer>(.*?)</answer>", t, re.S)
  extract_boxed(t, "first_regex") re.search(r"\\\\boxed{(.*?)}", t, re.S).group(1).strip()

Searching `<tag>(.*?)</tag>` with a backtracking engine restarts at every opener, so a text with n
openers and no closer costs O(n·len); here the first opener's scan decides for all of them (if no
closer follows it, none follows a later opener either).
"""

from __future__ import annotations

BOX = "\\boxed{"


def open_tag(tag: str) -> str:
  return f"<{tag}>"


def close_tag(tag: str) -> str:
  return f"</{tag}>"


def block_span(text: str, tag: str, start: int = 0) -> tuple[int, int] | None:
  """(begin, end) of the content of the first complete `<tag>…</tag>` block at or after `start`
  (non-greedy: the block ends at the first closer after its opener), or None."""
  opener, closer = open_tag(tag), close_tag(tag)
  i = text.find(opener, start)
  if i < 0:
    return None
  begin = i + len(opener)
  end = text.find(closer, begin)
  return None if end < 0 else (begin, end)


def first_block(text: str, tag: str) -> str | None:
  """The content of the first complete `<tag>…</tag>` block, not stripped, or None."""
  span = block_span(text, tag)
  return None if span is None else text[span[0]:span[1]]


def blocks(text: str, tag: str) -> list[str]:
  """The contents of all complete, non-overlapping `<tag>…</tag>` blocks, in order."""
  out, pos = [], 0
  while (span := block_span(text, tag, pos)) is not None:
    out.append(text[span[0]:span[1]])
    pos = span[1] + len(close_tag(tag))
  return out


def count_tags(text: str, tags) -> int:
  """Total occurrences of the given tag strings (e.g. ("<answer>", "</answer>")) in `text`."""
  return sum(text.count(t) for t in tags)


def after_think(text: str) -> str:
  """The text after the last `</think>` (the whole text when there is none), stripped: what GRACE and
  TruthRL-style evaluators read as the response (GRACE Alg. 1 line 1, `src/evaluator.py`)."""
  return text.split("</think>")[-1].strip()


def _matching_braces(text: str) -> dict[int, int]:
  """Position of each "{" -> position of the "}" that closes it (balanced), for the braces that close."""
  match, stack = {}, []
  for i, ch in enumerate(text):
    if ch == "{":
      stack.append(i)
    elif ch == "}" and stack:
      match[stack.pop()] = i
  return match


def extract_boxed(text: str, *, select: str = "last") -> str | None:
  """Content of a `\\boxed{...}`, stripped, or None if there is none.

  select="last" (default, TruthRL note §9 item 9 [DECISION]): the last box that closes, with
  balanced-brace parsing (so `\\boxed{\\text{X}}` gives `\\text{X}`; a box echoed in <think> is
  superseded by the final one). "first": the first box that closes, balanced. "first_regex": the
  authors' code, `re.search(r"\\\\boxed{(.*?)}")` (first match, non-greedy; nested braces cut it).
  """
  if select not in ("last", "first", "first_regex"):
    raise ValueError(f"extract_boxed: select={select!r}; use 'last', 'first' or 'first_regex'.")
  if select == "first_regex":
    start = text.find(BOX)
    if start < 0:
      return None
    end = text.find("}", start + len(BOX))
    return None if end < 0 else text[start + len(BOX):end].strip()
  starts, pos = [], 0
  while (pos := text.find(BOX, pos)) >= 0:
    starts.append(pos)
    pos += len(BOX)
  if not starts:
    return None
  match = _matching_braces(text)
  if select == "last":
    starts.reverse()
  for s in starts:
    brace = s + len(BOX) - 1
    if brace in match:
      return text[brace + 1:match[brace]].strip()
  return None  # every box is unclosed (e.g. truncated)
