"""Knowledge-boundary probing (TruthRL, arXiv:2509.25760 §3.1): sample a policy many times per question.

"For each training question, we sample 256 responses, and the question is marked as OOK if none of the
responses is correct." `probe_knowledge` counts the correct samples; `data.answerability.relabel_unknown`
writes the OOK labels.

`abstain_branch_probability` asks a model, without sampling, which way it leans where a recipe's
gold completions for answering and for abstaining part (TruthRL's: "<think>Document …" or
"<think>None of the documents …"); `auroc` of it on gold-removed against gold-kept copies of the
same questions says whether that choice follows the evidence (0.5: it does not).
`branch_hidden_states` and `ridge_probe_scores` ask the question behind that: is whether the
evidence is there linearly readable from the hidden state at the branch (a cross-validated linear
probe), whatever the model's head makes of it?
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Sequence

import numpy as np

from grounding_jax import judges
from grounding_jax import sampling
from grounding_jax.data import retrieval
from grounding_jax.data.schema import Example
from grounding_jax.sampling.prompts import encode_prompts
from grounding_jax import recipes
from grounding_jax.text import tags


@dataclasses.dataclass(frozen=True)
class ProbeResult:
  """Knowledge-boundary probe: per question, how many of `num_samples` answers were correct."""
  num_correct: np.ndarray  # int [P]
  num_samples: int
  answers: list[list[str]]  # [P][num_samples] extracted answers

  @property
  def known(self) -> np.ndarray:
    """bool [P]: at least one sampled answer was correct (TruthRL: otherwise out-of-knowledge)."""
    return self.num_correct > 0


def _default_answer_fn(completion: str) -> str:
  # The last \boxed{} answer; no box means no answer (never correct).
  return tags.extract_boxed(completion) or ""


def probe_knowledge(model: Any, tokenizer: Any, examples: Sequence[Example], *,
                    num_samples: int = 256, max_new_tokens: int = 256, temperature: float = 0.6,
                    top_p: float = 0.9, prompt_batch_size: int = 8, samples_per_call: int = 32,
                    seed: int = 0, recipe: str | None = None,
                    prompt_fn: Callable[[Example], str] | None = None,
                    answer_fn: Callable[[str], str] | None = None, judge: Any = None,
                    generate_fn: Callable[..., Any] | None = None) -> ProbeResult:
  """Samples `num_samples` answers per question and counts the correct ones (TruthRL §3.1).

  Args:
    model, tokenizer: the policy being probed (labels are model-specific).
    examples: questions with gold `answers` (and the passages the policy will see).
    num_samples: answers per question (TruthRL: 256).
    max_new_tokens, temperature, top_p: sampling settings (TruthRL v2: temperature 0.6, top-p 0.9;
      the probing setup of arXiv:2509.25760v2).
    prompt_batch_size, samples_per_call: questions and samples per `generate_fn` call; bounds memory.
    seed: base seed; each call gets a stable seed of (seed, first question index, sample offset).
    recipe: the recipe (a registered name) whose prompt, answer extraction and judge styles the
      probe uses where prompt_fn / answer_fn / a judge spec's style are not given (TruthRL's own).
    prompt_fn: Example -> rendered prompt; default `recipe`'s prompt through the tokenizer's template.
    answer_fn: completion -> answer; default `recipe`'s answer, else the last `\\boxed{}` (empty when
      there is none).
    judge: a CorrectnessJudge (questions, predictions, golds) -> bool[N], or a judge spec (its style
      from `recipe`); default exact match.
    generate_fn: `grounding_jax.sampling.generate` by default; any callable with its signature whose
      result has `.texts` (prompt-major) works.

  Returns:
    ProbeResult; `.known[i]` is False for out-of-knowledge questions.
  """
  if num_samples < 1 or samples_per_call < 1 or prompt_batch_size < 1:
    raise ValueError(f"num_samples={num_samples}, samples_per_call={samples_per_call} and "
                     f"prompt_batch_size={prompt_batch_size} must all be ≥ 1.")
  for i, e in enumerate(examples):
    if not e.answers:
      raise ValueError(f"examples[{i}] (id {e.id!r}) has no gold answers; probing needs them.")
  if prompt_fn is None and recipe is None:
    raise ValueError("probe_knowledge needs prompt_fn= or recipe= (the recipe whose prompt the "
                     f"policy was trained on; one of {recipes.available_recipes()}).")
  chosen = recipes.get_recipe(recipe) if recipe is not None else None
  generate_fn = generate_fn or sampling.generate
  prompt_fn = prompt_fn or (lambda ex: chosen.render_prompt(ex, tokenizer))
  answer_fn = answer_fn or (chosen.answer if chosen is not None else _default_answer_fn)
  spec = chosen.judge_spec(judge) if chosen is not None else judge
  judge = judges.build(spec, role="correctness") or judges.ExactMatchJudge()

  answers: list[list[str]] = [[] for _ in examples]
  for start in range(0, len(examples), prompt_batch_size):
    batch = list(examples[start:start + prompt_batch_size])
    prompts = [prompt_fn(e) for e in batch]
    for offset in range(0, num_samples, samples_per_call):
      n = min(samples_per_call, num_samples - offset)
      gen = generate_fn(model, tokenizer, prompts, max_new_tokens=max_new_tokens,
                        temperature=temperature, top_p=top_p, num_samples=n,
                        seed=retrieval.stable_seed("probe", seed, start, offset))
      texts = list(gen.texts)
      if len(texts) != len(batch) * n:
        raise ValueError(f"generate_fn returned {len(texts)} texts for {len(batch)} prompts × {n} "
                         "samples; it must return prompt-major rows.")
      for j in range(len(batch)):
        answers[start + j] += [answer_fn(t) for t in texts[j * n:(j + 1) * n]]

  flat_q = [e.question for e, a in zip(examples, answers) for _ in a]
  flat_pred = [p for a in answers for p in a]
  flat_gold = [list(e.answers) for e, a in zip(examples, answers) for _ in a]
  correct = np.asarray(judge(flat_q, flat_pred, flat_gold), bool).reshape(len(examples), num_samples)
  return ProbeResult(num_correct=correct.sum(1), num_samples=num_samples, answers=answers)


# --- the answer-or-abstain branch ---------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Branch:
  """Where a recipe's gold completions for answering and for abstaining on one question part: the
  tokens they share (`prefix`), then the first token of each."""
  prefix: tuple[int, ...]
  answer_token: int
  abstain_token: int


def branch_of(recipe_name: str, example: Example, tokenizer: Any) -> Branch:
  """The answer-or-abstain branch of `example` in `recipe_name`'s gold completions (its answering
  one as if answerable, its abstaining one as if not), tokenised as an SFT target is.

  Raises:
    ValueError: the two completions do not part (one begins the other).
  """
  recipe = recipes.get_recipe(recipe_name)
  answer, abstain = (tokenizer.encode(recipe.gold_completion(dataclasses.replace(example, answerable=a)),
                                      add_special_tokens=False) for a in (True, False))
  k = 0
  while k < min(len(answer), len(abstain)) and answer[k] == abstain[k]:
    k += 1
  if k == min(len(answer), len(abstain)):
    raise ValueError(f"{recipe_name}: the answering and abstaining gold completions of {example.id!r} "
                     "do not part (one begins the other), so there is no branch to probe")
  return Branch(tuple(answer[:k]), answer[k], abstain[k])


def _branch_of_examples(recipe: str, examples: Sequence[Example], tokenizer: Any) -> Branch:
  """The one branch every answerable example of `examples` gives (branch_of)."""
  found = {ex.id: branch_of(recipe, ex, tokenizer) for ex in examples if ex.answerable}
  if not found:
    raise ValueError("probing: no answerable example to find the recipe's branch from; "
                     "pass branch=")
  (first_id, branch), *_ = found.items()
  other = [i for i, b in found.items() if b != branch]
  if other:
    raise ValueError(f"{recipe}: the answerable examples part at different tokens ({other[0]!r} "
                     f"differs from {first_id!r}); pass branch=")
  return branch


def branch_hidden_states(model: Any, tokenizer: Any, examples: Sequence[Example], *, recipe: str,
                         branch: Branch | None = None, batch_size: int = 4,
                         width_multiple: int = 128) -> tuple[np.ndarray, Branch]:
  """(float32 [N, D], the branch): per example, the final hidden state (after the last norm) at the
  position that predicts the recipe's answer-or-abstain token — the prompt rendered as the rollout
  renders it, then the branch's shared prefix. One forward pass a row. `branch` defaults to the
  one every answerable example gives (abstain_branch_probability's)."""
  from flax import nnx  # pylint: disable=g-import-not-at-top
  import jax  # pylint: disable=g-import-not-at-top
  import jax.numpy as jnp  # pylint: disable=g-import-not-at-top
  chosen = recipes.get_recipe(recipe)
  branch = branch or _branch_of_examples(recipe, examples, tokenizer)
  prompts = encode_prompts(tokenizer, [chosen.render_prompt(ex, tokenizer) for ex in examples])
  rows = [list(p) + list(branch.prefix) for p in prompts]
  graphdef, state = nnx.split(model)

  @jax.jit
  def last_hidden(state, ids, mask):  # [B, T] -> [B, D]
    return nnx.merge(graphdef, state).hidden_states(ids, mask)[:, -1].astype(jnp.float32)

  out = []
  for start in range(0, len(rows), batch_size):
    batch = rows[start:start + batch_size]
    n = len(batch)
    batch = batch + [batch[-1]] * (batch_size - n)  # one shape for every batch
    width = -(-max(len(r) for r in batch) // width_multiple) * width_multiple
    ids = np.zeros((batch_size, width), np.int32)
    mask = np.zeros((batch_size, width), bool)
    for i, r in enumerate(batch):  # left-padded
      ids[i, width - len(r):], mask[i, width - len(r):] = r, True
    out.append(np.asarray(last_hidden(state, jnp.asarray(ids), jnp.asarray(mask)))[:n])
  return (np.concatenate(out) if out else np.zeros((0, 0), np.float32)), branch


def abstain_branch_probability(model: Any, tokenizer: Any, examples: Sequence[Example], *,
                               recipe: str, branch: Branch | None = None, batch_size: int = 4,
                               width_multiple: int = 128) -> np.ndarray:
  """float [N]: per example, p(abstain) / (p(abstain) + p(answer)) at the recipe's answer-or-abstain
  branch (branch_hidden_states' position, through the model's output head). No sampling.

  `branch` defaults to the one every answerable example gives (`branch_of`); an unanswerable copy's
  answering completion is undefined (its evidence is gone), so it is asked at the same branch.
  Where a warm-up teaches when to answer, this is higher on copies of a question whose gold passages
  were removed than on those that keep them; `auroc(p[removed], p[kept])` near 0.5 means the choice
  does not follow the evidence (docs/results.md, real-data dev run 5).

  Raises:
    ValueError: no branch given and no answerable example, or answerable examples that part at
      different tokens (pass `branch`).
  """
  hidden, branch = branch_hidden_states(model, tokenizer, examples, recipe=recipe, branch=branch,
                                        batch_size=batch_size, width_multiple=width_multiple)
  return abstain_probability_of(model, hidden, branch)


def abstain_probability_of(model: Any, hidden: np.ndarray, branch: Branch) -> np.ndarray:
  """float [N]: p(abstain) / (p(abstain) + p(answer)) of branch_hidden_states' `hidden` [N, D]
  through `model`'s output head."""
  kernel = np.asarray(model.lm_head_kernel()[:, [branch.answer_token, branch.abstain_token]],
                      np.float32)  # [D, 2]
  logits = hidden @ kernel
  return 1.0 / (1.0 + np.exp(logits[:, 0] - logits[:, 1]))


def ridge_probe_scores(features: np.ndarray, labels: np.ndarray, groups: Sequence[Any], *,
                       folds: int = 4, l2: float = 1.0) -> np.ndarray:
  """float [N]: out-of-fold scores of a ridge classifier (least squares on ±1 labels, features
  standardised on each training fold, penalty `l2` on the weights, none on the intercept). Rows of
  one group (a question and its gold-removed twin) share a fold, assigned round-robin in order of
  first appearance. `auroc` of the scores says whether `features` hold `labels` linearly: against
  the model's own branch probability, whether its representation knows what its choice ignores."""
  x = np.asarray(features, np.float64)
  y = np.where(np.asarray(labels, bool), 1.0, -1.0)
  first = {}
  fold = np.asarray([first.setdefault(g, len(first)) % folds for g in groups])
  scores = np.zeros(len(y))
  for k in range(folds):
    train, test = fold != k, fold == k
    if not test.any():
      continue
    mean, std = x[train].mean(0), x[train].std(0) + 1e-8
    a = (x[train] - mean) / std
    b = y[train] - y[train].mean()
    w = np.linalg.solve(a.T @ a + l2 * np.eye(a.shape[1]), a.T @ b)
    scores[test] = (x[test] - mean) / std @ w + y[train].mean()
  return scores


def auroc(positive: Sequence[float], negative: Sequence[float]) -> float:
  """P(a positive scores above a negative), ties counted half (the Mann–Whitney AUROC); nan when
  either side is empty."""
  pos, neg = np.asarray(positive, float), np.asarray(negative, float)
  if not len(pos) or not len(neg):
    return float("nan")
  return float((pos[:, None] > neg[None, :]).mean() + 0.5 * (pos[:, None] == neg[None, :]).mean())
