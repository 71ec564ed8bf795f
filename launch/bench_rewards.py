r"""Benchmarks reward scoring: completions/s per recipe with 1 and 2 worker processes.

  python launch/bench_rewards.py                       # 256-completion batches, ~1 min on 2 cores
  python launch/bench_rewards.py --batch_size=512 --repeats=5

Completions are built from real HotpotQA text (tests/text/fixtures/hotpotqa_dev_12.json, CC BY-SA
4.0): each recipe's gold completion (its own format) of an Example whose evidence is ~250 words
mixing gold supporting sentences with other context sentences, 40 % of them stating a wrong
answer (build_batches). Each recipe scores its batch in-process ("1 proc") and split over a warm
2-worker process pool ("2 procs", pickling included). A judge a reward needs (Recipe.required_judges)
is a cheap stand-in (word-overlap NLI; a correctness judge that leaves it to exact match), so those
lines measure the recipe, not a judge model.

Also prints ROUGE-L time for the (evidence, answer) pairs: ours (text/metrics.py, cold and warm
stem cache) vs rouge-score's RougeScorer with use_stemmer=True, as a ratio.
Target (issue 5): a 256-completion batch in < 1 s.
"""

import concurrent.futures
import dataclasses
import json
import multiprocessing
import pathlib
import random
import time

from absl import app
from absl import flags
import numpy as np

from grounding_jax.data.schema import Example, Passage
from grounding_jax import text
from grounding_jax import recipes
from grounding_jax.text import metrics as text_metrics

_BATCH = flags.DEFINE_integer("batch_size", 256, "Completions per scored batch.")
_REPEATS = flags.DEFINE_integer("repeats", 3, "Timed repeats per setting (best is reported).")
_SEED = flags.DEFINE_integer("seed", 0, "Seed for building completions.")
_FIXTURE = pathlib.Path(__file__).resolve().parents[1] / "tests/text/fixtures/hotpotqa_dev_12.json"


class OverlapNLI:
  """Cheap deterministic stand-in: entailed iff ≥ 60% of hypothesis words occur in the premise."""

  def entails(self, premises, hypotheses):
    out = []
    for p, h in zip(premises, hypotheses):
      pw, hw = set(text.normalize_answer(p).split()), text.normalize_answer(h).split()
      out.append(bool(hw) and sum(w in pw for w in hw) >= 0.6 * len(hw))
    return np.array(out, dtype=bool)


def _words(sentences, rng, n):
  out = []
  while len(out) < n:
    out.extend(rng.choice(sentences).split())
  return " ".join(out[:n])


def build_batches(batch_size, seed):
  """{recipe: (completions, examples, extra)} from real HotpotQA text, and the (evidence, answer)
  texts with their references for the ROUGE-L comparison.

  Each completion is the recipe's own gold completion (Recipe.gold_completion, its format) of an
  Example whose evidence is ~250 words mixing the gold supporting sentences with other context
  sentences; 40 % of them state a random wrong answer (the completion is written for a copy of the
  Example with that answer, and scored against the true one). A recipe's rollout extras (LEAR's
  answers) are `<answer>…</answer>` texts, right 70 % of the time.
  """
  rng = random.Random(seed)
  data = json.loads(_FIXTURE.read_text())
  all_sents = [s.strip() for ex in data for _, para in ex["context"] for s in para if s.strip()]
  rows = []
  for ex in data:
    paras = {title: sents for title, sents in ex["context"]}
    titles = list(paras)
    gold_titles = list(dict.fromkeys(t for t, _ in ex["supporting_facts"]))
    gold_sents = [paras[t][k].strip() for t, k in ex["supporting_facts"]
                  if t in paras and k < len(paras[t])]
    passages = tuple(Passage(" ".join(paras[t]).strip(), title=t) for t in titles)
    gold_ids = tuple(titles.index(t) + 1 for t in gold_titles)
    rows.append((ex, passages, gold_ids, gold_sents))
  names = recipes.available_recipes()
  batches = {name: ([], [], {k: [] for k in recipes.get_recipe(name).rollout_extras}) for name in names}
  rouge_pairs = []
  for i in range(batch_size):
    ex, passages, gold_ids, gold_sents = rows[i % len(rows)]
    answer = ex["answer"] if rng.random() < 0.6 else rng.choice(all_sents).split()[0]
    evidence = " ".join(gold_sents) + " " + _words(all_sents, rng, 250 - len(" ".join(gold_sents).split()))
    example = Example(question=ex["question"], passages=passages, answers=(ex["answer"],),
                      evidence=(" ".join(gold_sents),), gold_passage_ids=gold_ids,
                      answerable=True, id=ex["_id"], meta={"dataset": "asqa"})
    written = dataclasses.replace(example, answers=(answer,), evidence=(evidence,))
    rouge_pairs += [(evidence, example.evidence[0]), (answer, example.answers[0])]
    for name in names:
      completions, examples, extra = batches[name]
      completions.append(recipes.get_recipe(name).gold_completion(written))
      examples.append(example)
      for k in extra:
        extra[k].append(f"<answer>{answer if rng.random() < 0.7 else ex['answer']}</answer>")
  return batches, rouge_pairs


