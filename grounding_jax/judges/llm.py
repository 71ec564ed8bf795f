"""LLM judges: an instruct model asked a yes/no or scored question, on any text backend.

  SamplerBackend       greedy generation with our JAX sampler (grounding_jax.sampling.generate)
  LLMNLIJudge          "does the premise entail the hypothesis?" (prompts.nli_messages)
  LLMCorrectnessJudge  "is this answer correct?" in a paper's style (a JudgeStyle, which the recipe
                       supplies); exact match short-circuits the call

A backend is any callable `fn(list[str]) -> list[str]`, or an object with
`chat(list[messages]) -> list[str]` (judges.openai_api.OpenAIBackend: the messages go to the server
as messages). Judges build chat messages; for a text backend they render them with
`backend.render(messages)` when it has one (SamplerBackend applies the chat template), else by joining
the message contents. Replies are parsed without raising; an unreadable reply counts as "not entailed"
/ "not correct" and is tallied in `judge.stats["unparseable"]`. A backend that raises (a server that
times out) makes the judge raise: the reward pool's on_error policy then scores those rows.
"""

from __future__ import annotations

import collections
import logging
from typing import Any, Sequence

import numpy as np

from grounding_jax import sampling
from grounding_jax import text as text_lib
from grounding_jax.judges import prompts as prompts_lib
from grounding_jax.judges.base import Backend, CachedNLI, check_correctness_inputs, remember
from grounding_jax.judges.style import JudgeStyle


def render_plain(messages: prompts_lib.Messages) -> str:
  """Messages → one string for a plain-text backend: contents joined by blank lines."""
  return "\n\n".join(m["content"] for m in messages)


def _run_backend(backend: Backend, messages: list[prompts_lib.Messages], stats) -> list[Any]:
  if not messages:
    return []
  if callable(getattr(backend, "chat", None)):
    replies = list(backend.chat(messages))
  else:
    render = getattr(backend, "render", render_plain)
    replies = list(backend([render(m) for m in messages]))
  if len(replies) != len(messages):
    raise ValueError(f"judge backend {backend!r} returned {len(replies)} replies for {len(messages)} "
                     "prompts; it must return one reply per prompt, in order.")
  stats["judge_calls"] += len(messages)
  return replies


class SamplerBackend:
  """Greedy generation with our JAX sampler (`grounding_jax.sampling.generate`) as a judge backend.

  `render` applies the tokenizer's chat template when it has one (system + user turns, generation
  prompt added), else joins the contents.
  """

  def __init__(self, model, tokenizer, *, max_new_tokens: int = 32, batch_size: int = 16,
               stop: Sequence[str] = (), mesh=None):
    if max_new_tokens < 1 or batch_size < 1:
      raise ValueError(f"SamplerBackend: max_new_tokens={max_new_tokens} and batch_size={batch_size} "
                       "must be >= 1.")
    self.model, self.tokenizer = model, tokenizer
    self.max_new_tokens, self.batch_size, self.stop = max_new_tokens, batch_size, tuple(stop)
    self.mesh = mesh  # the judge model's mesh when it is sharded (passed to generate)

  def render(self, messages: prompts_lib.Messages) -> str:
    if getattr(self.tokenizer, "chat_template", None):
      return self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return render_plain(messages)

  def __call__(self, prompts: list[str]) -> list[str]:
    out: list[str] = [""] * len(prompts)
    # Longest first, so each chunk pads little and lands in few length buckets; order restored below.
    order = sorted(range(len(prompts)), key=lambda i: -len(prompts[i]))
    for s in range(0, len(order), self.batch_size):
      idx = order[s:s + self.batch_size]
      gen = sampling.generate(self.model, self.tokenizer, [prompts[i] for i in idx],
                              max_new_tokens=self.max_new_tokens, temperature=0.0, stop=self.stop,
                              mesh=self.mesh)
      for i, text in zip(idx, gen.texts):
        out[i] = text
    return out


class LLMNLIJudge(CachedNLI):
  """An instruct LLM asked "does the premise entail the hypothesis? yes/no" (judge_prompts.nli_messages)."""

  def __init__(self, backend: Backend, *, parser: str = "robust", cache: bool = True):
    super().__init__(cache)
    if parser not in prompts_lib.PARSERS:
      raise ValueError(f"unknown judge reply parser {parser!r}; choose one of {sorted(prompts_lib.PARSERS)}.")
    self.backend, self._parse = backend, prompts_lib.PARSERS[parser]

  def _entails_uncached(self, premises, hypotheses):
    replies = _run_backend(self.backend, [prompts_lib.nli_messages(p, h)
                                          for p, h in zip(premises, hypotheses)], self.stats)
    out = np.zeros(len(replies), bool)
    for i, reply in enumerate(replies):
      verdict = self._parse(reply)
      if verdict is None:
        self.stats["unparseable"] += 1
      out[i] = bool(verdict)
    return out


