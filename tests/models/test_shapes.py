"""models/shapes.py: each named shape is its public model's architecture (parameters counted by
transformers from the same config), its FLOPs per token are what our model's program does, and a
random-weight model builds without files."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from grounding_jax import perf
from grounding_jax.models import Transformer, shapes

# The parameter counts the model cards state, to their precision (billions).
_CARD_PARAMS = {"qwen2.5-0.5b": 0.49, "qwen2.5-1.5b": 1.54, "qwen3-4b": 4.0, "llama3-8b": 8.0}


@pytest.mark.parametrize("name", list(shapes.SHAPES))
def test_parameter_count_matches_transformers(name):
  config = shapes.shape_config(name)
  abstract = nnx.eval_shape(lambda: Transformer(config, rngs=nnx.Rngs(0)))
  peer = shapes.hf_random_model(config, "float32", "meta")  # transformers' model, no memory
  assert shapes.param_count(abstract) == peer.num_parameters() == perf.param_count(config)
  if name in _CARD_PARAMS:
    assert round(perf.param_count(config) / 1e9, 2 if name.startswith("qwen2") else 1) == \
        _CARD_PARAMS[name]


@pytest.mark.parametrize("name", list(shapes.SHAPES))
def test_flops_per_token_are_the_forward_programs(name):
  """The formula perf.sampler_flops uses, against the matmuls of our forward's jaxpr at this shape
  (traced abstractly): T tokens cost T x (layers + head) and T^2 query-key slots."""
  config = shapes.shape_config(name)
  graphdef, state = nnx.split(nnx.eval_shape(lambda: Transformer(config, rngs=nnx.Rngs(0))))
  t = 8
  ids = jax.ShapeDtypeStruct((1, t), jnp.int32)
  jaxpr = jax.make_jaxpr(lambda s, i: nnx.merge(graphdef, s)(i, jnp.ones(i.shape, bool)))(state, ids)
  per_token, head = perf.matmul_flops_per_token(config)
  assert perf.jaxpr_flops(jaxpr) == t * (per_token + head) + t * t * perf.attention_flops_per_slot(
      config)


def test_random_model_builds_in_the_asked_dtypes_without_files():
  model = shapes.random_model("tiny", dtype=jnp.bfloat16, compute_dtype=jnp.float32, seed=1)
  assert {x.dtype for x in jax.tree.leaves(nnx.state(model, nnx.Param))} == {jnp.dtype(jnp.bfloat16)}
  logits = model(jnp.ones((2, 5), jnp.int32), jnp.ones((2, 5), bool))
  assert logits.shape == (2, 5, 49152) and np.isfinite(np.asarray(logits)).all()
  again = shapes.random_model("tiny", dtype=jnp.bfloat16, seed=1)
  assert np.array_equal(np.asarray(again.embed[...]), np.asarray(model.embed[...]))  # seeded


def test_vocab_override_and_unknown_names():
  assert shapes.shape_config("qwen2.5-1.5b", vocab_size=49152).vocab_size == 49152
  assert shapes.shape_config("qwen3-4b").qk_norm and shapes.shape_config("qwen2.5-0.5b").qkv_bias
  assert not shapes.shape_config("llama3-8b").tie_word_embeddings
  with pytest.raises(ValueError, match="qwen2.5-1.5b"):
    shapes.shape_config("qwen-1.5b")
