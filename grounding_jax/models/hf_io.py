"""Hugging Face safetensors folders <-> `Transformer`.

Loading builds the model abstractly (`nnx.eval_shape`: shapes only, no memory), then reads the
checkpoint one tensor at a time, converts it to our layout, and places it directly on its device(s)
(sharded by logical axis names when a mesh is given). The host never holds more than one parameter
beyond what the devices hold: one tensor, or with scanned layers (Transformer.scan_layers) one
parameter stacked over the layers, filled from the per-layer HF tensors. Saving writes one shard at
a time with an index, as transformers does, slicing stacked parameters back into per-layer tensors.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pathlib
import shutil
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx
from safetensors import SafetensorError, safe_open
from safetensors.numpy import save_file

from grounding_jax.models.config import ModelConfig
from grounding_jax.models.transformer import Transformer
from grounding_jax.parallel import logical_names, logical_sharding, shard_model

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"
# Files a serving stack needs next to the weights; copied when saving a model loaded from a folder.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "vocab.json", "merges.txt", "tokenizer.model", "added_tokens.json",
                   "chat_template.jinja", "chat_template.json", "generation_config.json")
# Tensors HF checkpoints may carry that hold no parameters of ours (recomputed RoPE tables).
_IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


class CheckpointError(ValueError):
  """A checkpoint folder is incomplete, corrupt, or does not match its config.json."""


@dataclasses.dataclass(frozen=True)
class _TensorSpec:
  """How one of our parameters is stored in an HF checkpoint."""
  hf_name: str
  hf_shape: tuple[int, ...]
  to_ours: Callable[[np.ndarray], np.ndarray]
  to_hf: Callable[[np.ndarray], np.ndarray]


def _tensor_specs(config: ModelConfig) -> dict[tuple, _TensorSpec]:
  """Our parameter paths (as in nnx.state) -> HF tensor name, shape and layout conversions.

  HF stores a linear layer as weight[out, in] and multiplies x @ weight.T; we store kernels
  [in, out], with attention heads split into their own axes: q/k/v [embed, heads, head_dim] and
  o [heads, head_dim, embed].
  """
  c = config
  d, f, dh = c.hidden_size, c.intermediate_size, c.head_dim

  def same(shape):
    return lambda name: _TensorSpec(name, shape, lambda a: a, lambda a: a)

  def linear(n_in, n_out):  # [out, in] <-> [in, out]
    return lambda name: _TensorSpec(name, (n_out, n_in), lambda a: a.T, lambda a: a.T)

  def heads_in(heads):      # [heads*dh, d] <-> [d, heads, dh]
    return lambda name: _TensorSpec(name, (heads * dh, d), lambda a: a.T.reshape(d, heads, dh),
                                    lambda a: a.reshape(d, heads * dh).T)

  def heads_out(heads):     # [d, heads*dh] <-> [heads, dh, d]
    return lambda name: _TensorSpec(name, (d, heads * dh), lambda a: a.T.reshape(heads, dh, d),
                                    lambda a: a.reshape(heads * dh, d).T)

  def head_bias(heads):     # [heads*dh] <-> [heads, dh]
    return lambda name: _TensorSpec(name, (heads * dh,), lambda a: a.reshape(heads, dh),
                                    lambda a: a.reshape(heads * dh))

  specs = {("embed",): same((c.vocab_size, d))("model.embed_tokens.weight")}
  for i in range(c.num_layers):
    p = f"model.layers.{i}."
    layer = {
        ("input_norm", "scale"): same((d,))(p + "input_layernorm.weight"),
        ("attn", "q_proj"): heads_in(c.num_heads)(p + "self_attn.q_proj.weight"),
        ("attn", "k_proj"): heads_in(c.num_kv_heads)(p + "self_attn.k_proj.weight"),
        ("attn", "v_proj"): heads_in(c.num_kv_heads)(p + "self_attn.v_proj.weight"),
        ("attn", "o_proj"): heads_out(c.num_heads)(p + "self_attn.o_proj.weight"),
        ("post_attn_norm", "scale"): same((d,))(p + "post_attention_layernorm.weight"),
        ("mlp", "gate_proj"): linear(d, f)(p + "mlp.gate_proj.weight"),
        ("mlp", "up_proj"): linear(d, f)(p + "mlp.up_proj.weight"),
        ("mlp", "down_proj"): linear(f, d)(p + "mlp.down_proj.weight"),
    }
    if c.qkv_bias:
      layer[("attn", "q_bias")] = head_bias(c.num_heads)(p + "self_attn.q_proj.bias")
      layer[("attn", "k_bias")] = head_bias(c.num_kv_heads)(p + "self_attn.k_proj.bias")
      layer[("attn", "v_bias")] = head_bias(c.num_kv_heads)(p + "self_attn.v_proj.bias")
    if c.qk_norm:
      layer[("attn", "q_norm", "scale")] = same((dh,))(p + "self_attn.q_norm.weight")
      layer[("attn", "k_norm", "scale")] = same((dh,))(p + "self_attn.k_norm.weight")
    specs.update({("layers", i) + k: v for k, v in layer.items()})
  specs[("final_norm", "scale")] = same((d,))("model.norm.weight")
  if not c.tie_word_embeddings:
    specs[("lm_head",)] = linear(d, c.vocab_size)("lm_head.weight")
  return specs


def _path_key(key_path) -> tuple:
  return tuple(getattr(k, "key", getattr(k, "idx", k)) for k in key_path)


def _layer_specs(path_key: tuple, specs: dict[tuple, _TensorSpec], num_layers: int
                 ) -> list[tuple[int | None, _TensorSpec]]:
  """[(layer index, spec)] of the HF tensors one of our parameters holds: [(None, spec)] for a
  per-layer or global parameter, one entry per layer for a scanned model's stacked parameter
  ("layers", "attn", "q_proj") — whose leading axis is the layer."""
  if path_key in specs:
    return [(None, specs[path_key])]
  if path_key[:1] == ("layers",) and ("layers", 0) + path_key[1:] in specs:
    return [(i, specs[("layers", i) + path_key[1:]]) for i in range(num_layers)]
  raise AssertionError(f"no checkpoint mapping for parameter {path_key}")  # a bug of ours


# ------------------------------------------------------------------------------------------------
# Loading
# ------------------------------------------------------------------------------------------------


def _weight_map(folder: pathlib.Path) -> dict[str, pathlib.Path]:
  """HF tensor name -> the safetensors file holding it (single file or sharded with an index)."""
  index_path = folder / INDEX_FILE
  if index_path.is_file():
    try:
      weight_map = json.loads(index_path.read_text())["weight_map"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
      raise CheckpointError(f"{index_path}: corrupt index, expected JSON with a 'weight_map' "
                            f"({type(e).__name__}: {e}).") from e
    files = {name: folder / fname for name, fname in weight_map.items()}
    for shard in sorted(set(files.values())):
      if not shard.is_file():
        raise FileNotFoundError(f"{shard}: shard listed in {index_path} is missing.")
    return files
  single = folder / SINGLE_FILE
  if not single.is_file():
    raise FileNotFoundError(f"{folder}: no {SINGLE_FILE} or {INDEX_FILE}; expected an HF "
                            "safetensors checkpoint folder.")
  return {name: single for name in _open(single).keys()}


def _open(path: pathlib.Path):
  try:
    return safe_open(str(path), framework="np")
  except (SafetensorError, OSError, ValueError) as e:
    raise CheckpointError(f"{path}: corrupt or truncated safetensors file ({e}).") from e


def load_pretrained(path: str | os.PathLike, *, dtype=jnp.float32, mesh: jax.sharding.Mesh | None = None,
                    rules=None, compute_dtype=None, remat: bool = False,
                    remat_policy: str = "full", scan_layers: bool = True,
                    attention_query_chunk: int | None = None,
                    attention_implementation: str | None = None,
                    packed_attention: str | None = None,
                    read_weights: bool = True) -> Transformer:
  """Loads an HF checkpoint folder (config.json + safetensors) into a `Transformer`.

  Args:
    path: folder with config.json and model.safetensors or model.safetensors.index.json + shards.
    dtype: parameter dtype (e.g. jnp.float32 for training, jnp.bfloat16 for inference).
    mesh: if given, each parameter is placed straight onto the mesh, sharded by its logical axis
      names under `rules` (see grounding_jax.parallel); else onto the default device.
    rules: logical -> mesh axis rules; default `grounding_jax.parallel.DEFAULT_RULES`.
    compute_dtype: activation/matmul dtype; default `dtype`.
    remat: recompute layer activations in the backward pass (training memory).
    remat_policy: "full" or "save_dots" (see Transformer).
    scan_layers: stack the layers' parameters and run them with one lax.scan (see Transformer).
    attention_query_chunk: most queries attended to at once (ModelConfig.attention_query_chunk;
      0 = all); None keeps ModelConfig's default.
    attention_implementation: the attention kernel, "auto", "xla" or "cudnn" (models/attention.py;
      ModelConfig.attention_implementation); None keeps ModelConfig's default ("auto").
    packed_attention: how a GRPO group's packed completions are attended, "auto", "rows",
      "blocks" or "stream" (models/packed.py; ModelConfig.packed_attention); None keeps the
      default ("auto").
    read_weights: False = the architecture alone, from config.json: every parameter a
      jax.ShapeDtypeStruct (with its sharding on `mesh`, else none) and no safetensors file read —
      what a resumed run fills from its training checkpoint (rl/trainer.py).

  Raises:
    FileNotFoundError: missing folder, config.json or safetensors file (named).
    CheckpointError: corrupt file, missing tensor, or a tensor shape that disagrees with config.json
      (each names the tensor and file).
    ValueError: unsupported architecture or option in config.json.
  """
  folder = pathlib.Path(path)
  if not folder.is_dir():
    raise FileNotFoundError(f"{folder}: checkpoint folder does not exist.")
  config = ModelConfig.from_hf(folder)
  if attention_query_chunk is not None:
    config = dataclasses.replace(config, attention_query_chunk=attention_query_chunk)
  if attention_implementation is not None:
    config = dataclasses.replace(config, attention_implementation=attention_implementation)
  if packed_attention is not None:
    config = dataclasses.replace(config, packed_attention=packed_attention)
  compute_dtype = dtype if compute_dtype is None else compute_dtype
  abstract = nnx.eval_shape(lambda: Transformer(config, rngs=nnx.Rngs(0), param_dtype=dtype,
                                                compute_dtype=compute_dtype, remat=remat,
                                                remat_policy=remat_policy, scan_layers=scan_layers))
  if not read_weights:
    if mesh is not None:
      abstract = shard_model(abstract, mesh, rules)  # shardings on the structs
    abstract.source_path = str(folder.resolve())
    return abstract
  files = _weight_map(folder)
  graphdef, abstract_state = nnx.split(abstract)
  specs = _tensor_specs(config)
  np_dtype = np.dtype(dtype)

  params = {}  # our path -> (Variable, [(layer index or None, spec)])
  for key_path, var in jax.tree_util.tree_flatten_with_path(
      abstract_state, is_leaf=lambda x: isinstance(x, nnx.Variable))[0]:
    path_key = _path_key(key_path)
    params[path_key] = (var, _layer_specs(path_key, specs, config.num_layers))
  for var, layer_specs in params.values():
    for _, spec in layer_specs:
      if spec.hf_name not in files:
        raise CheckpointError(f"{folder}: tensor {spec.hf_name!r} (shape {spec.hf_shape}) is missing "
                              f"from the checkpoint files {sorted({f.name for f in files.values()})}.")

  def read(handle, file, spec):
    try:
      array = handle.get_tensor(spec.hf_name)
    except (SafetensorError, OSError, ValueError) as e:
      raise CheckpointError(f"{file}: cannot read tensor {spec.hf_name!r} ({e}).") from e
    if tuple(array.shape) != spec.hf_shape:
      raise CheckpointError(f"{file}: tensor {spec.hf_name!r} has shape {tuple(array.shape)} but "
                            f"config.json implies {spec.hf_shape}.")
    return spec.to_ours(array).astype(np_dtype, copy=False)

  def place(var, array):
    array = np.ascontiguousarray(array)
    if mesh is None:
      return jax.device_put(array)
    sharding = logical_sharding(logical_names(var), array.shape, mesh, rules)
    return jax.make_array_from_callback(array.shape, sharding, lambda idx, a=array: a[idx])

  # Parameter by parameter (a stacked one gathers its layers' tensors, from whichever files hold
  # them); each is freed on the host once placed.
  handles: dict[pathlib.Path, Any] = {}
  values = {}
  for path_key, (var, layer_specs) in params.items():
    stacked = None
    for layer, spec in layer_specs:
      file = files[spec.hf_name]
      if file not in handles:
        handles[file] = _open(file)
      array = read(handles[file], file, spec)
      if layer is None:
        stacked = array
      else:
        if stacked is None:
          stacked = np.empty((len(layer_specs),) + array.shape, np_dtype)
        stacked[layer] = array
      del array
    values[path_key] = place(var, stacked)
    del stacked

  used = {spec.hf_name for _, layer_specs in params.values() for _, spec in layer_specs}
  unused = sorted(n for n in files if n not in used and not n.endswith(_IGNORED_SUFFIXES))
  if unused:
    logging.warning("%s: ignoring %d checkpoint tensors this architecture does not use: %s",
                    folder, len(unused), unused[:5])

  state = jax.tree_util.tree_map_with_path(
      lambda kp, v: v.replace(values[_path_key(kp)]), abstract_state,
      is_leaf=lambda x: isinstance(x, nnx.Variable))
  model = nnx.merge(graphdef, state)
  model.source_path = str(folder.resolve())
  return model


# ------------------------------------------------------------------------------------------------
# Saving
# ------------------------------------------------------------------------------------------------


def _to_host(array: jax.Array) -> np.ndarray:
  """Gathers a (possibly sharded, possibly multi-host) array to a host numpy array."""
  if getattr(array, "is_fully_addressable", True):
    return np.asarray(jax.device_get(array))
  from jax.experimental import multihost_utils  # pylint: disable=g-import-not-at-top
  return np.asarray(multihost_utils.process_allgather(array, tiled=True))


def save_pretrained(model: Transformer, path: str | os.PathLike, *, tokenizer=None,
                    max_shard_bytes: int = 2 * 1024**3) -> None:
  """Writes `model` as an HF folder that `transformers.AutoModelForCausalLM.from_pretrained` loads.

  Writes config.json and model.safetensors, or model-0000i-of-0000n.safetensors shards plus
  model.safetensors.index.json when the parameters exceed `max_shard_bytes`. Tensors keep the
  model's parameter dtype. Tokenizer files come from `tokenizer` (a folder path, or an object with
  `save_pretrained`), else from the folder the model was loaded from, if it had them.
  In a multi-process run every process must call this (parameters are gathered); process 0 writes.

  Args:
    model: the Transformer.
    path: output folder (created; stale model*.safetensors files in it are replaced).
    tokenizer: optional tokenizer object or folder to copy tokenizer files from.
    max_shard_bytes: largest shard size in bytes.
  """
  folder = pathlib.Path(path)
  config = model.config
  specs = _tensor_specs(config)
  state = nnx.state(model, nnx.Param)
  variables = {_path_key(kp): v for kp, v in jax.tree_util.tree_flatten_with_path(
      state, is_leaf=lambda x: isinstance(x, nnx.Variable))[0]}
  # HF tensor (as our per-layer path) -> (our parameter, its layer index or None)
  sources, unknown = {}, []
  for key in variables:
    try:
      layer_specs = _layer_specs(key, specs, config.num_layers)
    except AssertionError:
      unknown.append(key)
      continue
    for layer, _ in layer_specs:
      sources[key if layer is None else ("layers", layer) + key[1:]] = (key, layer)
  if unknown or set(sources) != set(specs):
    raise ValueError(f"model parameters {sorted(unknown) or sorted(set(specs) - set(sources))} do "
                     "not match the architecture in model.config.")
  dtype = np.dtype(variables[("embed",)].get_value().dtype)
  writer = jax.process_index() == 0

  # Plan shards from shapes alone, in HF order, so at most one shard is ever on the host.
  shards: list[list[tuple]] = [[]]
  shard_bytes = 0
  for key, spec in specs.items():
    nbytes = int(np.prod(spec.hf_shape)) * dtype.itemsize
    if shards[-1] and shard_bytes + nbytes > max_shard_bytes:
      shards.append([])
      shard_bytes = 0
    shards[-1].append(key)
    shard_bytes += nbytes
  names = ([SINGLE_FILE] if len(shards) == 1 else
           [f"model-{i + 1:05d}-of-{len(shards):05d}.safetensors" for i in range(len(shards))])

  if writer:
    folder.mkdir(parents=True, exist_ok=True)
    for stale in list(folder.glob("model*.safetensors")) + [folder / INDEX_FILE]:
      if stale.exists():
        stale.unlink()
    hf_config = config.to_hf_dict(dtype="bfloat16" if dtype == jnp.bfloat16 else dtype.name)
    (folder / "config.json").write_text(json.dumps(hf_config, indent=2, sort_keys=True) + "\n")

  weight_map = {}
  total = 0
  for name, keys in zip(names, shards):
    tensors = {}
    for key in keys:
      spec = specs[key]
      ours, layer = sources[key]
      value = variables[ours].get_value()
      value = value if layer is None else value[layer]  # one layer leaves the devices at a time
      tensors[spec.hf_name] = np.ascontiguousarray(spec.to_hf(_to_host(value)))
      weight_map[spec.hf_name] = name
      total += tensors[spec.hf_name].nbytes
    if writer:
      save_file(tensors, str(folder / name), metadata={"format": "pt"})
    del tensors
  if not writer:
    return
  if len(shards) > 1:
    index = {"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}
    (folder / INDEX_FILE).write_text(json.dumps(index, indent=2) + "\n")
  _save_tokenizer_files(model, folder, tokenizer)


def _save_tokenizer_files(model: Transformer, folder: pathlib.Path, tokenizer) -> None:
  if tokenizer is not None and hasattr(tokenizer, "save_pretrained"):
    tokenizer.save_pretrained(str(folder))
    return
  source = tokenizer if tokenizer is not None else getattr(model, "source_path", None)
  if source is None:
    return
  source = pathlib.Path(source)
  if source.resolve() == folder.resolve():
    return
  for fname in TOKENIZER_FILES:
    if (source / fname).is_file():
      shutil.copyfile(source / fname, folder / fname)
