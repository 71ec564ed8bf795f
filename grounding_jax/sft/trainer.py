"""Supervised fine-tuning (warm-up / distillation): next-token loss on completion tokens only.

Shares the model, log-prob kernel, optimizer, checkpoint and metrics code with the GRPO trainer:

    trainer = SFTTrainer(config, pairs=[(prompt_text, completion_text), ...])
    history = trainer.train()

Loss = Σ −log p(completion token) / Σ completion tokens over each mini-batch (token mean, as TRL's
SFTTrainer with completion-only loss); prompts are context only. Micro-batches accumulate exactly.
"""

from __future__ import annotations

import json
import time
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx

from grounding_jax import checkpoints
from grounding_jax import metrics_writer
from grounding_jax import optim
from grounding_jax import sampling
from grounding_jax.rl import logprobs as logprobs_lib


def default_config() -> ml_collections.ConfigDict:
  """SFT defaults (Trust-Align SFT: lr 2e-5, cosine, warm-up 0.1)."""
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.workdir = "/tmp/grounding_jax_sft"
  c.model = ml_collections.ConfigDict(dict(path="", param_dtype="float32", compute_dtype="float32",
                                           remat=False, scan_layers=True))
  c.data = ml_collections.ConfigDict(dict(
      path="",                    # JSONL with "prompt" and "completion" text fields
      max_prompt_tokens=1024,     # longer prompts lose tokens on the left
      max_completion_tokens=512,  # longer completions are cut (EOS then dropped)
  ))
  c.batch_size = 8                # sequences per optimizer update
  c.micro_batch_size = 8          # sequences per gradient-accumulation micro-batch
  c.num_epochs = 1
  c.logprob_chunk_size = 4096
  c.optimizer = optim.default_optimizer_config()
  c.optimizer.learning_rate = 2e-5
  c.optimizer.schedule = "cosine"
  c.optimizer.warmup_ratio = 0.1
  c.checkpoint = ml_collections.ConfigDict(dict(every_steps=100, max_to_keep=2, resume=True))
  c.logging = ml_collections.ConfigDict(dict(console=True))
  return c


def tokenize_pairs(tokenizer, pairs: Sequence[tuple[str, str]], *, max_prompt_tokens: int,
                   max_completion_tokens: int) -> dict[str, np.ndarray]:
  """Left-padded prompts [N, Lp] and right-padded completions (+ EOS) [N, Lc] with masks."""
  prompts = [p for p, _ in pairs]
  prompt_ids, prompt_mask = sampling.tokenize_prompts(tokenizer, prompts)
  if prompt_ids.shape[1] > max_prompt_tokens:
    prompt_ids, prompt_mask = prompt_ids[:, -max_prompt_tokens:], prompt_mask[:, -max_prompt_tokens:]
  eos = tokenizer.eos_token_id
  comps = [tokenizer.encode(c, add_special_tokens=False) + ([eos] if eos is not None else [])
           for _, c in pairs]
  width = min(max(len(c) for c in comps), max_completion_tokens)
  pad = tokenizer.pad_token_id or 0
  ids = np.full((len(comps), width), pad, np.int32)
  mask = np.zeros((len(comps), width), bool)
  for i, c in enumerate(comps):
    c = c[:width]
    ids[i, :len(c)] = c
    mask[i, :len(c)] = True
  return dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask, completion_ids=ids, loss_mask=mask)


def nll_sum(model, batch: dict, chunk_size: int) -> tuple[jax.Array, jax.Array]:
  """(Σ −log p over completion tokens, number of completion tokens) for one micro-batch."""
  logp, _ = logprobs_lib.completion_logprobs(model, batch["prompt_ids"], batch["prompt_mask"],
                                             batch["completion_ids"], batch["loss_mask"],
                                             chunk_size=chunk_size)
  mask = batch["loss_mask"].astype(jnp.float32)
  return -jnp.sum(logp * mask), jnp.sum(mask)


def make_sft_step(graphdef, optimizer: optax.GradientTransformation, chunk_size: int):
  """Jitted `step(params, rest, opt_state, batch [num_micro, micro, ...]) -> (params, opt_state, m)`."""

  def loss(params, rest, mb):
    return nll_sum(nnx.merge(graphdef, params, rest), mb, chunk_size)

  grad_fn = jax.value_and_grad(loss, has_aux=True)

  def step(params, rest, opt_state, batch):
    def body(acc, mb):
      (s, n), g = grad_fn(params, rest, mb)
      return jax.tree.map(jnp.add, acc, g), (s, n)
    grad_sum, (s, n) = jax.lax.scan(body, jax.tree.map(jnp.zeros_like, params), batch)
    tokens = jnp.maximum(jnp.sum(n), 1.0)
    grads = jax.tree.map(lambda g: g / tokens, grad_sum)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state, {
        "loss": jnp.sum(s) / tokens, "tokens": jnp.sum(n), "grad_norm": optax.tree.norm(grads)}

  return jax.jit(step, donate_argnums=(0, 2))


