"""BERTScore-F1 (Zhang et al. 2020) as GRACE reports it: bert_score 0.3.13 defaults, idf off.

GRACE scores answers with `bert_score.score(..., model_type="bert-base-uncased")` (arXiv:2601.04525 §4.3, the authors' code):
the hidden states after layer 9 (bert_score's `model2layers` for bert-base-uncased), no idf, no
baseline rescaling, the best of several references. The computation, per candidate/reference pair:
  1. tokenise each text with special tokens ([CLS] … [SEP]; a blank text is just [CLS][SEP]),
     truncated at the tokenizer's max length;
  2. embed with the encoder truncated to `num_layers` layers; L2-normalise every token vector;
  3. sim = cand @ ref.T over ALL tokens, [CLS]/[SEP] included (they can be the best match);
  4. P = weighted mean over candidate tokens of the row max, R = same over reference tokens of the
     column max, with weight 0 for the [CLS] / [SEP] ids and 1 for every other token;
     F = 2PR / (P + R); a blank candidate or reference gives 0;
  5. several references: the max of P, of R and of F separately.
GRACE's `_clean` wrapper: a blank prediction with blank references scores 1, exactly one blank 0.

Encoders: our Flax `models.bert.BertModel` (default for BERT folders) or any transformers encoder on
torch (`backend="torch"`, e.g. RoBERTa). Both are evaluation tools outside the training path.
bert_score pads each batch and multiplies padded similarities by 0; we score each pair at its own
length, which differs only if every similarity in a row is negative (not seen with BERT encoders).
"""

from __future__ import annotations

import json
import pathlib
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from grounding_jax.models import bert

# bert_score 0.3.13 `model2layers` for the models the papers use.
DEFAULT_LAYERS = {"bert-base-uncased": 9, "bert-large-uncased": 18, "roberta-large": 17,
                  "roberta-base": 10}


def _encode_ids(tokenizer, text: str, max_length: int) -> list[int]:
  """bert_score's `sent_encode` for BERT-style tokenizers."""
  text = text.strip()
  if not text:  # bert_score: build_inputs_with_special_tokens([]), i.e. [CLS][SEP] (gone in transformers 5)
    return tokenizer.encode("", add_special_tokens=True)
  return tokenizer.encode(text, add_special_tokens=True, max_length=max_length, truncation=True)


