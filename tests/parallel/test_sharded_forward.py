"""The Transformer forward on an 8-device CPU mesh (fsdp 4 x tensor 2, data 8, data 2 x fsdp 2 x
tensor 2) equals the 1-device one, with the parameters really split as the rules say. The sharded
models scan their layers (the default), the 1-device references run them unrolled."""

import math

import jax
from flax import nnx
import numpy as np
import pytest

from grounding_jax import parallel
from grounding_jax.models import load_pretrained

# Mesh axis each logical weight dimension is split over by DEFAULT_RULES, and the mesh layouts tested.
_AXIS_OF = {"layers": None, "vocab": "tensor", "embed": "fsdp", "q_heads": "tensor", "kv_heads": "tensor",
            "mlp": "tensor", "head_dim": None, "norm": None}
_LAYOUTS = {"fsdp4_tensor2": {"data": 1, "fsdp": 4, "tensor": 2}, "data8": {"data": 8, "fsdp": 1, "tensor": 1},
            "data2_fsdp2_tensor2": {"data": 2, "fsdp": 2, "tensor": 2}}
# (family, config overrides): the conftest tiny models, plus SmolLM2's head layout (9 query / 3 kv
# heads), which tensor=2 cannot split, so those dimensions must fall back to replicated.
_MODELS = {"llama": ("llama", {}), "qwen2": ("qwen2", {}), "qwen3": ("qwen3", {}),
           "llama_9q_3kv": ("llama", dict(num_attention_heads=9, num_key_value_heads=3, head_dim=8,
                                        hidden_size=36))}


def _padded_batch(vocab: int, batch: int = 8, length: int = 7):
  rng = np.random.default_rng(0)
  ids = rng.integers(3, vocab, size=(batch, length)).astype(np.int32)
  lengths = np.array([7, 3, 5, 1, 7, 6, 2, 4])[:batch]
  mask = np.arange(length)[None, :] >= (length - lengths)[:, None]  # left padding
  return np.where(mask, ids, 0).astype(np.int32), mask


def _forward(model, ids, mask, mesh=None):
  graphdef, state = nnx.split(model)

  def fn(state, ids, mask):
    return nnx.merge(graphdef, state)(ids, mask)

  if mesh is None:
    return np.asarray(jax.jit(fn)(state, ids, mask))
  batch = parallel.logical_sharding(("batch", "length"), ids.shape, mesh)
  out = parallel.logical_sharding(("batch", "length", "vocab"), ids.shape + (model.config.vocab_size,),
                                  mesh)
  jitted = jax.jit(fn, in_shardings=(parallel.state_shardings(state, mesh), batch, batch),
                   out_shardings=out)
  with parallel.use_mesh(mesh):
    logits = jitted(state, ids, mask)
  assert logits.sharding.is_equivalent_to(out, 3)
  return np.asarray(logits)


def _expected_shard_shape(shape, names, mesh_shape, layout):
  out = []
  for size, name in zip(shape, names):
    axis = _AXIS_OF[name]
    split = mesh_shape.get(axis, 1) if axis else 1
    out.append(size // split if size % split == 0 else size)
  return tuple(out)


@pytest.fixture(scope="module")
def one_device_reference(tiny_checkpoint):
  """name -> (checkpoint path, ids, mask, 1-device unrolled-layer logits), computed once per model."""
  cache = {}

  def get(name):
    if name not in cache:
      family, overrides = _MODELS[name]
      path = tiny_checkpoint(family, **overrides)
      model = load_pretrained(path, scan_layers=False)
      ids, mask = _padded_batch(model.config.vocab_size)
      cache[name] = path, ids, mask, _forward(model, ids, mask)
    return cache[name]

  return get


# Every family on fsdp x tensor; data parallelism does not depend on the family, so one suffices.
# Parameters reach the mesh either while loading (load_pretrained(mesh=)) or afterwards (shard_model).
@pytest.mark.parametrize("name, layout, placement", [
    ("llama", "fsdp4_tensor2", "load"), ("llama", "data8", "load"), ("qwen2", "fsdp4_tensor2", "load"),
    ("qwen3", "fsdp4_tensor2", "load"), ("llama_9q_3kv", "fsdp4_tensor2", "shard_model"),
    ("qwen2", "data2_fsdp2_tensor2", "load")])
def test_sharded_forward_matches_one_device(one_device_reference, name, layout, placement):
  path, ids, mask, reference = one_device_reference(name)
  mesh = parallel.make_mesh(_LAYOUTS[layout])
  if placement == "load":
    model = load_pretrained(path, mesh=mesh)
  else:
    model = parallel.shard_model(load_pretrained(path), mesh)
  assert model.scan_layers

  # Every parameter is laid out as the rules say: split where the mesh axis divides, else replicated.
  split_params = 0
  for key_path, var in nnx.to_flat_state(nnx.state(model, nnx.Param)):
    value, names = var.get_value(), parallel.logical_names(var)
    assert value.sharding.mesh == mesh, key_path
    shard_shapes = {s.data.shape for s in value.addressable_shards}
    assert shard_shapes == {_expected_shard_shape(value.shape, names, dict(mesh.shape), layout)}, (
        key_path, names, value.shape)
    split_params += not value.sharding.is_fully_replicated
  if layout != "data8":
    assert split_params >= 8  # embeddings, attention and MLP weights (of every layer)
    if name == "llama_9q_3kv":
      q = next(v for p, v in nnx.to_flat_state(nnx.state(model, nnx.Param))
               if parallel.logical_names(v)[-3:] == ("embed", "q_heads", "head_dim"))
      assert q.get_value().addressable_shards[0].data.shape[-3:] == (36 // 4, 9, 8)
  else:
    assert split_params == 0  # pure data parallelism replicates the weights

  logits = _forward(model, ids, mask, mesh)
  assert math.prod(logits.shape) == math.prod(reference.shape)
  np.testing.assert_allclose(logits[mask], reference[mask], rtol=1e-5, atol=1e-5)
