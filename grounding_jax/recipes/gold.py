"""Gold SFT completions' shared parts: whether an example's passages hold its answer, its gold answer,
the gold evidence sentences with the passages they cite, and a guard for tag formats that forbid "<".
Each recipe's `gold_completion` (recipes/<recipe>/recipe.py) assembles its own format from these."""

from __future__ import annotations

from grounding_jax import text
from grounding_jax.data.schema import Example


def has_answer_in_context(example: Example) -> bool:
  """Do the example's passages hold its answer? `answerable` when set, else whether it has gold
  evidence or gold passages (GRACE's rule for unlabelled rows, from the authors' `src/custom_reward_v2.py`)."""
  if example.answerable is not None:
    return bool(example.answerable)
  return bool(any(e for e in example.evidence) or example.gold_passage_ids)


def gold_answer(recipe: str, example: Example) -> str:
  """The example's first gold answer (the papers' SFT targets state one answer)."""
  answers = [a for a in example.answers if isinstance(a, str) and a.strip()]
  if not answers:
    raise ValueError(f"recipe {recipe!r} gold completion: example id={example.id!r} has no answers; "
                     "an SFT target states the gold answer — fix or drop the row.")
  return answers[0]


def gold_support(example: Example, max_citations: int = 3) -> list[tuple[tuple[int, ...], str]]:
  """(1-based passage positions, sentence) for each gold evidence sentence, in order.

  A sentence cites the gold passages that contain it (else any passage that does, else the first gold
  passage), at most `max_citations`. Without gold evidence, each gold passage's text stands for it.
  Empty when the example has neither (an unanswerable context).
  """
  sentences = [s for e in example.evidence if isinstance(e, str) and e.strip()
               for s in (text.split_sentences(e) or [e.strip()])]
  out = []
  for sentence in sentences:
    found = [i + 1 for i, p in enumerate(example.passages) if sentence in p.text]
    ids = [i for i in found if i in example.gold_passage_ids] or found or list(example.gold_passage_ids[:1])
    out.append((tuple(ids[:max_citations]), sentence))
  if not out:
    out = [((i,), example.passages[i - 1].text.strip()) for i in example.gold_passage_ids
           if 0 < i <= len(example.passages)]
  return out


def no_angle_brackets(s: str) -> str:
  """`s` with "<" and ">" replaced by "‹" / "›": for tag formats whose sections forbid "<" (ARENA's
  and the naive baseline's `[^<]*` regexes), so quoted passage text cannot break the format."""
  return s.replace("<", "\u2039").replace(">", "\u203a")
