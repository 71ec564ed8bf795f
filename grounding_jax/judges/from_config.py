"""Judges from config values: a reward option `judge=dict(kind=..., ...)` or `nli=...` becomes a judge.

  build({"kind": "exact_match"}, role="correctness")          # also the bare string "exact_match"
  build({"kind": "token_f1", "threshold": 0.5})  # no model: SQuAD token F1 >= threshold (also "token_f1")
  build({"kind": "llm", "path": FOLDER, "style": STYLE}, role="correctness")      # on our sampler
  build({"kind": "llm", "path": FOLDER, "style": STYLE, "mesh": {"fsdp": -1}})    # … sharded over this process's devices
  build({"kind": "llm", "path": FOLDER}, role="nli")                               # yes/no entailment
  build({"kind": "nli", "path": FOLDER})          # a classifier / TRUE-style seq2seq folder (torch),
                                                  # or a causal LM folder (then as kind "llm")
  build({"kind": "openai", "base_url": "http://judge:8000/v1", "model": NAME,
         "api_key_env": "JUDGE_KEY", "style": STYLE})   # vLLM or any OpenAI-compatible server
  build("/path/to/folder", role="nli")            # a bare path: kind "nli"
  build({"kind": "lexical", "min_recall": 1.0}, role="nli")   # no model: word recall (also "lexical")

A correctness judge of kind "llm" or "openai" asks in a paper's style: STYLE is a judges.JudgeStyle.
A config names it (style="<name>"); the recipe that reads the config puts its style object in the
spec (`judges.style.with_style(spec, recipe.judge_styles)`) before it reaches build / lazy.

Options of kind "llm"/"nli" (causal LM): path ("smollm2" = the offline SmolLM2-135M-Instruct folder:
for plumbing, not fidelity), batch_size, max_new_tokens, and `mesh`: None (one device), or the mesh
axis sizes (as config.mesh, e.g. {"data": 1, "fsdp": -1, "tensor": 1}; "local" = {"fsdp": -1}) of a
mesh over THIS process's devices, on which the judge model is sharded and sampled. In the trainer
process that is the policy's devices; score rewards there (reward.num_workers=0) so that worker
processes do not claim accelerators the trainer holds. `build(spec, mesh=m)` takes a caller's Mesh
object instead (e.g. an evaluation script's); a config spec cannot hold one (it must pickle).

Options of kind "openai": base_url, model, api_key_env (the NAME of the variable holding the key),
timeout_seconds, max_retries, backoff_seconds, concurrency, cooldown_seconds, max_tokens,
temperature, top_p (see judges.openai_api.OpenAIBackend). Decoding defaults to the style's (its
paper's), or NLI_DECODING for an NLI judge.

Every kind passes the remaining options to the judge (style, parser, examples_path, cache, …).
`lazy(spec, role)` defers the build to first use and pickles as its spec, so a reward holding it can be
sent to worker processes, each of which loads its own copy. Model-backed judges import models /
transformers (and torch, for the NLI classifiers) only when built.
"""

from __future__ import annotations

import json
import os
import pathlib
from typing import Any, Mapping, Sequence

import jax
import numpy as np

from grounding_jax import models
from grounding_jax import parallel
from grounding_jax.models import gguf_convert
from grounding_jax.judges import llm
from grounding_jax.judges import nli as nli_models
from grounding_jax.judges import openai_api
from grounding_jax.judges.base import ExactMatchJudge, LexicalNLIJudge, TokenF1Judge
from grounding_jax.judges.style import JudgeStyle

KINDS = ("exact_match", "lexical", "llm", "nli", "openai", "token_f1")
ROLES = ("correctness", "nli")

# A served yes/no entailment judge needs a few tokens only.
NLI_DECODING = dict(max_tokens=8, temperature=0.0)
_OPENAI_BACKEND_KEYS = ("base_url", "model", "api_key_env", "max_tokens", "temperature", "top_p",
                        "timeout_seconds", "max_retries", "backoff_seconds", "max_backoff_seconds",
                        "concurrency", "cooldown_seconds", "extra_body")
