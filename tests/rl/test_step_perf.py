"""perf/ metrics of a tiny GRPO run: present, positive, and equal to an independent count; the
start-up memory report names the programs; compiling ahead leaves the update nothing to compile."""

import collections

import jax
import numpy as np
import pytest

import toy_task
from grounding_jax import perf
from grounding_jax.rl import data_stream
from grounding_jax.rl import stages as stages_lib
from grounding_jax.rl import step_perf
from grounding_jax.rl import update as update_lib
from grounding_jax.rl import update_programs


def _compiles_of(fun: str, run):
  """(run()'s result, how many programs named `fun` jax compiled or read from disk meanwhile)."""
  counts = collections.Counter()
  listener = lambda event, duration, fun_name="", **kw: counts.update(
      [fun_name] if event == "/jax/core/compile/backend_compile_duration" else [])
  jax.monitoring.register_event_duration_secs_listener(listener)
  try:
    return run(), counts[f"jit({fun})"]
  finally:
    jax.monitoring.unregister_event_duration_listener(listener)


def _flops_of_forward(config, rows: int, tokens: int) -> float:
  """Matmul FLOPs of the layers' projections and the LM head over rows x tokens (no attention)."""
  d, h, kv, dh, f = (config.hidden_size, config.num_heads, config.num_kv_heads, config.head_dim,
                     config.intermediate_size)
  layer = 2 * (d * (h + 2 * kv) * dh + h * dh * d + 3 * d * f)
  return rows * tokens * (config.num_layers * layer + 2 * d * config.vocab_size)


def test_perf_metrics_present_and_positive(tiny_checkpoint, tmp_path):
  c = toy_task.toy_config(tmp_path, steps=2)
  c.loss.kl_coef = 0.05  # a reference pass too
  c.checkpoint.every_steps = 1000
  c.loss.logprob_chunk_size = 44  # programs no other test compiled in this process
  tr = toy_task.make_trainer(tiny_checkpoint("llama"), tmp_path, c)
  history, compiles = _compiles_of("accumulate", tr.train)
  # Costing a program reads its compile back from jax's cache: one compile per update shape.
  assert compiles == len({k for k in tr.perf._costs if k[0] == "update"}) > 0
  for h in history:
    for phase in ("sample", "reference", "update", "step"):
      assert h[f"perf/{phase}_tflop"] > 0, (phase, h)
    assert h["perf/step_tflop"] == pytest.approx(
        h["perf/sample_tflop"] + h["perf/reference_tflop"] + h["perf/update_tflop"])
    for key in ("achieved_tflop_per_s", "mfu", "mfu_sample", "mfu_update", "tokens_per_s_per_device",
                "peak_memory_gib", "update_peak_memory_gib", "reference_peak_memory_gib"):
      assert h[f"perf/{key}"] > 0, key
    assert h["perf/peak_memory_gib"] == max(h["perf/update_peak_memory_gib"],
                                            h["perf/reference_peak_memory_gib"])
    assert h["perf/mfu"] < 1.0
  # The reference pass runs each micro-batch's prompts and completions forward once: at least the
  # projections and head over the packed tokens (an independent count from the model's shapes).
  cfg = tr.model.config
  rows = c.rollout.prompts_per_step * c.rollout.group_size
  assert history[0]["perf/reference_tflop"] * 1e12 >= _flops_of_forward(cfg, rows // c.rollout.group_size,
                                                                         c.rollout.max_new_tokens)
  # The gradient costs about three forward passes (remat: four) of the same tokens.
  ratio = history[0]["perf/update_tflop"] / history[0]["perf/reference_tflop"]
  assert 2.5 < ratio < 4.5, ratio


def test_startup_report_names_the_widest_programs(tiny_checkpoint, tmp_path):
  c = toy_task.toy_config(tmp_path, steps=1)
  tr = toy_task.make_trainer(tiny_checkpoint("llama"), tmp_path, c)
  report = tr.startup_report()
  assert report.startswith("peak memory per device")
  assert "update (gradient of one micro-batch):" in report and "sampler KV cache:" in report
  assert "TFLOP per call" in report


def test_sampler_flops_match_a_direct_count():
  cfg = type("C", (), dict(hidden_size=8, num_heads=2, num_kv_heads=1, head_dim=4,
                           intermediate_size=16, vocab_size=10, num_layers=3))
  stats = dict(prompt_rows=2, rows=6, prompt_bucket=5, new_tokens_bucket=4, decode_steps=3)
  prefill, decode = perf.sampler_flops(cfg, stats)
  attn = 2 * 2 * 3 * 2 * 4  # q.k and p.v per slot, over the layers
  assert prefill == _flops_of_forward(cfg, 2, 5) - 2 * 4 * 2 * 8 * 10 + 2 * 5 * 5 * attn
  assert decode == _flops_of_forward(cfg, 6, 3) + 3 * 6 * (5 + 4) * attn


def test_compile_ahead_leaves_step_one_nothing_to_compile_in_the_update(tiny_checkpoint, tmp_path):
  c = toy_task.toy_config(tmp_path, steps=1)
  c.update_loop.compile_ahead = "all"
  c.loss.logprob_chunk_size = 40  # programs no other test compiled in this process
  tr = toy_task.make_trainer(tiny_checkpoint("llama"), tmp_path, c)
  history, compiles = _compiles_of("accumulate", tr.train)
  lengths = [len(t) for t in step_perf.prompt_tokens(toy_task.make_examples(64), toy_task.prompt_fn,
                                                        tr.tokenizer, 0)]
  listed = update_programs.update_shapes(lengths, max_new_tokens=c.rollout.max_new_tokens,
                                         length_multiple=c.update_loop.length_multiple,
                                         rows_per_prompt=c.rollout.group_size)
  assert compiles == len(listed)  # every listed shape once, ahead; step 1's update added none
  assert np.isfinite(history[0]["loss"])


def test_compile_ahead_widest_builds_the_widest_program_of_a_steps_prompts(tiny_checkpoint,
                                                                            tmp_path):
  c = toy_task.toy_config(tmp_path, steps=1)
  c.update_loop.compile_ahead = "widest"
  tr = toy_task.make_trainer(tiny_checkpoint("llama"), tmp_path, c)
  st = c.stages[0]
  stage = stages_lib.Stage.plan(c, 0, tr.run).start(tr.run, 8, tr.params, tr.rest)
  view, updater, stream = stage.view, stage.updater, stage.stream
  stage.pool.close()
  assert not updater.pending  # "widest" starts with each step, not with the stage
  # The step's prompts as a fresh stream hands them out, at the widest completion and packed widths.
  first = data_stream.ExampleStream(toy_task.make_examples(64), seed=st.data.seed + view.seed,
                                    shuffle=st.data.shuffle, position=8).take(4)
  lengths = [len(t) for t in step_perf.prompt_tokens(first, toy_task.prompt_fn, tr.tokenizer, 0)]
  widest = update_programs.UpdateShape(update_lib.prompt_bucket(max(lengths)),
                                       c.rollout.max_new_tokens, 4 * c.rollout.max_new_tokens)
  pending = stage.compile_ahead(tr.run, tr.params, tr.rest, stream.peek(4))
  assert list(pending) == [widest] and stream.position == 8  # peeked, not taken
  updater.add_pending(pending)
  assert stage.compile_ahead(tr.run, tr.params, tr.rest, stream.peek(4)) == {}  # never twice
  assert pending[widest].result() >= 0
  updater.close()
  assert not updater.pending