class LLMCorrectnessJudge:
  """LLM answer-correctness judge in a paper's style; exact match short-circuits the LLM.

  `style` (a JudgeStyle, from the recipe whose paper defines it: recipes/<recipe>/judge.py) gives the
  messages, the reply parser, whether each gold alias gets its own call (stopping at the first
  "correct") and whether exact match may skip the call. `parser` overrides the reply parser: a name
  from judges.prompts.PARSERS ("robust": the first yes/no word) or the style's `parsers`, or a callable.
  Predictions that are empty after strip are wrong without a call. Rows whose prediction exactly
  matches an alias (SQuAD normalisation) are correct without a call, unless the style says otherwise.
  `examples` / `examples_path`: the style's few-shot block — a string, or a file the style reads
  (e.g. the paper's block, hash-checked); None for both lets the style choose (`few_shot_block`).
  `stats` counts em_short_circuit, empty, judge_calls, unparseable, cache_hits.
  """

  def __init__(self, backend: Backend, *, style: JudgeStyle, parser: str | None = None,
               exact_match_shortcut: bool = True, examples: str | None = None,
               examples_path: str | None = None, cache: bool = True):
    if not isinstance(style, JudgeStyle):
      raise ValueError(f"LLMCorrectnessJudge: style={style!r} is not a judges.JudgeStyle; a config's "
                       "style name is resolved by its recipe (recipes.get_recipe(name).judge_styles).")
    self.backend, self.style = backend, style
    self._parse = style.reply_parser(parser)
    self.exact_match_shortcut = exact_match_shortcut and style.exact_match_shortcut
    if style.few_shot_block is not None and examples is None:
      examples = style.few_shot_block(examples_path)
    self.examples = examples
    self._cache: dict[tuple, bool | None] | None = {} if cache else None
    self.stats: collections.Counter[str] = collections.Counter()
    self.last_unparseable = np.zeros(0, bool)

  def _messages(self, question: str, golds: list[str], prediction: str) -> prompts_lib.Messages:
    return self.style.messages(question, golds, prediction, self.examples)

  def _ask(self, requests: list[tuple[str, list[str], str]]) -> list[bool | None]:
    """One parsed LLM verdict (True / False / None = unreadable) per (question, golds, prediction)."""
    out: list[bool | None] = [None] * len(requests)
    missing: dict[tuple, list[int]] = {}
    for i, (q, g, p) in enumerate(requests):
      key = (self.style.name, q, tuple(g), p)
      if self._cache is not None and key in self._cache:
        out[i] = self._cache[key]
        self.stats["cache_hits"] += 1
      else:
        missing.setdefault(key, []).append(i)
    keys = list(missing)
    replies = _run_backend(self.backend, [self._messages(k[1], list(k[2]), k[3]) for k in keys],
                           self.stats)
    for key, reply in zip(keys, replies):
      verdict = self._parse(reply)
      if verdict is None:
        self.stats["unparseable"] += 1
        logging.debug("judge reply unparseable: %r", reply)
      if self._cache is not None:
        remember(self._cache, key, verdict)
      for i in missing[key]:
        out[i] = verdict
    return out

  def __call__(self, questions, predictions, golds) -> np.ndarray:
    """bool [N] correctness. Never raises on model output; raises on misaligned or malformed inputs.

    After a call, `last_unparseable` (bool [N]) marks rows counted wrong because a reply was
    unreadable (a recipe's metric may score those apart, e.g. ARENA's 0.5: recipes/arena/).
    """
    questions, predictions, golds = check_correctness_inputs(questions, predictions, golds)
    correct = np.zeros(len(predictions), bool)
    unreadable = np.zeros(len(predictions), bool)
    pending: list[int] = []
    for i, (p, g) in enumerate(zip(predictions, golds)):
      if not isinstance(p, str) or not p.strip() or not g:
        self.stats["empty"] += 1
      elif self.exact_match_shortcut and text_lib.exact_match(p, g) == 1.0:
        correct[i] = True
        self.stats["em_short_circuit"] += 1
      else:
        pending.append(i)
    if not self.style.per_alias:
      verdicts = self._ask([(questions[i], golds[i], predictions[i]) for i in pending])
      for i, v in zip(pending, verdicts):
        correct[i], unreadable[i] = bool(v), v is None
    else:
      # Per alias: round r asks about alias r for the rows still undecided (early exit per row).
      for r in range(max((len(golds[i]) for i in pending), default=0)):
        rows = [i for i in pending if r < len(golds[i])]
        verdicts = self._ask([(questions[i], [golds[i][r]], predictions[i]) for i in rows])
        for i, v in zip(rows, verdicts):
          correct[i] = bool(v)
          unreadable[i] |= v is None
        pending = [i for i in pending if not correct[i]]
      unreadable &= ~correct
    self.last_unparseable = unreadable
    return correct
