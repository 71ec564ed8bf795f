"""The evaluation harness: a model answers held-out examples with its recipe's paper decoding, and the
recipe's evaluator, the run's reward and the abstention counts score every answer.

    settings = EvalSettings.from_config(config)             # eval/settings.py
    result = evaluate_model(model, tokenizer, examples, settings, rewards=..., mesh=mesh)
    result.metrics["f1"], result.per_example["reward"], result.records[0]["completion"]
    intervals = compare([start, trained], settings.recipe)  # eval/comparison.py: paired bootstrap

Generation is the recipe's own rollout (`Recipe.rollout`: LEAR adds its answer passes) with
`num_samples` completions per question, batched (`batch_size` prompts per sampler call), sharded
over the mesh like training, behind a tqdm bar. On a mesh spanning several processes each process
answers its share of the examples and the per-example scores are gathered, so every process computes
the same metrics (the trainer's best-checkpoint decision must agree on every host).

Every model's row holds the recipe's table (`Recipe.aggregate` of the per-example scores, which
equals its evaluator's numbers), the mean reward of the run's reward functions, and — for every
recipe, so that "refuse everything" is visible — accuracy on answerable items (mean "correct") and
the abstention rate on unanswerable ones (mean "abstained", the recipe's own notion: GRACE's <llm>
path, Trust-Score's refusal, TruthRL's \\boxed{I don't know}; ARENA, LEAR and naive define none and
count a refusal or "I don't know" answer, `recipes.base.says_unanswerable`). With num_samples k > 1,
pass@k and maj@k are added where the recipe states a correct / wrong verdict per answer. Every row
has answer_em and answer_f1 (eval/metrics.py: the recipe's extracted answer against the gold answers,
SQuAD v1.1 EM and token F1, in % over the answerable items), whatever the recipe's own table. Every row
also has the selective-prediction metrics (eval/selective.py): coverage, accuracy among answered
items, AURC with the completion's mean sampler log-prob as the confidence (per-example column
"confidence"), and balanced accuracy; `comparison.compare` bootstraps them too.
"""


from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional, Sequence

import jax
import numpy as np
import tqdm
from flax import nnx

from grounding_jax import parallel
from grounding_jax import recipes
from grounding_jax import sampling
from grounding_jax.data.schema import Example
from grounding_jax.eval import metrics as metrics_lib
from grounding_jax.eval import selective
from grounding_jax.eval.settings import EvalSettings, RewardSpec
from grounding_jax.sampling import multiturn
from grounding_jax.sampling import rollout as rollout_lib
from grounding_jax.sampling.tools import ToolFormat


@dataclasses.dataclass
class ModelResult:
  """One model's evaluation.

  Attributes:
    name: the label of its table row.
    metrics: the row (see the module doc); NaN where a subset is empty.
    per_example: name -> float64 [N · k], question-major (row = question · k + sample), over all
      processes: the evaluator's columns, "reward" (and "reward/<component>"), "item_answerable",
      "completion_length", "truncated", "confidence" (the mean sampler log-prob per token).
    records: this process's predictions.jsonl rows.
    num_samples: k.
    ids: [N] the questions' ids (pairing check for `compare`).
  """
  name: str
  metrics: dict[str, float]
  per_example: dict[str, np.ndarray]
  records: list[dict]
  num_samples: int
  ids: list[str]


def _jsonable(x: Any) -> Any:
  if dataclasses.is_dataclass(x) and not isinstance(x, type):
    return {k: _jsonable(v) for k, v in dataclasses.asdict(x).items()}
  if isinstance(x, (list, tuple)):
    return [_jsonable(v) for v in x]
  if isinstance(x, dict):
    return {str(k): _jsonable(v) for k, v in x.items()}
  if isinstance(x, (np.floating, np.integer, np.bool_)):
    return x.item()
  return x


def _local_share(examples: Sequence[Example]) -> list[Example]:
  """This process's contiguous, equal share (the trailing examples that do not split evenly are left
  out, so every process runs the same number of sampler calls)."""
  count, index = jax.process_count(), jax.process_index()
  per = len(examples) // count
  return list(examples[index * per:(index + 1) * per])