_FLAG = "--config.reward.functions[0].options.judge"


def judge_mesh(axes: Any) -> jax.sharding.Mesh | None:
  """A mesh over this process's devices from a spec's `mesh` value (None → no mesh)."""
  if axes is None or axes is False:
    return None
  if axes in ("local", True):
    axes = {"fsdp": -1}
  if not hasattr(axes, "items"):
    raise ValueError(f"judge mesh={axes!r}: give mesh axis sizes such as {{'fsdp': -1}} (as "
                     "config.mesh), 'local', or None for one device")
  return parallel.make_mesh(dict(axes.items()), devices=jax.local_devices())


def _sampler_backend(path, max_new_tokens: int, batch_size: int, mesh) -> llm.SamplerBackend:
  if path == "smollm2":
    path = gguf_convert.prepare_smollm2()
  return llm.SamplerBackend(models.load_pretrained(path, mesh=mesh), models.load_tokenizer(path),
                            max_new_tokens=max_new_tokens, batch_size=batch_size, mesh=mesh)


def _is_causal_lm(path) -> bool:
  if path == "smollm2":
    return True
  cfg = pathlib.Path(path) / "config.json"
  if not cfg.is_file():
    raise FileNotFoundError(f"judge path {path!r} has no config.json; pass a local HF model folder.")
  archs = json.loads(cfg.read_text()).get("architectures") or []
  return any(a.endswith("ForCausalLM") for a in archs)


def normalize_spec(spec: Any) -> dict[str, Any]:
  """A judge spec as a plain dict with a known `kind`, its required options checked.

  A bare path is {"kind": "nli", "path": ...}; the string "exact_match" is {"kind": "exact_match"};
  an ml_collections.ConfigDict (a config's reward option) becomes a dict.
  """
  if isinstance(spec, (str, os.PathLike)):
    spec = ({"kind": spec} if spec in ("exact_match", "lexical", "token_f1")
            else {"kind": "nli", "path": os.fspath(spec)})
  if hasattr(spec, "to_dict"):  # ml_collections.ConfigDict
    spec = spec.to_dict()
  if not isinstance(spec, Mapping):
    raise ValueError(f"a judge spec must be a dict with kind= one of {KINDS} (or a model folder path); "
                     f"got {type(spec).__name__}.")
  spec = dict(spec)
  kind = spec.get("kind")
  if kind not in KINDS:
    raise ValueError(f"judge kind={kind!r}; choose one of {KINDS}.")
  if kind in ("llm", "nli") and not str(spec.get("path") or ""):
    raise ValueError(f"judge kind={kind!r} needs path=<local model folder> (or 'smollm2'), e.g. "
                     f"{_FLAG}.path=/models/judge")
  if kind == "openai":
    for key, example in (("base_url", "http://judge-host:8000/v1"),
                         ("model", "meta-llama/Llama-3.3-70B-Instruct")):
      if not str(spec.get(key) or ""):
        raise ValueError(f"judge kind='openai' needs {key}=, e.g. {_FLAG}.{key}={example}")
    env = spec.get("api_key_env")
    if env and env not in os.environ:  # checked here, before any worker process starts
      raise ValueError(f"judge api_key_env={env!r}: that environment variable is not set; export "
                       f"{env}=<key>, or set {_FLAG}.api_key_env='' for a server without keys")
  return spec


