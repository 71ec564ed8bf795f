"""NLI judges that run transformers models from a local folder (torch, CPU by default).

  ClassifierNLIJudge  a sequence-classification NLI model (MNLI-style RoBERTa / DeBERTa / BERT).
  Seq2SeqNLIJudge     a TRUE-style T5 (`google/t5_xxl_true_nli_mixture`): input
                      "premise: {p} hypothesis: {h}", greedy decode, entailed iff the text is "1"
                      (ALCE / Trust-Eval `_run_nli_autoais`, arXiv:2506.15522 App. A).
  load_nli_judge      picks one of the two from the folder's config.json.

They are evaluation / reward tools outside the jitted training path, so torch is acceptable here; the
policy never runs on torch. Each class imports torch and transformers in its constructor, so importing
this module (and grounding_jax.judges) does not import torch.
"""

from __future__ import annotations

import json
import pathlib
from typing import Any, Sequence

import numpy as np

from grounding_jax.judges.base import CachedNLI, NLIJudge, check_pairs


def _entailment_index(id2label: dict[Any, str], path: pathlib.Path) -> int:
  matches = []
  for idx, label in id2label.items():
    name = str(label).lower().replace("-", "_").replace(" ", "_")
    if "entail" in name and not any(neg in name for neg in ("not_", "non_", "no_", "contradict")):
      matches.append(int(idx))
  if len(matches) != 1:
    raise ValueError(f"{path / 'config.json'}: cannot find one entailment label in id2label={id2label}; "
                     "pass entail_label=<index> to ClassifierNLIJudge.")
  return matches[0]


def _length_sorted_batches(lengths: Sequence[int], batch_size: int) -> list[np.ndarray]:
  """Index batches in decreasing length so each batch pads little; callers scatter results back."""
  order = np.argsort(-np.asarray(lengths), kind="stable")
  return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]