class SFTTrainer:
  """Completion-only SFT, resumable from `<workdir>/checkpoints`.

  Args:
    config: see `default_config()`.
    model, tokenizer: an already-loaded model (else from config.model.path).
    pairs: [(prompt text, completion text)]; default read from config.data.path (JSONL).
  """

  def __init__(self, config: ml_collections.ConfigDict, *, model=None, tokenizer=None,
               pairs: Optional[Sequence[tuple[str, str]]] = None):
    self.config = config
    if config.batch_size % config.micro_batch_size:
      raise ValueError(f"batch_size={config.batch_size} is not a multiple of "
                       f"micro_batch_size={config.micro_batch_size}")
    if model is None:
      from grounding_jax import models  # pylint: disable=g-import-not-at-top
      from grounding_jax.rl.trainer import _dtype  # pylint: disable=g-import-not-at-top
      model = models.load_pretrained(config.model.path, dtype=_dtype(config.model.param_dtype),
                                     compute_dtype=_dtype(config.model.compute_dtype),
                                     remat=config.model.remat,
                                     scan_layers=config.model.scan_layers)
      tokenizer = tokenizer or models.load_tokenizer(config.model.path)
    if pairs is None:
      pairs = read_pairs(config.data.path)
    if len(pairs) < config.batch_size:
      raise ValueError(f"{len(pairs)} SFT pairs are fewer than batch_size={config.batch_size}")
    self.model, self.tokenizer = model, tokenizer
    self.data = tokenize_pairs(tokenizer, pairs, max_prompt_tokens=config.data.max_prompt_tokens,
                               max_completion_tokens=config.data.max_completion_tokens)
    self.graphdef, self.params, self.rest = nnx.split(model, nnx.Param, ...)
    self.checkpointer = checkpoints.Checkpointer(f"{config.workdir}/checkpoints",
                                                 max_to_keep=config.checkpoint.max_to_keep)

  def train(self) -> list[dict]:
    """Runs num_epochs over the pairs (seeded shuffle per epoch); returns per-step metrics."""
    c = self.config
    n = self.data["completion_ids"].shape[0]
    steps_per_epoch = n // c.batch_size
    total = steps_per_epoch * c.num_epochs
    optimizer = optim.build_optimizer(c.optimizer, total)
    opt_state = optimizer.init(self.params)
    step = 0
    if c.checkpoint.resume and self.checkpointer.latest_step() is not None:
      state, meta = self.checkpointer.restore({"params": self.params, "opt_state": opt_state})
      self.params, opt_state, step = state["params"], state["opt_state"], meta["step"]
    sft_step = make_sft_step(self.graphdef, optimizer, c.logprob_chunk_size)
    writer = metrics_writer.MetricsWriter(f"{c.workdir}/logs", total_steps=total, initial_step=step,
                                          console=c.logging.console, console_keys=("loss",))
    history = []
    try:
      while step < total:
        epoch, k = divmod(step, steps_per_epoch)
        order = np.random.default_rng([c.seed, epoch]).permutation(n)
        idx = order[k * c.batch_size:(k + 1) * c.batch_size]
        batch = {key: jnp.asarray(v[idx].reshape(-1, c.micro_batch_size, *v.shape[1:]))
                 for key, v in self.data.items()}
        t0 = time.perf_counter()
        self.params, opt_state, m = sft_step(self.params, self.rest, opt_state, batch)
        m = {key: float(v) for key, v in jax.device_get(m).items()}
        m["time/step"] = time.perf_counter() - t0
        step += 1
        writer.write(step, m)
        history.append({"step": step, **m})
        if step % c.checkpoint.every_steps == 0 or step == total:
          self.checkpointer.save(step, {"params": self.params, "opt_state": opt_state})
    finally:
      writer.close()
    self.model = nnx.merge(self.graphdef, self.params, self.rest)
    return history


def read_pairs(path: str) -> list[tuple[str, str]]:
  """(prompt, completion) pairs from a JSONL file with "prompt" and "completion" fields."""
  if not path:
    raise ValueError("config.data.path is empty: give a JSONL file of {prompt, completion} rows")
  pairs = []
  with open(path, encoding="utf-8") as f:
    for line_no, line in enumerate(f, 1):
      if not line.strip():
        continue
      row = json.loads(line)
      if not isinstance(row.get("prompt"), str) or not isinstance(row.get("completion"), str):
        raise ValueError(f"{path}:{line_no}: each row needs string fields 'prompt' and 'completion'")
      pairs.append((row["prompt"], row["completion"]))
  return pairs