def evaluate_model(model, tokenizer, examples: Sequence[Example], settings: EvalSettings, *,
                   rewards: RewardSpec = (), mesh=None, reader=None, name: str = "",
                   progress: bool = True, options: Optional[Mapping[str, Any]] = None,
                   prompt_fn: Optional[Callable[[Example], str]] = None, tool=None,
                   commit: bool = True) -> ModelResult:
  """Generates, scores and summarises one model's answers to `examples`.

  Args:
    model: a Transformer, or its (graphdef, state) split (the trainer's policy).
    tokenizer: its tokenizer.
    examples: the held-out questions (every process passes the same list).
    settings: EvalSettings.
    rewards: [(name, weight, RewardFn)] summed as the trainer sums them (no DAPO shaping).
    mesh: the model's mesh (None = one device).
    reader: (model, tokenizer) of a separate reader (the recipe's two-model protocol), or None.
    name: the row label.
    progress: show a tqdm bar.
    options: built `Recipe.evaluate` judge arguments (default settings.evaluate_options()).
    prompt_fn: Example -> prompt text (default the recipe's prompt through the chat template).
    tool: what the policy calls when settings.max_turns > 1 (sampling/tools.Tool); the report then
      has search/ columns (sampling/multiturn.tool_metrics).
    commit: sample with the model's arrays committed to their device (`_committed`), so every model
      a process evaluates shares the sampler's programs; False keeps them as they are (a trainer's
      validation, whose rollouts sample with its own arrays).
  """
  recipe = recipes.get_recipe(settings.recipe)
  if commit:
    model = _committed(model)
    if reader is not None:
      reader = (_committed(reader[0]), reader[1])
  local = _local_share(examples)
  k = settings.decoding.num_samples
  sampling_settings = rollout_lib.SamplingSettings(
      group_size=k, max_new_tokens=settings.decoding.max_new_tokens,
      temperature=settings.decoding.temperature, top_p=settings.decoding.top_p,
      stop=tuple(recipe.stop) + tuple(s for s in settings.stop if s not in recipe.stop),
      max_prompt_tokens=settings.max_prompt_tokens,
      shared_prefix_min_tokens=settings.shared_prefix_min_tokens, max_turns=settings.max_turns,
      fuse_projections=settings.fuse_projections,
      tool=tool, tool_format=getattr(recipe, "tool_format", None) or ToolFormat())
  prompt_fn = prompt_fn or (
      lambda ex: recipe.render_prompt(ex, tokenizer, enable_thinking=settings.enable_thinking))
  prompts, completions, lengths, truncated, mean_logprobs = [], [], [], [], []
  searches, recall = [], []
  extras: dict[str, list] = {}
  inputs: dict[str, list] = {}
  bar = tqdm.tqdm(total=len(local), desc=f"eval {name}".strip(), unit="q", disable=not progress,
                  leave=False, dynamic_ncols=True)
  key = jax.random.key(settings.seed)
  for b, start in enumerate(range(0, len(local), settings.batch_size)):
    batch = local[start:start + settings.batch_size]
    rr = recipe.rollout(model, tokenizer, batch, prompt_fn, sampling_settings,
                        seed=jax.random.fold_in(key, b), mesh=mesh, options=settings.rollout_options)
    prompts += [prompt_fn(ex) for ex in batch]
    completions += list(rr.completions)
    lengths += [int(x) for x in rr.rollout.lengths]
    truncated += [bool(x) for x in rr.rollout.truncated]
    mean_logprobs += list(_mean_logprobs(rr.rollout))
    if settings.max_turns > 1:
      calls, found = multiturn.tool_call_stats(rr.rollout)
      searches, recall = searches + list(calls), recall + list(found)
    for kind, target in ((rr.extras, extras), (recipe.evaluate_inputs(rr), inputs)):
      for kk, v in kind.items():
        target.setdefault(kk, []).extend(v)
    bar.update(len(batch))
  bar.close()
  rows = [ex for ex in local for _ in range(k)]
  if reader is not None:
    inputs = {"reader_outputs": _read(recipe, reader, rows, completions, settings, mesh)}
  opts = settings.evaluate_options() if options is None else options
  result = recipe.evaluate(completions, rows, **opts, **inputs)
  per = {kk: np.asarray(v, np.float64) for kk, v in result["per_example"].items()}
  per.update(_reward_columns(rewards, completions, rows, lengths, truncated, extras))
  per["item_answerable"] = np.array([ex.answerable is not False for ex in rows], np.float64)
  per.update(metrics_lib.answer_scores(result["answers"], [ex.answers for ex in rows]))
  per["completion_length"] = np.asarray(lengths, np.float64)
  per["truncated"] = np.asarray(truncated, np.float64)
  per["confidence"] = np.asarray(mean_logprobs, np.float64)
  if settings.max_turns > 1:
    per["searches"], per["gold_recall"] = np.asarray(searches, np.float64), np.asarray(recall)
  if k > 1:
    per.update(_sample_columns(per["correct"], result["answers"], k))
  gathered = {kk: np.asarray(parallel.gather_hosts(v), np.float64) for kk, v in per.items()}
  metrics = _row(recipe, result, gathered, k)
  records = []
  for i, (ex, completion) in enumerate(zip(rows, completions)):
    records.append({"model": name, "id": ex.id, "sample": i % k, "question": ex.question,
                    "answerable": ex.answerable, "prompt": prompts[i // k], "completion": completion,
                    "answer": result["answers"][i], "parsed": _jsonable(recipe.parse(completion)),
                    **{kk: v[i] for kk, v in {**extras, **inputs}.items()},
                    "scores": {kk: (None if np.isnan(v[i]) else float(v[i])) for kk, v in per.items()}})
  ids = [str(x) for x in parallel.gather_hosts(np.array([ex.id for ex in local], dtype="U256"))]
  return ModelResult(name, metrics, gathered, records, k, ids)


def _mean_logprobs(rollout: rollout_lib.Rollout) -> np.ndarray:
  """float64 [N]: each completion's mean sampler log-prob per token (log_softmax(logits / T), T = 1
  when greedy): the confidence that orders the risk–coverage curve (eval/selective.py); NaN when a
  completion has no tokens."""
  mask = np.asarray(rollout.completion_mask, bool)
  total = np.where(mask, np.asarray(rollout.sampler_logp, np.float64), 0.0).sum(axis=1)
  count = mask.sum(axis=1)
  return np.where(count > 0, total / np.maximum(count, 1), np.nan)


def _committed(model):
  """`model` (a Transformer or a (graphdef, state) split) with every array committed to the device
  it is on: the same buffers, no copy. jit keys its programs on whether arguments are committed, and
  the models one process evaluates come both ways on one device: an HF folder's loaded arrays and a
  trainer's are uncommitted, a checkpoint's restored ones committed (orbax places them). Without this,
  evaluating a start model and a trained run (launch/evaluate.py, demo.py, learning_check.py)
  compiled the sampler's prefill and decode again for the same shapes. Sharded arrays are committed
  already and pass through as they are."""
  split = isinstance(model, tuple)
  graphdef, state = model if split else nnx.split(model)
  state = jax.tree.map(lambda x: jax.device_put(x, x.sharding) if isinstance(x, jax.Array) else x,
                       state)
  return (graphdef, state) if split else nnx.merge(graphdef, state)


def _read(recipe: recipes.Recipe, reader, rows: Sequence[Example], completions: Sequence[str],
          settings: EvalSettings, mesh) -> list[str]:
  """A separate reader's greedy answers from what each completion extracted."""
  reader_model, reader_tokenizer = reader
  prompts = [recipe.reader_prompt(ex, c, reader_tokenizer) for ex, c in zip(rows, completions)]
  out: list[str] = []
  for start in range(0, len(prompts), settings.batch_size):
    gen = sampling.generate(reader_model, reader_tokenizer, prompts[start:start + settings.batch_size],
                            max_new_tokens=settings.reader_max_new_tokens, temperature=0.0, mesh=mesh)
    out += list(gen.texts)
  return out


def _reward_columns(rewards: RewardSpec, completions, rows, lengths, truncated, extras
                    ) -> dict[str, np.ndarray]:
  """"reward" (the weighted sum) and "reward/<component>" ("reward/<fn>/<component>" with several)."""
  if not rewards:
    return {}
  total = np.zeros(len(completions))
  out = {}
  for name, weight, fn in rewards:
    scores = fn(list(completions), list(rows), completion_lengths=lengths, truncated=truncated, **extras)
    total = total + weight * scores["reward"]
    for comp, v in scores.items():
      if comp != "reward":
        out[f"reward/{comp}" if len(rewards) == 1 else f"reward/{name}/{comp}"] = v
  return {"reward": total, **out}


def _sample_columns(correct: np.ndarray, answers: Sequence[str], k: int) -> dict[str, np.ndarray]:
  """pass@k and maj@k (in %) of each question, repeated on its k rows (so column means are the
  metrics). A sample counts as correct when its verdict is 1 (partial credit is not a pass)."""
  hits = (np.asarray(correct) >= 1.0).reshape(-1, k)
  pass_k = 100.0 * metrics_lib.pass_at_k(np.full(len(hits), k), hits.sum(axis=1), k)
  maj = np.array([100.0 * hits[q, metrics_lib.majority_vote(list(answers[q * k:(q + 1) * k]))]
                  for q in range(len(hits))])
  return {f"pass@{k}": np.repeat(pass_k, k), f"maj@{k}": np.repeat(maj, k)}


def _row(recipe: recipes.Recipe, result: Mapping[str, Any], per: Mapping[str, np.ndarray], k: int
         ) -> dict[str, float]:
  """The table row of one model from its gathered per-example columns."""
  row = {kk: v for kk, v in recipe.table(result).items() if not kk.startswith("n_")}
  row.update(recipe.aggregate(per))
  answerable = per["item_answerable"] > 0

  def pct(values, mask):
    return 100.0 * float(np.mean(values[mask])) if mask.any() else float("nan")

  row["accuracy_answerable"] = pct(per["correct"], answerable)
  row["abstention_unanswerable"] = pct(per["abstained"], ~answerable)
  row["abstention_answerable"] = pct(per["abstained"], answerable)
  row.update(selective.summary(per))
  row.update(metrics_lib.answer_summary(per))
  for kk, v in per.items():
    if kk == "reward" or kk.startswith(("reward/", "pass@", "maj@")):
      row[kk] = float(np.mean(v))
  row["completion_length/mean"] = float(np.mean(per["completion_length"]))
  row["truncated_frac"] = float(np.mean(per["truncated"]))
  if "searches" in per:  # a multi-turn evaluation
    row.update(multiturn.tool_metrics(per["searches"], per["gold_recall"]))
  row.update(n_questions=float(len(answerable) // k), n_answerable=float(answerable.sum() // k),
             n_unanswerable=float((~answerable).sum() // k))
  return row