class ClassifierNLIJudge(CachedNLI):
  """A transformers sequence-classification NLI model (e.g. an MNLI RoBERTa / DeBERTa) from a folder.

  The entailment class is read from `config.id2label` (the label containing "entail" and not
  "not_entail"); pass `entail_label` when the names do not say it. A pair is entailed when that class
  wins the argmax, or when its softmax probability exceeds `threshold` if one is given.
  Inputs longer than `max_length` tokens are truncated longest-first (the premise, in practice).
  """

  def __init__(self, path: str | pathlib.Path, *, batch_size: int = 16, max_length: int = 512,
               entail_label: int | None = None, threshold: float | None = None,
               device: str = "cpu", cache: bool = True):
    import torch  # Evaluation-side dependency; see the module docstring.
    import transformers
    super().__init__(cache)
    self.path = pathlib.Path(path)
    if not (self.path / "config.json").is_file():
      raise FileNotFoundError(f"ClassifierNLIJudge: no config.json in {self.path}; pass a local HF folder.")
    if batch_size < 1 or max_length < 8:
      raise ValueError(f"ClassifierNLIJudge: batch_size={batch_size} must be >= 1 and "
                       f"max_length={max_length} >= 8.")
    self._torch = torch
    self.tokenizer = transformers.AutoTokenizer.from_pretrained(self.path)
    self.model = transformers.AutoModelForSequenceClassification.from_pretrained(
        self.path, dtype=torch.float32).to(device).eval()
    labels = self.model.config.id2label
    self.entail_index = (int(entail_label) if entail_label is not None
                         else _entailment_index(labels, self.path))
    if not 0 <= self.entail_index < self.model.config.num_labels:
      raise ValueError(f"entail_label={self.entail_index} is outside the model's "
                       f"{self.model.config.num_labels} labels ({self.path}).")
    self.batch_size, self.max_length = batch_size, max_length
    self.threshold, self.device = threshold, device

  def entailment_probs(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
    """float32 [N]: softmax probability of the entailment class (uncached)."""
    premises, hypotheses = check_pairs(premises, hypotheses)
    probs, _ = self._run(premises, hypotheses)
    return probs

  def _run(self, premises: list[str], hypotheses: list[str]) -> tuple[np.ndarray, np.ndarray]:
    torch = self._torch
    probs = np.zeros(len(premises), np.float32)
    argmax = np.zeros(len(premises), np.int64)
    lengths = [len(p) + len(h) for p, h in zip(premises, hypotheses)]
    for idx in _length_sorted_batches(lengths, self.batch_size):
      enc = self.tokenizer([premises[i] for i in idx], [hypotheses[i] for i in idx], padding=True,
                           truncation="longest_first", max_length=self.max_length, return_tensors="pt")
      with torch.inference_mode():
        logits = self.model(**{k: v.to(self.device) for k, v in enc.items()}).logits.float()
      p = torch.softmax(logits, dim=-1)
      probs[idx] = p[:, self.entail_index].cpu().numpy()
      argmax[idx] = logits.argmax(dim=-1).cpu().numpy()
      self.stats["batches"] += 1
    return probs, argmax

  def _entails_uncached(self, premises, hypotheses):
    probs, argmax = self._run(premises, hypotheses)
    if self.threshold is None:
      return argmax == self.entail_index
    return probs > self.threshold


class Seq2SeqNLIJudge(CachedNLI):
  """TRUE-style seq2seq NLI (google/t5_xxl_true_nli_mixture) from a local folder.

  Exactly Trust-Eval's `_run_nli_autoais` (arXiv:2506.15522 App. A): input "premise: {P} hypothesis: {H}", greedy
  `generate(max_new_tokens=10)`, decoded with special tokens skipped; entailed iff the text is "1".
  Batched with padding. When an input exceeds `max_input_tokens`, the premise's tail is cut so the
  hypothesis is always seen whole.
  """

  def __init__(self, path: str | pathlib.Path, *, batch_size: int = 8, max_input_tokens: int = 2048,
               max_new_tokens: int = 10, device: str = "cpu", cache: bool = True):
    import torch
    import transformers
    super().__init__(cache)
    self.path = pathlib.Path(path)
    if not (self.path / "config.json").is_file():
      raise FileNotFoundError(f"Seq2SeqNLIJudge: no config.json in {self.path}; pass a local HF folder.")
    if batch_size < 1 or max_input_tokens < 16 or max_new_tokens < 1:
      raise ValueError(f"Seq2SeqNLIJudge: batch_size={batch_size} (>= 1), max_input_tokens="
                       f"{max_input_tokens} (>= 16), max_new_tokens={max_new_tokens} (>= 1).")
    self._torch = torch
    self.tokenizer = transformers.AutoTokenizer.from_pretrained(self.path)
    self.model = transformers.AutoModelForSeq2SeqLM.from_pretrained(
        self.path, dtype=torch.float32).to(device).eval()
    self.batch_size, self.max_input_tokens = batch_size, max_input_tokens
    self.max_new_tokens, self.device = max_new_tokens, device

  @staticmethod
  def format_input(premise: str, hypothesis: str) -> str:
    return f"premise: {premise} hypothesis: {hypothesis}"

  @staticmethod
  def is_entailed(decoded: str) -> bool:
    """TRUE's decision rule: the decoded output is exactly "1"."""
    return decoded == "1"

  def _fit(self, premise: str, hypothesis: str) -> str:
    text = self.format_input(premise, hypothesis)
    n = len(self.tokenizer(text).input_ids)
    if n <= self.max_input_tokens:
      return text
    self.stats["truncated"] += 1
    p_ids = self.tokenizer(premise, add_special_tokens=False).input_ids
    keep = max(0, len(p_ids) - (n - self.max_input_tokens) - 2)  # -2: re-tokenisation at the cut.
    premise = self.tokenizer.decode(p_ids[:keep], skip_special_tokens=True)
    return self.format_input(premise, hypothesis)

  def generate_texts(self, premises: Sequence[str], hypotheses: Sequence[str]) -> list[str]:
    """The judge's decoded outputs, one per pair, in input order (uncached)."""
    premises, hypotheses = check_pairs(premises, hypotheses)
    torch = self._torch
    inputs = [self._fit(p, h) for p, h in zip(premises, hypotheses)]
    outs = [""] * len(inputs)
    for idx in _length_sorted_batches([len(s) for s in inputs], self.batch_size):
      enc = self.tokenizer([inputs[i] for i in idx], padding=True, truncation=True,
                           max_length=self.max_input_tokens, return_tensors="pt")
      with torch.inference_mode():
        # Only ids and mask: a BERT-style tokenizer's token_type_ids would be rejected by generate.
        gen = self.model.generate(input_ids=enc["input_ids"].to(self.device),
                                  attention_mask=enc["attention_mask"].to(self.device),
                                  max_new_tokens=self.max_new_tokens, do_sample=False, num_beams=1)
      texts = self.tokenizer.batch_decode(gen, skip_special_tokens=True)
      for i, t in zip(idx, texts):
        outs[i] = t
      self.stats["batches"] += 1
    return outs

  def _entails_uncached(self, premises, hypotheses):
    return np.array([self.is_entailed(t) for t in self.generate_texts(premises, hypotheses)], bool)


def load_nli_judge(path: str | pathlib.Path, **kwargs) -> NLIJudge:
  """Picks Seq2SeqNLIJudge for encoder-decoder folders, ClassifierNLIJudge for *ForSequenceClassification."""
  path = pathlib.Path(path)
  cfg_file = path / "config.json"
  if not cfg_file.is_file():
    raise FileNotFoundError(f"load_nli_judge: no config.json in {path}.")
  cfg = json.loads(cfg_file.read_text())
  archs = cfg.get("architectures") or []
  if cfg.get("is_encoder_decoder") or any("ConditionalGeneration" in a for a in archs):
    return Seq2SeqNLIJudge(path, **kwargs)
  if any("ForSequenceClassification" in a for a in archs):
    return ClassifierNLIJudge(path, **kwargs)
  raise ValueError(f"{cfg_file}: architectures={archs} is neither a seq2seq nor a sequence-classification "
                   "model; use ClassifierNLIJudge / Seq2SeqNLIJudge / LLMNLIJudge explicitly.")