def build(spec: Any, role: str = "correctness", *, mesh: jax.sharding.Mesh | None = None):
  """A judge for `role` ("correctness": judge(questions, predictions, golds); "nli": entails(...))
  from a spec (see the module doc); None stays None and a judge object is returned as is.
  `mesh`: a Mesh for a model-backed judge, overriding the spec's `mesh` axes."""
  if role not in ROLES:
    raise ValueError(f"judge role={role!r}; choose one of {ROLES}.")
  if spec is None or callable(spec) or callable(getattr(spec, "entails", None)):
    return spec
  spec = normalize_spec(spec)
  kind = spec.pop("kind")
  if kind == "exact_match":
    if role != "correctness":
      raise ValueError("judge kind='exact_match' answers correctness, not NLI; use kind 'nli' or 'llm'.")
    return ExactMatchJudge()
  if kind == "token_f1":
    if role != "correctness":
      raise ValueError("judge kind='token_f1' answers correctness, not NLI; use kind 'nli', 'llm' or "
                       "'lexical'.")
    return TokenF1Judge(**spec)
  if kind == "lexical":
    if role != "nli":
      raise ValueError("judge kind='lexical' answers entailment (role 'nli'), not correctness.")
    return LexicalNLIJudge(**spec)
  if kind == "openai":
    decoding = _style(spec).decoding if role == "correctness" else NLI_DECODING
    options = {**decoding,
               **{k: spec.pop(k) for k in _OPENAI_BACKEND_KEYS if k in spec}}
    backend = openai_api.OpenAIBackend(**options)
    return llm.LLMNLIJudge(backend, **spec) if role == "nli" else llm.LLMCorrectnessJudge(backend, **spec)
  path = spec.pop("path")
  batch_size = spec.pop("batch_size", 16)
  spec_mesh = spec.pop("mesh", None)
  if kind == "nli" and not _is_causal_lm(path):
    if role != "nli":
      raise ValueError(f"judge kind='nli' ({path}) is an entailment classifier; a correctness judge "
                       "needs kind 'llm', 'openai' or 'exact_match'.")
    if spec_mesh is not None:
      raise ValueError(f"judge mesh={spec_mesh!r}: {path} is a transformers (torch) NLI classifier, "
                       "which runs on the host; mesh applies to causal LM judges on our sampler")
    return nli_models.load_nli_judge(path, batch_size=batch_size, **spec)
  default_tokens = 8 if role == "nli" else 32  # a yes/no reply vs a JSON score
  backend = _sampler_backend(path, spec.pop("max_new_tokens", default_tokens), batch_size,
                             mesh if mesh is not None else judge_mesh(spec_mesh))
  if role == "nli":
    return llm.LLMNLIJudge(backend, **spec)
  _style(spec)
  return llm.LLMCorrectnessJudge(backend, **spec)


def _style(spec: Mapping[str, Any]) -> JudgeStyle:
  """The spec's JudgeStyle; raises naming the fix when a correctness LLM judge has none."""
  style = spec.get("style")
  if not isinstance(style, JudgeStyle):
    raise ValueError(f"a correctness judge of kind 'llm' / 'openai' needs style= a judges.JudgeStyle "
                     f"(got {style!r}); a config names the style and its recipe resolves the name "
                     "(judges.style.with_style(spec, recipes.get_recipe(NAME).judge_styles)).")
  return style


class LazyJudge:
  """A judge built from its spec on first use; pickles as (spec, role), never as a model."""

  def __init__(self, spec: Any, role: str = "correctness"):
    self.spec, self.role = normalize_spec(spec), role
    if role not in ROLES:
      raise ValueError(f"judge role={role!r}; choose one of {ROLES}.")
    if role == "correctness" and self.spec["kind"] in ("llm", "openai"):
      _style(self.spec)  # before any worker process loads it
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
  """`spec` as a judge for `role`, built on first use when it names a model or a server (None and
  judge objects pass through; exact match is built at once: it holds nothing)."""
  if spec is None or callable(spec) or callable(getattr(spec, "entails", None)):
    return spec
  if normalize_spec(spec)["kind"] in ("exact_match", "lexical"):  # hold no model: built at once
    return build(spec, role)
  return LazyJudge(spec, role)
