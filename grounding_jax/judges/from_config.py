"""Judges from config values: a reward option `judge=dict(kind=..., ...)` or `nli=...` becomes a judge.

  build({"kind": "exact_match"}, role="correctness")
  build({"kind": "llm", "path": FOLDER, "style": "truthrl"}, role="correctness")   # on our sampler
  build({"kind": "llm", "path": FOLDER}, role="nli")                               # yes/no entailment
  build({"kind": "nli", "path": FOLDER})          # a classifier / TRUE-style seq2seq folder (torch),
                                                  # or a causal LM folder (then as kind "llm")
  build("/path/to/folder", role="nli")            # a bare path: kind "nli"

`path` may be "smollm2" (the offline SmolLM2-135M-Instruct folder: for plumbing, not fidelity).
`lazy(spec, role)` defers the build to first use and pickles as its spec, so a reward holding it can be
sent to worker processes, each of which loads its own copy. Model-backed judges import models /
transformers (and torch, for the NLI classifiers) only when built.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Mapping, Sequence

import numpy as np

from grounding_jax import models
from grounding_jax.models import gguf_convert
from grounding_jax.judges import llm
from grounding_jax.judges import nli as nli_models
from grounding_jax.judges.base import ExactMatchJudge

KINDS = ("exact_match", "llm", "nli")
ROLES = ("correctness", "nli")


def _sampler_backend(path, max_new_tokens: int, batch_size: int) -> llm.SamplerBackend:
  if path == "smollm2":
    path = gguf_convert.prepare_smollm2()
  return llm.SamplerBackend(models.load_pretrained(path), models.load_tokenizer(path),
                            max_new_tokens=max_new_tokens, batch_size=batch_size)


def _is_causal_lm(path) -> bool:
  if path == "smollm2":
    return True
  cfg = pathlib.Path(path) / "config.json"
  if not cfg.is_file():
    raise FileNotFoundError(f"judge path {path!r} has no config.json; pass a local HF model folder.")
  archs = json.loads(cfg.read_text()).get("architectures") or []
  return any(a.endswith("ForCausalLM") for a in archs)


def normalize_spec(spec: Any) -> dict[str, Any]:
  """A judge spec as a plain dict with a known `kind` (a bare path is {"kind": "nli", "path": ...})."""
  if isinstance(spec, (str, os.PathLike)):
    spec = {"kind": "nli", "path": os.fspath(spec)}
  if not isinstance(spec, Mapping):
    raise ValueError(f"a judge spec must be a dict with kind= one of {KINDS} (or a model folder path); "
                     f"got {type(spec).__name__}.")
  spec = dict(spec)
  kind = spec.get("kind")
  if kind not in KINDS:
    raise ValueError(f"judge kind={kind!r}; choose one of {KINDS}.")
  if kind != "exact_match" and not str(spec.get("path") or ""):
    raise ValueError(f"judge kind={kind!r} needs path=<local model folder> (or 'smollm2'), e.g. "
                     "--config.reward.functions[0].options.judge.path=/models/judge")
  return spec


def build(spec: Any, role: str = "correctness"):
  """A judge for `role` ("correctness": judge(questions, predictions, golds); "nli": entails(...))
  from a spec (see the module doc); None stays None and a judge object is returned as is."""
  if role not in ROLES:
    raise ValueError(f"judge role={role!r}; choose one of {ROLES}.")
  if spec is None or callable(spec) or callable(getattr(spec, "entails", None)):
    return spec
  spec = normalize_spec(spec)
  kind = spec.pop("kind")
  path = spec.pop("path", None)
  batch_size = spec.pop("batch_size", 16)
  if kind == "exact_match":
    if role != "correctness":
      raise ValueError("judge kind='exact_match' answers correctness, not NLI; use kind 'nli' or 'llm'.")
    return ExactMatchJudge()
  if kind == "nli" and not _is_causal_lm(path):
    if role != "nli":
      raise ValueError(f"judge kind='nli' ({path}) is an entailment classifier; a correctness judge "
                       "needs kind 'llm' or 'exact_match'.")
    return nli_models.load_nli_judge(path, batch_size=batch_size, **spec)
  default_tokens = 8 if role == "nli" else 32  # a yes/no reply vs a JSON score
  backend = _sampler_backend(path, spec.pop("max_new_tokens", default_tokens), batch_size)
  if role == "nli":
    return llm.LLMNLIJudge(backend, **spec)
  return llm.LLMCorrectnessJudge(backend, **spec)


class LazyJudge:
  """A judge built from its spec on first use; pickles as (spec, role), never as a model."""

  def __init__(self, spec: Any, role: str = "correctness"):
    self.spec, self.role = normalize_spec(spec), role
    if role not in ROLES:
      raise ValueError(f"judge role={role!r}; choose one of {ROLES}.")
    self._judge = None

  def load(self):
    if self._judge is None:
      self._judge = build(self.spec, self.role)
    return self._judge

  def __call__(self, questions, predictions, golds) -> np.ndarray:
    return self.load()(questions, predictions, golds)

  def entails(self, premises: Sequence[str], hypotheses: Sequence[str]) -> np.ndarray:
    return self.load().entails(premises, hypotheses)

  @property
  def last_unparseable(self) -> np.ndarray:
    return getattr(self.load(), "last_unparseable", np.zeros(0, bool))

  def __getstate__(self):
    return {"spec": self.spec, "role": self.role, "_judge": None}

  def __repr__(self) -> str:
    return f"LazyJudge({self.spec!r}, role={self.role!r})"


def lazy(spec: Any, role: str = "correctness"):
  """`spec` as a judge for `role`, built on first use when it names a model (None and judge objects
  pass through; exact match is built at once: it holds nothing)."""
  if spec is None or callable(spec) or callable(getattr(spec, "entails", None)):
    return spec
  if normalize_spec(spec)["kind"] == "exact_match":
    return build(spec, role)
  return LazyJudge(spec, role)
