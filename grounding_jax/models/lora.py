"""Low-rank adapters (LoRA, Hu et al. 2021) on a Transformer's projections.

    model = load_pretrained(folder)
    lora.add_adapters(model, lora.LoRAConfig(rank=8, alpha=16, targets=("q_proj", "v_proj")), key)
    logits = model(ids, mask)              # W x + (alpha / r) · B A x on every targeted projection
    graphdef, adapters, rest = nnx.split(model, lora.LoRAParam, ...)   # what a trainer optimises
    served = lora.merged(model)            # W + (alpha / r) · A B folded in: a plain Transformer

Each targeted weight W (ours: [in..., out...], e.g. q_proj [embed, q_heads, head_dim]) gets
A [in..., r] and B [r, out...] (with a scanned model's leading "layers" axis when stacked). As PEFT's
default (init_lora_weights=True): A ~ U(±1/sqrt(fan_in)) (torch's Kaiming-uniform of a Linear), B = 0,
so a fresh adapter leaves the model's outputs unchanged, and scale = alpha / r. Dropout (PEFT's
lora_dropout) applies to the adapter's input, only inside `dropout_key(key)` (the training passes).

The adapters are LoRAParam, a subclass of nnx.Param: code that handles every parameter (sharding,
casting, slicing a scanned model's layers) handles them too, and `nnx.split(model, LoRAParam, ...)`
(`trainable_filter`) separates them from the frozen base weights, which then never reach the
gradient, the optimizer or (by default) a checkpoint. The adapter ranks' logical axis is
"lora_rank", replicated (parallel.DEFAULT_RULES); their other axes are the weight's.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import math
from typing import Any, Iterator

import jax
import jax.numpy as jnp
import ml_collections
from flax import nnx

from grounding_jax import config_fields
from grounding_jax.config_fields import MISSING, Field
from grounding_jax.models.layers import matmul
from grounding_jax.models.transformer import Transformer

# Targetable projections: name -> (sub-module of a Block, number of the weight's input axes).
# The names are the HF (and PEFT target_modules) names of Llama / Qwen linear layers.
TARGETS = {
    "q_proj": ("attn", 1), "k_proj": ("attn", 1), "v_proj": ("attn", 1), "o_proj": ("attn", 2),
    "gate_proj": ("mlp", 1), "up_proj": ("mlp", 1), "down_proj": ("mlp", 1),
}
ATTENTION_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj")
ALL_TARGETS = tuple(TARGETS)    # PEFT's "all-linear" for these models (the lm_head excluded)
SUFFIX = "_lora"            # the adapter of module.q_proj is module.q_proj_lora
RANK_AXIS = "lora_rank"     # logical name of the rank dimension


@dataclasses.dataclass(frozen=True)
class LoRAConfig:
  """rank r (0 = no adapters), alpha (scale = alpha / r), dropout on the adapter input, targets."""
  rank: int = 0
  alpha: float = 16.0
  dropout: float = 0.0
  targets: tuple[str, ...] = ALL_TARGETS

  def __post_init__(self):
    if self.rank < 0:
      raise ValueError(f"LoRA rank={self.rank} must be >= 0 (0 = no adapters)")
    if not 0.0 <= self.dropout < 1.0:
      raise ValueError(f"LoRA dropout={self.dropout} must be in [0, 1)")
    unknown = sorted(set(self.targets) - set(TARGETS))
    if unknown or not self.targets:
      raise ValueError(f"LoRA targets={tuple(self.targets)}: unknown {unknown}; choose from "
                       f"{ALL_TARGETS}")

  @property
  def scale(self) -> float:
    return self.alpha / self.rank

  @classmethod
  def from_config(cls, section) -> "LoRAConfig":
    """From a config's model.lora section (rank, alpha, dropout, targets)."""
    return cls(rank=int(section.rank), alpha=float(section.alpha), dropout=float(section.dropout),
               targets=tuple(section.targets))


# The `model.lora` section of the RL and SFT configs, declared once (grounding_jax.config_fields).
FIELDS = (
    Field("rank", 0, int, "r; 0 = full fine-tuning (no adapters)", lo=0,
          why="0 = full fine-tuning, no adapters"),
    Field("alpha", 16.0, float, "scale = alpha / r (PEFT's lora_alpha)", lo=0, lo_open=True,
          why="the adapters' scale is alpha / rank"),
    Field("dropout", 0.0, float, "on each adapter's input in training passes (PEFT's lora_dropout)",
          lo=0, hi=1, hi_open=True),
    Field("targets", ALL_TARGETS, tuple, "projections that get adapters (PEFT's target_modules), "
          "distinct, any of " + " ".join(ALL_TARGETS)),
    Field("save_base", False, bool, "also checkpoint the frozen base weights (default: adapters "
          "only; the base is re-read from model.path on resume, export and eval)"),
)


def config_section() -> ml_collections.ConfigDict:
  """The `model.lora` section of the RL and SFT configs, from FIELDS."""
  return config_fields.build(FIELDS)


