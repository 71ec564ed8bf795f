r"""Benchmarks reward scoring: completions/s per recipe with 1 and 2 worker processes.

  python launch/bench_rewards.py                       # 256-completion batches, ~1 min on 2 cores
  python launch/bench_rewards.py --batch_size=512 --repeats=5

Completions are built from real HotpotQA text (tests/text/fixtures/hotpotqa_dev_12.json, CC BY-SA
4.0): ~512-token GRACE outputs (a <think> of ~130 words, an <evidence> of ~250 words mixing gold
supporting sentences with other context sentences, a short <answer>), and outputs of the same
length in each other recipe's format. Each recipe scores its batch in-process ("1 proc") and split
over a warm 2-worker process pool ("2 procs", pickling included). Trust recipes use a cheap
word-overlap NLI and TruthRL no judge, so those lines measure the recipe, not a judge model.

Also prints ROUGE-L time for the GRACE batch's (evidence, answer) pairs: ours (text/metrics.py,
cold and warm stem cache) vs rouge-score's RougeScorer with use_stemmer=True, as a ratio.
Target (issue 5): a 256-completion batch in < 1 s.
"""

import concurrent.futures
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
from grounding_jax.recipes import get_reward, grace, lear_rollout
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
  """{recipe: (completions, examples, extra)} from real HotpotQA text."""
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
  batches = {name: ([], [], {}) for name in ("grace", "trust_stage1", "trust_stage2", "arena",
                                              "lear", "truthrl", "naive")}
  lear_extra = {k: [] for k in lear_rollout.ANSWER_EXTRAS}
  for i in range(batch_size):
    ex, passages, gold_ids, gold_sents = rows[i % len(rows)]
    answer = ex["answer"] if rng.random() < 0.6 else rng.choice(all_sents).split()[0]
    think = _words(all_sents, rng, 130)
    evidence = " ".join(gold_sents) + " " + _words(all_sents, rng, 250 - len(" ".join(gold_sents).split()))
    example = Example(question=ex["question"], passages=passages, answers=(ex["answer"],),
                      evidence=(" ".join(gold_sents),), gold_passage_ids=gold_ids,
                      answerable=True, id=ex["_id"], meta={"dataset": "asqa"})
    cited = " ".join(f"{s} [{rng.choice(gold_ids)}]." for s in gold_sents)
    completions = {
        "grace": f"<think>{think}</think>\n<evidence>{evidence}</evidence>\n<answer>{answer}</answer>",
        "trust_stage1": f"<think>{think} {evidence}</think>\n<answer>{cited} {answer} [1].</answer>",
        "arena": (f"<relevance>\n{list(gold_ids)}\n</relevance>\n\n<analysis>\n{think} {evidence}\n"
                  f"</analysis>\n\n<answer>\n{answer}\n</answer>"),
        "lear": f"<reason>{think} {evidence}</reason>\n<extract>{' '.join(gold_sents)}</extract>",
        "truthrl": f"<think>{think} {evidence}</think>\n\\boxed{{{answer}}}",
        "naive": f"<think>{think} {evidence}</think>\n<answer>{answer}</answer>",
    }
    completions["trust_stage2"] = completions["trust_stage1"]
    for name, completion in completions.items():
      batches[name][0].append(completion)
      batches[name][1].append(example)
    for k in lear_rollout.ANSWER_EXTRAS:
      lear_extra[k].append(f"<answer>{answer if rng.random() < 0.7 else ex['answer']}</answer>")
  batches["lear"][2].update(lear_extra)
  return batches


def reward_fns():
  return {"grace": get_reward("grace"), "trust_stage1": get_reward("trust_stage1", nli=OverlapNLI()),
          "trust_stage2": get_reward("trust_stage2", nli=OverlapNLI()), "arena": get_reward("arena"),
          "lear": get_reward("lear"), "truthrl": get_reward("truthrl"), "naive": get_reward("naive")}


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
  batches = build_batches(n, _SEED.value)
  fns = reward_fns()
  text_metrics._stemmer()  # pylint: disable=protected-access  (import nltk outside the timed region)
  ctx = multiprocessing.get_context("spawn")
  print(f"batch of {n} completions; best of {repeats}; this machine: "
        f"{multiprocessing.cpu_count()} cores")
  with concurrent.futures.ProcessPoolExecutor(max_workers=2, mp_context=ctx) as pool:
    for f in [pool.submit(fns["grace"], *batches["grace"][:2]) for _ in range(2)]:
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

  # ROUGE-L: ours vs rouge-score on the GRACE batch's (evidence, answer) pairs.
  from rouge_score import rouge_scorer  # pylint: disable=g-import-not-at-top
  scorer = rouge_scorer.RougeScorer(["rougeL"], use_stemmer=True)
  pairs = []
  for completion, ex in zip(*batches["grace"][:2]):
    out = grace.parse(completion)
    pairs += [(out.evidence, ex.evidence[0]), (out.answer, ex.answers[0])]
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
  print(f"ROUGE-L on {len(pairs)} GRACE (evidence, answer) pairs: rouge-score {t_peer * 1e3:.1f} ms, "
        f"ours {t_cold * 1e3:.1f} ms cold / {t_warm * 1e3:.1f} ms warm stem cache -> "
        f"{t_peer / t_cold:.1f}x / {t_peer / t_warm:.1f}x faster (identical scores)")


if __name__ == "__main__":
  app.run(main)