class BertScorer:
  """Greedy-matching BERTScore with an encoder from a local HF folder.

  Args:
    path: HF folder with config.json, weights and tokenizer files.
    num_layers: layer whose output is used; default DEFAULT_LAYERS[path.name] if known, else the last.
    backend: "flax" (our BertModel; BERT folders only) or "torch" (transformers AutoModel).
    batch_size: texts per encoder call.
  """

  def __init__(self, path: str | pathlib.Path, *, num_layers: int | None = None, backend: str = "flax",
               batch_size: int = 64):
    import transformers  # only to tokenise (and the torch backend); kept out of module import
    self.path = pathlib.Path(path)
    cfg_file = self.path / "config.json"
    if not cfg_file.is_file():
      raise FileNotFoundError(f"BertScorer: no config.json in {self.path}; pass a local HF encoder folder.")
    cfg = json.loads(cfg_file.read_text())
    total = int(cfg.get("num_hidden_layers", 0))
    self.num_layers = num_layers if num_layers is not None else DEFAULT_LAYERS.get(self.path.name, total)
    if not 0 <= self.num_layers <= total:
      raise ValueError(f"num_layers={self.num_layers} outside [0, {total}] for {cfg_file}.")
    if backend not in ("flax", "torch"):
      raise ValueError(f"backend={backend!r}; choose 'flax' or 'torch'.")
    if batch_size < 1:
      raise ValueError(f"batch_size={batch_size} must be >= 1.")
    self.tokenizer = transformers.AutoTokenizer.from_pretrained(self.path)
    limit = int(cfg.get("max_position_embeddings", 512))
    self.max_length = min(int(self.tokenizer.model_max_length), limit)
    self.skip_ids = {i for i in (self.tokenizer.cls_token_id, self.tokenizer.sep_token_id) if i is not None}
    self.backend, self.batch_size = backend, batch_size
    self._encode = self._flax_encoder() if backend == "flax" else self._torch_encoder()

  def _flax_encoder(self):
    model = bert.load_bert(self.path)
    model.layers = nnx.List(list(model.layers)[:self.num_layers])  # as bert_score truncates the encoder
    graphdef, state = nnx.split(model)

    @jax.jit
    def run(state, ids, mask):
      return nnx.merge(graphdef, state)(ids, mask)

    return lambda ids, mask: np.asarray(run(state, jnp.asarray(ids), jnp.asarray(mask)))

  def _torch_encoder(self):
    import torch
    import transformers
    model = transformers.AutoModel.from_pretrained(self.path, dtype=torch.float32).eval()

    def run(ids, mask):
      with torch.inference_mode():
        out = model(input_ids=torch.as_tensor(ids), attention_mask=torch.as_tensor(mask),
                    output_hidden_states=True)
      return out.hidden_states[self.num_layers].float().numpy()  # [0] is the embedding output

    return run

  def embed(self, texts: Sequence[str]) -> list[tuple[np.ndarray, np.ndarray]]:
    """Per text: (token ids int [T], unit-norm token embeddings float32 [T, D])."""
    ids = [_encode_ids(self.tokenizer, t, self.max_length) for t in texts]
    out: list = [None] * len(ids)
    order = np.argsort([-len(x) for x in ids], kind="stable")
    pad = self.tokenizer.pad_token_id or 0
    for s in range(0, len(order), self.batch_size):
      idx = order[s:s + self.batch_size]
      # Bucketed shapes (width to a multiple of 32, full batches) keep jit compiles to a handful.
      width = min(-(-max(len(ids[i]) for i in idx) // 32) * 32, max(self.max_length, 1))
      width = max(width, max(len(ids[i]) for i in idx))
      rows = self.batch_size if self.backend == "flax" else len(idx)
      batch = np.full((rows, width), pad, np.int32)
      mask = np.zeros((rows, width), np.int32)
      for r, i in enumerate(idx):
        batch[r, :len(ids[i])] = ids[i]
        mask[r, :len(ids[i])] = 1
      hidden = self._encode(batch, mask)
      for r, i in enumerate(idx):
        h = hidden[r, :len(ids[i])].astype(np.float32)
        out[i] = (np.asarray(ids[i]), h / np.linalg.norm(h, axis=-1, keepdims=True))
    return out

  def _prf(self, cand, ref) -> tuple[float, float, float]:
    (c_ids, c_emb), (r_ids, r_emb) = cand, ref
    wc = np.array([0.0 if t in self.skip_ids else 1.0 for t in c_ids])
    wr = np.array([0.0 if t in self.skip_ids else 1.0 for t in r_ids])
    if wc.sum() == 0 or wr.sum() == 0:
      return 0.0, 0.0, 0.0  # bert_score: blank candidate or reference → 0
    sim = c_emb @ r_emb.T
    p = float((sim.max(axis=1) * wc).sum() / wc.sum())
    r = float((sim.max(axis=0) * wr).sum() / wr.sum())
    f = 2 * p * r / (p + r) if p + r != 0 else 0.0
    return p, r, f

  def score(self, candidates: Sequence[str], references: Sequence[Sequence[str]]) -> np.ndarray:
    """float64 [N, 3]: (P, R, F) per candidate, best over its references (bert_score semantics)."""
    if len(candidates) != len(references):
      raise ValueError(f"{len(candidates)} candidates for {len(references)} reference lists.")
    refs = [[r] if isinstance(r, str) else list(r) for r in references]
    if any(not r for r in refs):
      raise ValueError("every candidate needs at least one reference.")
    uniq = list(dict.fromkeys(list(candidates) + [r for rs in refs for r in rs]))
    emb = dict(zip(uniq, self.embed(uniq)))
    out = np.zeros((len(candidates), 3))
    for i, (c, rs) in enumerate(zip(candidates, refs)):
      out[i] = np.max([self._prf(emb[c], emb[r]) for r in rs], axis=0)
    return out

  def f1(self, predictions: Sequence[str], references: Sequence[Sequence[str]]) -> dict[str, object]:
    """GRACE's answer F1: mean BERTScore-F1 × 100, with `_clean`'s blank rules; per-example [N] too."""
    refs = [[r] if isinstance(r, str) else list(r) for r in references]
    if len(predictions) != len(refs):
      raise ValueError(f"{len(predictions)} predictions for {len(refs)} reference lists.")
    per = np.zeros(len(predictions))
    todo = []
    for i, (p, rs) in enumerate(zip(predictions, refs)):
      p_blank = not (isinstance(p, str) and p.strip())
      kept = [r for r in rs if r.strip()]
      if p_blank or not kept:
        per[i] = 1.0 if (p_blank and not kept) else 0.0
      else:
        todo.append((i, p, kept))
    if todo:
      scores = self.score([p for _, p, _ in todo], [k for _, _, k in todo])
      per[[i for i, _, _ in todo]] = scores[:, 2]
    return {"bertscore_f1": 100.0 * float(per.mean()) if per.size else 0.0, "per_example": per}