def check_fields(ck: config_fields.FieldChecker) -> None:
  """Adds a problem line to `ck` for each bad config.model.lora value (none when the config has no
  model.lora: configs written before LoRA train every weight)."""
  if ck.get("model.lora") is MISSING:
    return
  config_fields.check(ck, FIELDS, root=ck.get("model.lora"), prefix="model.lora.")
  targets = ck.get("model.lora.targets")
  if not isinstance(targets, (list, tuple)) or not all(isinstance(t, str) and t for t in targets):
    return  # reported above
  unknown = [t for t in targets if t not in TARGETS]
  rank = ck.get("model.lora.rank")
  adapters = isinstance(rank, int) and not isinstance(rank, bool) and rank > 0
  if unknown or not targets or len(set(targets)) != len(targets):
    ck.bad("model.lora.targets", tuple(targets),
           f"must name distinct projections of {ALL_TARGETS}"
           + (f"; unknown {unknown}" if unknown else "")
           + (" (PEFT's target_modules names)" if adapters else ""))


def check_config(config: ml_collections.ConfigDict) -> None:
  """Raises ConfigError naming each bad model.lora value, before any model loads (the RL trainer's
  and the SFT trainer's check_config include these checks)."""
  ck = config_fields.FieldChecker(config)
  check_fields(ck)
  if ck.problems:
    raise config_fields.ConfigError(ck.problems)


def add_from_config(model: Transformer, section, seed: int) -> Transformer:
  """Adds the adapters a config's model.lora section asks for (none when rank = 0), A drawn from
  `seed`; returns `model`."""
  if section is None or int(section.rank) == 0:
    return model
  return add_adapters(model, LoRAConfig.from_config(section), jax.random.key(seed))


class LoRAParam(nnx.Param):
  """An adapter matrix: trained under LoRA while the other (plain nnx.Param) weights stay frozen."""


class LoRALayer(nnx.Variable):
  """The layer index of an adapter (stacked [layers] in a scanned model): seeds its dropout mask."""


_DROPOUT_KEY: contextvars.ContextVar = contextvars.ContextVar("lora_dropout_key", default=None)


@contextlib.contextmanager
def dropout_key(key: jax.Array | None) -> Iterator[None]:
  """Adapters apply their dropout while tracing inside this (a training pass); None = no dropout.

  Each adapter draws its mask from fold_in(key, layer · 16 + target), so layers and projections
  get independent masks and a rematerialised layer recomputes the same one.
  """
  token = _DROPOUT_KEY.set(key)
  try:
    yield
  finally:
    _DROPOUT_KEY.reset(token)


def _letters(spec: str) -> tuple[str, str, str, str, str]:
  """(x, w, out, input letters of w, output letters of w) of a projection einsum "x,w->out"."""
  inputs, out = spec.split("->")
  x, w = inputs.split(",")
  return x, w, out, "".join(c for c in w if c in x), "".join(c for c in w if c not in x)


class Adapter(nnx.Module):
  """A [in..., r] and B [r, out...] of one projection (leading [layers] when stacked)."""

  def __init__(self, a: LoRAParam, b: LoRAParam, layer: LoRALayer, *, scale: float, dropout: float,
               target: int):
    self.a, self.b, self.layer = a, b, layer
    self.scale, self.dropout, self.target = scale, dropout, target

  def __call__(self, spec: str, x: jax.Array) -> jax.Array:
    """scale · (x A) B in x's dtype, shaped like the projection `spec` ("btd,dhk->bthk") of x."""
    xs, _, out, ins, outs = _letters(spec)
    key = _DROPOUT_KEY.get()
    if key is not None and self.dropout > 0:
      key = jax.random.fold_in(key, self.layer[...] * 16 + self.target)
      keep = jax.random.bernoulli(key, 1.0 - self.dropout, x.shape)
      x = jnp.where(keep, x / (1.0 - self.dropout), 0).astype(x.dtype)
    rest = "".join(c for c in xs if c not in ins)
    h = matmul(f"{xs},{ins}z->{rest}z", x, self.a[...])
    return matmul(f"{rest}z,z{outs}->{out}", h, self.b[...] * self.scale)


def _blocks(model: Transformer) -> list[tuple[Any, bool]]:
  """[(block, stacked)]: the one stacked Block of a scanned model, else every layer's Block."""
  if model.scan_layers:
    return [(model.layers, True)]
  return [(block, False) for block in model.layers]


