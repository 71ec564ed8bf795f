"""HF safetensors I/O: bit-exact round trips, transformers loading our folders, clear errors."""

import json
import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
import transformers
from flax import nnx
from safetensors.numpy import load_file, save_file

from grounding_jax.models import load_pretrained, save_pretrained
from grounding_jax.models.hf_io import CheckpointError


def _tensors(folder):
  """All tensors of a checkpoint folder (single file or shards) as {name: array}."""
  out = {}
  for f in sorted(folder.glob("*.safetensors")):
    out.update(load_file(f))
  return out


def _params(model):
  return {jax.tree_util.keystr(k): np.asarray(v) for k, v in
          jax.tree_util.tree_flatten_with_path(nnx.state(model, nnx.Param))[0]}


@pytest.mark.parametrize("family", ["llama", "qwen2", "qwen3"])
def test_load_save_load_save_is_bit_exact(tiny_checkpoint, tmp_path, family):
  source = tiny_checkpoint(family)
  first = load_pretrained(source)
  save_pretrained(first, tmp_path / "a")
  ours = _tensors(tmp_path / "a")
  ref = _tensors(source)
  assert ours.keys() == ref.keys()
  for name, array in ours.items():
    np.testing.assert_array_equal(array, ref[name], err_msg=name)
  second = load_pretrained(tmp_path / "a")
  save_pretrained(second, tmp_path / "b")
  for fname in ("config.json", "model.safetensors"):
    assert (tmp_path / "a" / fname).read_bytes() == (tmp_path / "b" / fname).read_bytes(), fname
  a, b = _params(first), _params(second)
  assert a.keys() == b.keys()
  for k in a:
    np.testing.assert_array_equal(a[k], b[k])


def test_sharded_bf16_save_loads_in_transformers_with_same_logits(tiny_checkpoint, tmp_path):
  source = tiny_checkpoint("qwen2")  # untied: lm_head is saved too
  model = load_pretrained(source, dtype=jnp.bfloat16)
  save_pretrained(model, tmp_path, max_shard_bytes=20_000)
  index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
  shards = sorted(set(index["weight_map"].values()))
  assert len(shards) > 1 and all((tmp_path / s).is_file() for s in shards)
  assert not (tmp_path / "model.safetensors").exists()

  reloaded = load_pretrained(tmp_path, dtype=jnp.bfloat16)
  a, b = _params(model), _params(reloaded)
  for k in a:
    assert b[k].dtype == jnp.bfloat16
    np.testing.assert_array_equal(a[k], b[k])

  hf = transformers.AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32).eval()
  ids = np.array([[5, 17, 33, 2, 90, 41]], np.int32)
  mask = np.ones_like(ids, bool)
  with torch.no_grad():
    ref = hf(input_ids=torch.from_numpy(ids).long()).logits.numpy()
  # Same bf16-rounded weights, both computed in float32.
  forward = nnx.jit(lambda m, i, k: m(i, k))  # jitted: compiles faster than op-by-op dispatch
  ours = np.asarray(forward(load_pretrained(tmp_path, dtype=jnp.float32), ids, mask))
  np.testing.assert_allclose(ours, ref, atol=1e-4)


def test_tokenizer_files_follow_the_model(tiny_checkpoint, tmp_path):
  source = tmp_path / "src"
  shutil.copytree(tiny_checkpoint("llama"), source)
  (source / "tokenizer.json").write_text("{}")
  (source / "tokenizer_config.json").write_text("{}")
  save_pretrained(load_pretrained(source), tmp_path / "out")
  assert (tmp_path / "out" / "tokenizer.json").read_text() == "{}"
  assert (tmp_path / "out" / "generation_config.json").is_file()


@pytest.fixture()
def broken_copy(tiny_checkpoint, tmp_path):
  folder = tmp_path / "ckpt"
  shutil.copytree(tiny_checkpoint("llama"), folder)
  return folder