class _NoJudge:
  """A correctness judge that is never right: the recipe's own exact match decides (no model)."""

  def __call__(self, questions, predictions, golds):
    return np.zeros(len(predictions), bool)


def reward_fns():
  """Each recipe's reward, with cheap stand-ins for the judges it cannot do without."""
  stand_ins = {"nli": OverlapNLI(), "judge": _NoJudge()}
  return {name: recipes.get_reward(name, **{k: stand_ins[k] for k in recipes.get_recipe(name).required_judges})
          for name in recipes.available_recipes()}


def _split(seq, parts):
  k = (len(seq) + parts - 1) // parts
  return [seq[j:j + k] for j in range(0, len(seq), k)]


def time_pool(pool, fn, completions, examples, extra, workers):
  chunks = list(zip(_split(completions, workers), _split(examples, workers),
                    *[_split(v, workers) for v in extra.values()]))
  start = time.perf_counter()
  futures = [pool.submit(fn, c[0], c[1], **dict(zip(extra, c[2:]))) for c in chunks]
  rewards = np.concatenate([f.result()["reward"] for f in futures])
  return time.perf_counter() - start, rewards


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  n, repeats = _BATCH.value, _REPEATS.value
  batches, pairs = build_batches(n, _SEED.value)
  fns = reward_fns()
  text_metrics._stemmer()  # pylint: disable=protected-access  (import nltk outside the timed region)
  ctx = multiprocessing.get_context("spawn")
  print(f"batch of {n} completions; best of {repeats}; this machine: "
        f"{multiprocessing.cpu_count()} cores")
  with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
    for f in [pool.submit(fns[name], *batches[name][:2], **batches[name][2])
              for name in fns for _ in range(2)]:
      f.result()  # warm the workers (imports, nltk) before timing
    for name, fn in fns.items():
      completions, examples, extra = batches[name]
      text_metrics._stem.cache_clear()  # pylint: disable=protected-access
      t0 = time.perf_counter()
      ref = fn(completions, examples, **extra)["reward"]
      cold = time.perf_counter() - t0
      one = cold
      for _ in range(repeats - 1):
        t0 = time.perf_counter()
        fn(completions, examples, **extra)
        one = min(one, time.perf_counter() - t0)
      two = float("inf")
      for _ in range(repeats):
        dt, rewards = time_pool(pool, fn, completions, examples, extra, 2)
        np.testing.assert_allclose(rewards, ref)
        two = min(two, dt)
      print(f"{name:13s} 1 proc: {n / one:8.0f} completions/s ({one * 1e3:7.1f} ms/batch, "
            f"cold {cold * 1e3:7.1f} ms) | 2 procs: {n / two:8.0f} completions/s "
            f"({two * 1e3:7.1f} ms/batch) | mean reward {ref.mean():.3f}")

  # ROUGE-L: ours vs rouge-score on the batch's (evidence, answer) pairs.
  from rouge_score import rouge_scorer  # pylint: disable=g-import-not-at-top
  scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
  t0 = time.perf_counter()
  want = [scorer.score(ref, pred)["rougeL"].fmeasure for pred, ref in pairs]
  t_peer = time.perf_counter() - t0
  text_metrics._stem.cache_clear()  # pylint: disable=protected-access
  t0 = time.perf_counter()
  got = [text.rouge_l_f1(pred, [ref]) for pred, ref in pairs]
  t_cold = time.perf_counter() - t0
  t0 = time.perf_counter()
  [text.rouge_l_f1(pred, [ref]) for pred, ref in pairs]  # pylint: disable=expression-not-assigned
  t_warm = time.perf_counter() - t0
  np.testing.assert_allclose(got, want, atol=1e-12)
  print(f"ROUGE-L on {len(pairs)} (evidence, answer) pairs: rouge-score {t_peer * 1e3:.1f} ms, "
        f"ours {t_cold * 1e3:.1f} ms cold / {t_warm * 1e3:.1f} ms warm stem cache -> "
        f"{t_peer / t_cold:.1f}x / {t_peer / t_warm:.1f}x faster (identical scores)")


if __name__ == "__main__":
  app.run(main)
