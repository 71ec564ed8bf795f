"""Sampling on 8 fake CPU devices (batch over data x fsdp, heads over tensor) equals 1-device sampling."""

import jax
import numpy as np
import pytest

from grounding_jax import sampling
from grounding_jax.models import load_pretrained
from grounding_jax.parallel import make_mesh
from sampling_reference import random_prompts
from test_generate import SAMPLED


# The sharded model also runs its 16-token prefill in query chunks of at most 5 (4 x 4).
@pytest.mark.parametrize("query_chunk", [None, 5])
def test_sharded_equals_single_device(tiny_checkpoint, query_chunk):
  assert jax.device_count() == 8
  path = tiny_checkpoint("llama")
  ids, mask = random_prompts((5, 11, 3), 96, seed=1)  # 3 prompts: padded to 4 for 4 batch shards
  key = jax.random.key(3)
  # The reference runs unrolled layers on one device, the sharded model scanned ones (the default).
  single = sampling.generate_ids(load_pretrained(path, scan_layers=False), ids, mask, seed=key,
                                 **SAMPLED)

  mesh = make_mesh({"data": 2, "fsdp": 2, "tensor": 2})
  sharded_model = load_pretrained(path, mesh=mesh, attention_query_chunk=query_chunk)
  assert sharded_model.scan_layers
  assert not sharded_model.layers.attn.q_proj[...].sharding.is_fully_replicated
  sharded = sampling.generate_ids(sharded_model, ids, mask, seed=key, mesh=mesh, **SAMPLED)
  assert sampling.last_stats()["prompt_rows"] == 4
  np.testing.assert_array_equal(sharded.token_ids, single.token_ids)
  np.testing.assert_array_equal(sharded.lengths, single.lengths)
  np.testing.assert_array_equal(sharded.truncated, single.truncated)
  np.testing.assert_allclose(sharded.logprobs, single.logprobs, atol=1e-5, rtol=0)
