"""LLM judges: an instruct model asked a yes/no or scored question, on any text backend.

  SamplerBackend       greedy generation with our JAX sampler (grounding_jax.sampling.generate)
  LLMNLIJudge          "does the premise entail the hypothesis?" (prompts.nli_messages)
  LLMCorrectnessJudge  TruthRL's CRAG-style prompt (004 §2.5) or the ARENA / GRACE judge (002 §2.8,
                       000 §6.4); exact match short-circuits the call

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
from typing import Any, Callable, Sequence

import numpy as np

from grounding_jax import sampling
from grounding_jax import text as text_lib
from grounding_jax.judges import prompts as prompts_lib
from grounding_jax.judges.base import Backend, CachedNLI, check_correctness_inputs, remember

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


def _parser(name: str) -> Callable[[object], bool | None]:
  parsers = dict(prompts_lib.YES_NO_PARSERS, json_score=prompts_lib.parse_json_score)
  if name not in parsers:
    raise ValueError(f"unknown judge reply parser {name!r}; choose one of {sorted(parsers)}.")
  return parsers[name]


class LLMNLIJudge(CachedNLI):
  """An instruct LLM asked "does the premise entail the hypothesis? yes/no" (judge_prompts.nli_messages)."""

  def __init__(self, backend: Backend, *, parser: str = "robust", cache: bool = True):
    super().__init__(cache)
    self.backend, self._parse = backend, _parser(parser)

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


# Default reply parser per style: the papers' own (004 §2.5 JSON score; GRACE's code counts only an
# exact "yes", 000 §6.3 / §9 item 27), and the robust first yes/no word for ARENA (its code's
# substring rule is parser="arena", 002 §2.8).
_STYLES = {"truthrl": "json_score", "truthrl_reasoning": "json_score", "arena": "robust", "grace": "grace"}


class LLMCorrectnessJudge:
  """LLM answer-correctness judge with the papers' prompts; exact match short-circuits the LLM.

  Styles:
    "truthrl"  CRAG-style system+user messages, one call per gold alias, stopping at the first
               score 1 (004 §2.5); reply parsed as JSON "score".
    "arena"    ARENA's prompt with `str(golds)`, system "You are an intelligent AI assistant." (002 §2.8).
    "grace"    GRACE's prompt with golds joined by newlines, one user message (000 §6.4).
    "truthrl_reasoning"  TruthRL's reasoning-quality judge (004 §2.6): `predictions` are FULL
               responses (think + answer); 1 if any alias gets score 1; never short-circuited by EM.
  `parser` overrides the reply parser: "grace" (default for grace: GRACE's exact
  `reply.lower() == "yes"`, so "Yes." is wrong), "robust" (default for arena: first yes/no word),
  "arena" (ARENA's substring rule), "json_score" (default for the TruthRL styles).
  Predictions that are empty after strip are wrong without a call (ARENA's code). Rows whose prediction
  exactly matches an alias (SQuAD normalisation) are correct without a call.
  `examples` / `examples_path`: the few-shot block of the TruthRL styles — a string, or a file holding
  the paper's block (hash-checked); None for both uses the paper's block from $GJ_TRUTHRL_PROMPTS, or
  our short default with a warning (judges.prompts.truthrl_examples).
  `stats` counts em_short_circuit, empty, judge_calls, unparseable, cache_hits.
  """

  def __init__(self, backend: Backend, *, style: str = "truthrl", parser: str | None = None,
               exact_match_shortcut: bool = True, examples: str | None = None,
               examples_path: str | None = None, cache: bool = True):
    if style not in _STYLES:
      raise ValueError(f"LLMCorrectnessJudge: style={style!r}; choose one of {sorted(_STYLES)}.")
    self.backend, self.style = backend, style
    self._parse = _parser(parser or _STYLES[style])
    self.exact_match_shortcut = exact_match_shortcut and style != "truthrl_reasoning"
    if style.startswith("truthrl") and examples is None:
      examples = prompts_lib.truthrl_examples(style, examples_path)
    self.examples = examples
    self._cache: dict[tuple, bool | None] | None = {} if cache else None
    self.stats: collections.Counter[str] = collections.Counter()
    self.last_unparseable = np.zeros(0, bool)

  def _messages(self, question: str, golds: list[str], prediction: str) -> prompts_lib.Messages:
    if self.style == "truthrl":
      return prompts_lib.truthrl_messages(question, golds[0], prediction, examples=self.examples)
    if self.style == "truthrl_reasoning":
      return prompts_lib.truthrl_reasoning_messages(question, golds[0], prediction,
                                                    examples=self.examples)
    if self.style == "arena":
      return prompts_lib.arena_messages(question, golds, prediction)
    return prompts_lib.grace_messages(question, golds, prediction)

  def _ask(self, requests: list[tuple[str, list[str], str]]) -> list[bool | None]:
    """One parsed LLM verdict (True / False / None = unreadable) per (question, golds, prediction)."""
    out: list[bool | None] = [None] * len(requests)
    missing: dict[tuple, list[int]] = {}
    for i, (q, g, p) in enumerate(requests):
      key = (self.style, q, tuple(g), p)
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
    unreadable (ARENA's metric gives those 0.5; see eval.paper_eval.evaluate_arena).
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
    if not self.style.startswith("truthrl"):
      verdicts = self._ask([(questions[i], golds[i], predictions[i]) for i in pending])
      for i, v in zip(pending, verdicts):
        correct[i], unreadable[i] = bool(v), v is None
    else:
      # TruthRL: alias round r asks about alias r for the rows still undecided (early exit per row).
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