def add_adapters(model: Transformer, config: LoRAConfig, key: jax.Array) -> Transformer:
  """Adds fresh adapters (A uniform, B zeros) to `model`'s targeted projections, in place.

  Args:
    model: a Transformer without adapters, scanned or not (adapters follow its layout).
    config: the adapters (config.rank > 0).
    key: PRNG key of the A matrices.
  Returns:
    `model`, which now computes W x + scale · B A x on each target (equal to before while B = 0).
  """
  if config.rank <= 0:
    raise ValueError(f"add_adapters needs rank > 0, got {config.rank}")
  if has_adapters(model):
    raise ValueError("the model already has LoRA adapters")
  n = model.config.num_layers
  for bi, (block, stacked) in enumerate(_blocks(model)):
    for ti, name in enumerate(config.targets):
      part, n_in = TARGETS[name]
      module = getattr(block, part)
      w = getattr(module, name)
      names = tuple(w.get_metadata()["out_sharding"])
      lead = 1 if stacked else 0
      shape = w.get_value().shape
      in_shape, out_shape = shape[lead:lead + n_in], shape[lead + n_in:]
      bound = 1.0 / math.sqrt(math.prod(in_shape))  # torch's Kaiming-uniform(a=√5) of lora_A
      dtype = w.get_value().dtype
      a = jax.random.uniform(jax.random.fold_in(key, bi * 16 + ti), shape[:lead + n_in] + (config.rank,),
                             jnp.float32, -bound, bound).astype(dtype)
      b = jnp.zeros(shape[:lead] + (config.rank,) + out_shape, dtype)
      a_names = names[:lead + n_in] + (RANK_AXIS,)
      b_names = names[:lead] + (RANK_AXIS,) + names[lead + n_in:]
      layer = jnp.arange(n, dtype=jnp.int32) if stacked else jnp.int32(bi)
      setattr(module, name + SUFFIX, Adapter(
          _like(w, a, a_names), _like(w, b, b_names),
          LoRALayer(layer, out_sharding=names[:lead], eager_sharding=False),
          scale=config.scale, dropout=config.dropout, target=ti))
  return model


def _like(w: nnx.Variable, value: jax.Array, names: tuple) -> LoRAParam:
  """A LoRAParam of `value` named `names`, placed on w's devices (its mesh, if any, replicated
  until parallel.shard_model places it by name)."""
  sharding = getattr(w.get_value(), "sharding", None)
  if isinstance(sharding, jax.sharding.NamedSharding):
    value = jax.device_put(value, jax.sharding.NamedSharding(sharding.mesh,
                                                             jax.sharding.PartitionSpec()))
  return LoRAParam(value, out_sharding=names, eager_sharding=False)


def adapters(model) -> list[tuple[Any, str, Adapter]]:
  """[(module, projection name, its Adapter)] of every adapted projection of `model`."""
  out = []
  for block, _ in _blocks(model):
    for name, (part, _) in TARGETS.items():
      module = getattr(block, part)
      adapter = getattr(module, name + SUFFIX, None)
      if adapter is not None:
        out.append((module, name, adapter))
  return out


def has_adapters(model) -> bool:
  return isinstance(model, Transformer) and bool(adapters(model))


def trainable_filter(model):
  """What a trainer optimises: the adapters when `model` has them, else every nnx.Param."""
  return LoRAParam if has_adapters(model) else nnx.Param


def config_of(model) -> LoRAConfig | None:
  """The LoRAConfig `model`'s adapters were added with (rank from A's shape), or None."""
  found = adapters(model)
  if not found:
    return None
  first = found[0][2]
  names = []
  for _, name, _ in found:
    if name not in names:
      names.append(name)
  rank = first.a.get_value().shape[-1]
  return LoRAConfig(rank=rank, alpha=first.scale * rank, dropout=first.dropout, targets=tuple(names))


@functools.partial(jax.jit, static_argnames=("spec", "scale"))
def _merge_one(w, a, b, *, spec: str, scale: float):
  """w + scale · a b, accumulated in float32, in w's dtype."""
  delta = jnp.einsum(spec, a.astype(jnp.float32), b.astype(jnp.float32))
  return (w.astype(jnp.float32) + scale * delta).astype(w.dtype)


def merged(model: Transformer) -> Transformer:
  """`model` with every adapter folded into its weight (W + scale · A B) and removed: a plain
  Transformer of the same structure as the base, computing what the adapted model computes. The
  argument is left as it was (only the targeted weights are new arrays); a model without adapters
  is returned as is."""
  if not has_adapters(model):
    return model
  graphdef, state = nnx.split(model)
  out = nnx.merge(graphdef, state)
  stacked = out.scan_layers
  for module, name, adapter in adapters(out):
    w = getattr(module, name)
    n_in = TARGETS[name][1]
    letters = "defghijk"[:w.get_value().ndim - (1 if stacked else 0)]
    lead = "l" if stacked else ""
    ins, outs = letters[:n_in], letters[n_in:]
    spec = f"{lead}{ins}z,{lead}z{outs}->{lead}{letters}"
    setattr(module, name, w.replace(_merge_one(w.get_value(), adapter.a.get_value(),
                                               adapter.b.get_value(), spec=spec,
                                               scale=float(adapter.scale))))
    delattr(module, name + SUFFIX)
  return out


def split(model) -> tuple[nnx.GraphDef, Any, Any]:
  """(graphdef, trainable, rest): the adapters and everything else under LoRA, else every nnx.Param
  and everything else (what a full fine-tuning trainer optimises)."""
  return nnx.split(model, trainable_filter(model), ...)

