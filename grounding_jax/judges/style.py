"""A judge style: what a paper asks its answer-correctness judge, and how it reads the reply.

A prompt and the parser of its reply are one wire format, so they travel together. The papers' styles
live with their recipes (grounding_jax/recipes/<recipe>/judge.py) and reach `judges/` as objects:
a recipe's `judge_styles` maps the names a config may give (`judge=dict(kind="llm", style=NAME)`)
to these, and the recipe puts the object into the spec before `judges.build` / `judges.lazy` sees it.
`judges/` itself names no paper.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence

from grounding_jax.judges import prompts

Parser = Callable[[object], Optional[bool]]


@dataclasses.dataclass(frozen=True)
class JudgeStyle:
  """One paper's correctness judge.

  Attributes:
    name: the style's name in configs (`judge=dict(..., style=name)`); also the cache key's prefix.
    messages: (question, golds, prediction, few_shot) -> chat messages. `golds` is the row's alias
      list, or a one-alias list when `per_alias`; `few_shot` is the block from `few_shot_block`
      (None for styles without one).
    parser: the paper's reading of a reply: True / False, or None when unreadable; never raises.
    parsers: other reply parsers that the judge option `parser=NAME` may pick, besides the generic
      ones of `judges.prompts.PARSERS`.
    per_alias: one call per gold alias, in order, stopping at the first "correct" (else one call
      with all aliases).
    exact_match_shortcut: a prediction that exactly matches an alias (SQuAD normalisation) is
      correct without a call (off for judges that grade more than the answer).
    few_shot_block: examples_path (or None) -> the few-shot block `messages` receives; None for a
      style without one.
    decoding: a served judge's decoding (max_tokens, temperature, top_p) from the paper.
  All callables must be module-level functions, so that a spec holding a style pickles.
  """
  name: str
  messages: Callable[[str, Sequence[str], str, Optional[str]], prompts.Messages]
  parser: Parser
  parsers: Mapping[str, Parser] = dataclasses.field(default_factory=dict)
  per_alias: bool = False
  exact_match_shortcut: bool = True
  few_shot_block: Optional[Callable[[Optional[str]], str]] = None
  decoding: Mapping[str, Any] = dataclasses.field(default_factory=dict)

  def reply_parser(self, name: str | Parser | None) -> Parser:
    """The parser `name` picks (None: the style's own); a callable is used as given."""
    if name is None:
      return self.parser
    if callable(name):
      return name
    known = {**prompts.PARSERS, **self.parsers}
    if name not in known:
      raise ValueError(f"judge style {self.name!r}: unknown reply parser {name!r}; choose one of "
                       f"{sorted(known)}.")
    return known[name]


def with_style(spec: Any, styles: Mapping[str, JudgeStyle]) -> Any:
  """`spec` (a judge config value) with its `style` name replaced by the style object from
  `styles`; a spec naming no style gets the first of `styles`. Specs of kinds without a prompt
  (exact_match, nli), judge objects, None and specs already holding a JudgeStyle pass through.

  Raises:
    ValueError: the spec names a style that `styles` does not hold (the message lists them).
  """
  if spec is None or callable(spec) or isinstance(spec, (str, bytes)) or not styles:
    return spec
  if hasattr(spec, "to_dict"):  # ml_collections.ConfigDict
    spec = spec.to_dict()
  if not isinstance(spec, Mapping) or spec.get("kind") not in ("llm", "openai"):
    return spec
  style = spec.get("style")
  if isinstance(style, JudgeStyle):
    return spec
  if style is None:
    return {**spec, "style": next(iter(styles.values()))}
  if style not in styles:
    raise ValueError(f"judge style={style!r}; this recipe's judge styles are {sorted(styles)}.")
  return {**spec, "style": styles[style]}