def test_missing_tensor_is_named(broken_copy):
  tensors = load_file(broken_copy / "model.safetensors")
  del tensors["model.layers.1.mlp.up_proj.weight"]
  save_file(tensors, broken_copy / "model.safetensors")
  with pytest.raises(CheckpointError, match=r"model\.layers\.1\.mlp\.up_proj\.weight"):
    load_pretrained(broken_copy)


def test_wrong_shape_is_named(broken_copy):
  tensors = load_file(broken_copy / "model.safetensors")
  tensors["model.layers.0.self_attn.k_proj.weight"] = np.zeros((8, 32), np.float32)
  save_file(tensors, broken_copy / "model.safetensors")
  with pytest.raises(CheckpointError, match=r"model\.layers\.0\.self_attn\.k_proj\.weight.*\(8, 32\)"):
    load_pretrained(broken_copy)


@pytest.mark.parametrize("damage", ["truncate", "garbage_header"])
def test_corrupt_file_is_named(broken_copy, damage):
  path = broken_copy / "model.safetensors"
  data = path.read_bytes()
  path.write_bytes(data[:-64] if damage == "truncate" else b"\x07" * 8 + data[8:])
  with pytest.raises(CheckpointError, match="model.safetensors"):
    load_pretrained(broken_copy)


def test_without_weights_only_config_json_is_read(broken_copy):
  """read_weights=False (a resumed run's model): no safetensors file is opened; the parameters are
  the read model's shapes and dtypes, abstract, and on a mesh they carry the shardings the loaded
  arrays get there (the checkpoint's restore target)."""
  from grounding_jax import parallel
  mesh = parallel.make_mesh({"fsdp": 4, "tensor": 2})
  loaded = nnx.state(load_pretrained(broken_copy, mesh=mesh), nnx.Param)
  (broken_copy / "model.safetensors").unlink()
  for m in (None, mesh):
    abstract = nnx.state(load_pretrained(broken_copy, mesh=m, read_weights=False), nnx.Param)
    pairs = list(zip(jax.tree.leaves(abstract), jax.tree.leaves(loaded)))
    assert len(pairs) == len(jax.tree.leaves(loaded)) > 0
    for a, b in pairs:
      assert isinstance(a, jax.ShapeDtypeStruct) and (a.shape, a.dtype) == (b.shape, b.dtype)
      assert a.sharding == (None if m is None else b.sharding)


def test_missing_files_are_named(broken_copy):
  (broken_copy / "model.safetensors").unlink()
  with pytest.raises(FileNotFoundError, match="model.safetensors"):
    load_pretrained(broken_copy)
  (broken_copy / "config.json").unlink()
  with pytest.raises(FileNotFoundError, match="config.json"):
    load_pretrained(broken_copy)


def test_missing_shard_is_named(tiny_checkpoint, tmp_path):
  save_pretrained(load_pretrained(tiny_checkpoint("llama")), tmp_path, max_shard_bytes=20_000)
  index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
  shard = sorted(set(index["weight_map"].values()))[1]
  (tmp_path / shard).unlink()
  with pytest.raises(FileNotFoundError, match=shard):
    load_pretrained(tmp_path)


def test_unsupported_architecture_raises(broken_copy):
  config = json.loads((broken_copy / "config.json").read_text())
  config["model_type"] = "mistral"
  (broken_copy / "config.json").write_text(json.dumps(config))
  with pytest.raises(ValueError, match="model_type='mistral'"):
    load_pretrained(broken_copy)


def test_loads_a_checkpoint_transformers_sharded(tiny_checkpoint, tmp_path):
  source = tiny_checkpoint("qwen3")
  hf = transformers.AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
  hf.save_pretrained(tmp_path, max_shard_size="20KB")
  assert (tmp_path / "model.safetensors.index.json").is_file()
  assert len(list(tmp_path.glob("model-*.safetensors"))) > 1
  a, b = _params(load_pretrained(source)), _params(load_pretrained(tmp_path))
  for k in a:
    np.testing.assert_array_equal(a[k], b[k])
