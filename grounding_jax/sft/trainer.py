"""Supervised fine-tuning (warm-up / distillation): next-token loss on completion tokens only.

Shares the model, log-prob kernel, optimizer, checkpoint and metrics code with the GRPO trainer:

    trainer = SFTTrainer(config)        # rows from config.data (sft/data.py), or rows=[SFTRow, ...]
    history = trainer.train()           # resumes from <workdir>/checkpoints; metrics in <workdir>/logs

Loss = Σ −log p(completion token) / Σ completion tokens over each mini-batch (token mean, as TRL's
SFTTrainer with completion-only loss); prompts are context only, and so are the spans of a target
that a tool wrote (a row's `inserted_spans`: the search results in a gold search trace), which
stay in the sequence with no loss, as the rollout masks them (`loss_mask` holes, the RL update's
convention). Micro-batches accumulate exactly. A target longer than data.max_completion_tokens is
never cut silently: data.overlong cuts it with a warning that counts such rows, drops it, or refuses.
When every prompt begins with the same instructions (a recipe's rows), each micro-batch runs them
once and packs its rows' remaining tokens after them (`pack_micro_batches`, config
shared_prefix_min_tokens): the same loss, fewer tokens.
launch/sft.py runs it from configs/sft.py and writes <workdir>/hf.
"""

from __future__ import annotations

import time
from typing import Optional, Sequence

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
import optax
from flax import nnx

from grounding_jax import checkpoints
from grounding_jax import config_fields
from grounding_jax import metrics_writer
from grounding_jax import models
from grounding_jax import optim
from grounding_jax import sampling
from grounding_jax.models import attention
from grounding_jax.models import logprobs as logprobs_lib
from grounding_jax.models import lora
from grounding_jax.sft import data as sft_data

# SFT fields declared once (grounding_jax.config_fields); the older ones are checked by hand in
# SFTTrainer.__init__. `optional`: configs written before a field existed keep its default.
FIELDS = (
    config_fields.Field(
        "data.overlong", "cut", str, "a target longer than data.max_completion_tokens (its EOS "
        "included) or a prompt longer than data.max_prompt_tokens: 'cut' (a target at its end, a "
        "prompt on the left), with a warning that counts them; 'drop' the row, counted; 'error'",
        choices=sft_data.OVERLONG, optional=True,
        why="a cut target loses its EOS and its end, a gold completion its answer: it teaches "
        "never finishing; a cut prompt loses its instructions and the prefix the rows share"),
)


def check_config(config: ml_collections.ConfigDict) -> None:
  """Raises ConfigError naming each bad declared field (FIELDS, model.lora), before any model loads."""
  ck = config_fields.FieldChecker(config)
  lora.check_fields(ck)
  config_fields.check(ck, FIELDS)
  if ck.problems:
    raise config_fields.ConfigError(ck.problems)


def default_config() -> ml_collections.ConfigDict:
  """SFT defaults (Trust-Align SFT: lr 2e-5, cosine, warm-up 0.1)."""
  c = ml_collections.ConfigDict()
  c.seed = 0
  c.workdir = "/tmp/grounding_jax_sft"
  c.model = ml_collections.ConfigDict(dict(
      path="",                    # HF folder (config.json + safetensors + tokenizer)
      param_dtype="float32",      # master weights (and the checkpoints' dtype)
      compute_dtype="float32",    # "bfloat16" on accelerators
      remat=False,                # recompute layer activations in the backward pass
      remat_policy="full",        # "full" | "save_dots" (see rl/config/fields.py)
      scan_layers=True,           # one layer body scanned over stacked weights (see rl/config/fields.py)
      attention="auto",           # the attention kernel (models/attention.py)
      lora=lora.config_section(),  # rank > 0: train LoRA adapters only (see models/lora.py)
  ))
  c.data = ml_collections.ConfigDict(dict(
      kind="jsonl",               # "jsonl": rows {prompt | messages, target} from `path` (sft/data.py);
                                  # "recipe": the recipe's prompt + gold completion of Examples
      path="",                    # the rows file ("jsonl"), or the Examples file (source "jsonl")
      recipe="",                  # kind "recipe": a recipe name (grounding_jax.recipes)
      source="synthetic",         # kind "recipe": "synthetic" (the offline world) or "jsonl" (path)
      template="default",         # kind "recipe": the recipe's prompt template
      target="default",           # kind "recipe": the gold completion's style (ARENA: "direct"),
                                  # or a mix of styles "default:0.25,direct:0.75" (data.target_styles)
      num_examples=256,           # kind "recipe": synthetic Examples (0 = all of a JSONL)
      seed=0,                     # kind "recipe": the synthetic world's seed
      answerable_ratio=0.5,       # kind "recipe": synthetic questions answerable from their passages
      num_passages=5,             # kind "recipe", source "synthetic": passages in each context (≥ 2)
      answerable_only=False,      # kind "recipe": rows of the answerable Examples only (the warm-up
                                  # teaches the answer format; abstaining is left to RL to discover)
      prompt_as_user_turn=False,  # True: wrap a row's "prompt" as one user turn of the chat template
      enable_thinking=ml_collections.FieldReference(None, field_type=bool),  # Qwen3 template switch
      max_prompt_tokens=1024,     # longer prompts lose tokens on the left
      max_completion_tokens=512,  # longer completions: data.overlong (FIELDS)
  ))
  for f in FIELDS:  # the declared fields' defaults
    section, name = f.path.rsplit(".", 1)
    c[section][name] = f.value()
  c.batch_size = 8                # sequences per optimizer update
  c.micro_batch_size = 8          # sequences per gradient-accumulation micro-batch
  c.num_epochs = 1
  c.logprob_chunk_size = 4096
  # Rows whose prompts all begin with at least this many identical tokens (a recipe's system prompt
  # and instructions) run that prefix once per micro-batch, with each row's remaining prompt tokens
  # and completion packed after it (Transformer.hidden_states_shared_prefix): the same loss from
  # fewer tokens (launch/bench_sft_step.py measures the gain). 0 = every row runs whole.
  c.shared_prefix_min_tokens = 32
  c.optimizer = optim.default_optimizer_config()
  c.optimizer.learning_rate = 2e-5
  c.optimizer.schedule = "cosine"
  c.optimizer.warmup_ratio = 0.1
  # An SFT step is one optimizer update (batch_size sequences), so warm-up and decay count updates
  # whichever optimizer.schedule_unit is set.
  c.checkpoint = ml_collections.ConfigDict(dict(every_steps=100, max_to_keep=2, resume=True,
                                                compress=False))  # as rl's checkpoint.compress
  c.logging = ml_collections.ConfigDict(dict(console=True))  # tqdm bar on the console
  c.export_hf = True              # launch/sft.py writes <workdir>/hf at the end (config.model.path of
                                  # launch/train.py); launch/export_hf.py exports any step on request
  return c


def attended_lengths(loss_mask: np.ndarray) -> np.ndarray:
  """int [N]: each row's completion tokens up to its last loss token, the ones a forward pass runs
  (completion_logprobs attends a hole in the loss mask and drops what follows the last token)."""
  mask = np.asarray(loss_mask, bool)
  return np.where(mask.any(axis=1), mask.shape[1] - np.argmax(mask[:, ::-1], axis=1), 0)


def nll_sum(model, batch: dict, chunk_size: int) -> tuple[jax.Array, jax.Array]:
  """(Σ −log p over the loss tokens, their number) for one micro-batch; a hole in loss_mask is
  attended as context (completion_logprobs)."""
  logp, _ = logprobs_lib.completion_logprobs(model, batch["prompt_ids"], batch["prompt_mask"],
                                             batch["completion_ids"], batch["loss_mask"],
                                             chunk_size=chunk_size)
  mask = batch["loss_mask"].astype(jnp.float32)
  return -jnp.sum(logp * mask), jnp.sum(mask)


def _prompt_tokens(data: dict[str, np.ndarray], r: int) -> np.ndarray:
  """Row r's prompt tokens in `sft_data.tokenize_pairs` output, without its left padding."""
  return data["prompt_ids"][r, data["prompt_ids"].shape[1] - int(data["prompt_mask"][r].sum()):]


def shared_prefix_length(data: dict[str, np.ndarray]) -> int:
  """Tokens that every row's (left-padded) prompt in `sft_data.tokenize_pairs` output begins with."""
  return sampling.common_prefix_length(data["prompt_ids"], data["prompt_mask"])


def packing_pays(model_config, data: dict[str, np.ndarray], prefix_len: int, rows: int) -> bool:
  """Whether `rows` rows of `sft_data.tokenize_pairs` output cost fewer FLOPs as a `pack_micro_batches`
  micro-batch (the prefix once, the rows' other tokens in one packed row of their mean total
  length) than whole (each padded to the set's longest prompt and completion).

  Counts each layer's matmuls per token and its attention per (query, key) pair, both as computed
  (dense). Packing runs fewer tokens but attends every packed token to all the others (masked), so
  a few long rows with a short shared prefix cost more packed: 8 rows of 1,500 tokens sharing 300
  take ~2.3x SmolLM2's FLOPs whole; the demo's 4 rows of ~400 sharing 236, ~0.5x.
  """
  c = model_config
  per_token = 2 * (c.hidden_size * (2 * c.num_heads + 2 * c.num_kv_heads) * c.head_dim
                   + 3 * c.hidden_size * c.intermediate_size)
  per_pair = 4 * c.num_heads * c.head_dim
  whole = data["prompt_ids"].shape[1] + data["completion_ids"].shape[1]
  rest = data["prompt_mask"].sum(axis=1) - prefix_len + attended_lengths(data["loss_mask"])
  packed = rows * float(np.mean(rest))
  cost_whole = rows * whole * (per_token + whole * per_pair)
  cost_packed = (prefix_len + packed) * per_token + packed * (prefix_len + packed) * per_pair
  return cost_packed < cost_whole


def pack_micro_batches(data: dict[str, np.ndarray], idx: np.ndarray, micro_batch_size: int,
                       prefix_len: int, *, width_multiple: int = 64, targets_width: int = 0
                       ) -> dict[str, np.ndarray]:
  """Rows `idx` of `sft_data.tokenize_pairs` output as shared-prefix micro-batches [num_micro, 1, ...].

  Every row's prompt begins with the same `prefix_len` (≥ 1) tokens (`shared_prefix_length`): each
  micro-batch holds that prefix once ("prefix_ids") and its rows' remaining prompt tokens and
  completions packed one after another ("ids"; RoPE "positions" continue the prefix; "segment" =
  the row within the micro-batch, −1 at padding), padded to a multiple of `width_multiple` columns
  (few distinct widths, few compilations). A completion runs up to its last loss token, holes in
  the loss mask (a tool's inserted text) included as context. For each loss token, "source" is the
  column of [prefix's last position | packed columns] whose hidden state predicts it,
  "target_ids" the token and "target_mask" True; at least `targets_width` columns of them.
  """
  lengths = attended_lengths(data["loss_mask"])

  def split(r):  # (the row's prompt tokens after the prefix, its completion tokens, their loss)
    n = lengths[r]
    return (_prompt_tokens(data, r)[prefix_len:], data["completion_ids"][r][:n],
            data["loss_mask"][r][:n])

  micro = [[split(r) for r in rows] for rows in np.asarray(idx).reshape(-1, micro_batch_size)]
  width = max(sum(len(p) + len(c) for p, c, _ in m) for m in micro)
  width = -(-width // width_multiple) * width_multiple
  n_targets = max([targets_width] + [sum(int(loss.sum()) for _, _, loss in m) for m in micro])
  shape, t_shape = (len(micro), 1, width), (len(micro), 1, n_targets)
  out = {"ids": np.zeros(shape, np.int32), "positions": np.zeros(shape, np.int32),
         "segment": np.full(shape, -1, np.int32), "source": np.zeros(t_shape, np.int32),
         "target_ids": np.zeros(t_shape, np.int32), "target_mask": np.zeros(t_shape, bool)}
  for m, rows in enumerate(micro):
    col = t = 0
    for i, (prompt, completion, loss) in enumerate(rows):
      tokens = np.concatenate([prompt, completion])
      out["ids"][m, 0, col:col + len(tokens)] = tokens
      out["positions"][m, 0, col:col + len(tokens)] = prefix_len + np.arange(len(tokens))
      out["segment"][m, 0, col:col + len(tokens)] = i
      # Packed column j is column j + 1 of [prefix's last position | packed]: a token is predicted
      # by the column before it, a row's first token by the prefix's last position (column 0).
      cols = col + len(prompt) + np.flatnonzero(loss)
      k = len(cols)
      out["source"][m, 0, t:t + k] = np.where(cols > col, cols, 0)
      out["target_ids"][m, 0, t:t + k] = completion[loss]
      out["target_mask"][m, 0, t:t + k] = True
      col, t = col + len(tokens), t + k
  prefix = _prompt_tokens(data, idx[0])[:prefix_len]
  out["prefix_ids"] = np.tile(prefix.astype(np.int32), (len(micro), 1, 1))
  return out


def packed_nll_sum(model, batch: dict, chunk_size: int) -> tuple[jax.Array, jax.Array]:
  """`nll_sum` of one `pack_micro_batches` micro-batch: the shared prefix runs once.

  Not models/logprobs.completion_logprobs(rows_per_prompt=...), which shares a prompt the same way:
  it takes log-probs at every packed column, and here most columns are prompt; only the completion
  columns ("source") reach the LM head.
  """
  prefix_h, packed_h = model.hidden_states_shared_prefix(
      batch["prefix_ids"], jnp.ones(batch["prefix_ids"].shape, bool), batch["ids"],
      batch["positions"], batch["segment"])
  hidden = jnp.concatenate([prefix_h[:, -1:], packed_h], axis=1)
  hidden = jnp.take_along_axis(hidden, batch["source"][..., None], axis=1)
  logp, _ = logprobs_lib.token_logprobs(hidden, model.lm_head_kernel(), batch["target_ids"],
                                        chunk_size=chunk_size)
  mask = batch["target_mask"].astype(jnp.float32)
  return -jnp.sum(logp * mask), jnp.sum(mask)


def make_sft_step(graphdef, optimizer: optax.GradientTransformation, chunk_size: int):
  """Jitted `step(params, rest, opt_state, batch [num_micro, micro, ...], key) -> (params, opt_state,
  m)`; `key` seeds LoRA dropout (lora.dropout_key; unused without adapter dropout). A batch of
  `pack_micro_batches` (it has "prefix_ids") runs `packed_nll_sum`, else `nll_sum`."""

  def loss(params, rest, mb, key):
    with lora.dropout_key(key):
      model = nnx.merge(graphdef, params, rest)
      return (packed_nll_sum if "prefix_ids" in mb else nll_sum)(model, mb, chunk_size)

  grad_fn = jax.value_and_grad(loss, has_aux=True)

  def step(params, rest, opt_state, batch, key):
    def body(acc, xs):
      i, mb = xs
      (s, n), g = grad_fn(params, rest, mb, jax.random.fold_in(key, i))
      return jax.tree.map(jnp.add, acc, g), (s, n)
    num_micro = len(jax.tree.leaves(batch)[0])
    grad_sum, (s, n) = jax.lax.scan(body, jax.tree.map(jnp.zeros_like, params),
                                    (jnp.arange(num_micro), batch))
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
    rows: SFT rows (sft/data.py); default read from config.data — and checked before any model loads.
  """

  def __init__(self, config: ml_collections.ConfigDict, *, model=None, tokenizer=None,
               rows: Optional[Sequence[sft_data.SFTRow]] = None):
    self.config = config
    check_config(config)  # before any model loads
    if config.model.get("attention", "auto") not in attention.IMPLEMENTATIONS:
      raise ValueError(f"model.attention={config.model.attention!r}: expected one of "
                       f"{attention.IMPLEMENTATIONS} (models/attention.py)")
    if config.batch_size % config.micro_batch_size:
      raise ValueError(f"batch_size={config.batch_size} is not a multiple of "
                       f"micro_batch_size={config.micro_batch_size}")
    shared = config.shared_prefix_min_tokens
    if isinstance(shared, bool) or not isinstance(shared, int) or shared < 0:
      raise ValueError(f"shared_prefix_min_tokens={shared!r} must be an int >= 0 (0: every row runs "
                       "whole)")
    if rows is None:
      rows = sft_data.load_rows(config.data)
    if len(rows) < config.batch_size:
      raise ValueError(f"{len(rows)} SFT rows are fewer than batch_size={config.batch_size}")
    if tokenizer is None:
      tokenizer = models.load_tokenizer(config.model.path)
    pairs = sft_data.render(rows, tokenizer, prompt_as_user_turn=config.data.prompt_as_user_turn,
                            enable_thinking=config.data.enable_thinking)
    # Tokenised before the model loads: an overlong target under data.overlong='error' (or too few
    # left by 'drop') stops the run early.
    self.data = sft_data.tokenize_pairs(
        tokenizer, pairs, max_prompt_tokens=config.data.max_prompt_tokens,
        max_completion_tokens=config.data.max_completion_tokens,
        inserted_spans=[r.inserted_spans for r in rows], overlong=config.data.get("overlong", "cut"))
    if len(self.data["completion_ids"]) < config.batch_size:
      raise ValueError(f"{len(self.data['completion_ids'])} SFT rows fit "
                       f"data.max_completion_tokens={config.data.max_completion_tokens} "
                       f"(data.overlong='drop'), fewer than batch_size={config.batch_size}")
    if model is None:
      model = models.load_pretrained(config.model.path, dtype=models.DTYPES[config.model.param_dtype],
                                     compute_dtype=models.DTYPES[config.model.compute_dtype],
                                     remat=config.model.remat,
                                     remat_policy=config.model.remat_policy,
                                     scan_layers=config.model.scan_layers,
                                     attention_implementation=config.model.get("attention"))
    if config.model.lora.rank > 0 and not lora.has_adapters(model):
      model = lora.add_from_config(model, config.model.lora, config.seed)
    self.model, self.tokenizer = model, tokenizer
    # Prompts sharing enough leading tokens run them once per micro-batch (pack_micro_batches) where
    # that is cheaper, with one width of loss tokens for every step: the most a micro-batch of the
    # longest completions has.
    prefix = shared_prefix_length(self.data)
    pays = 0 < shared <= prefix and packing_pays(model.config, self.data, prefix,
                                                  config.micro_batch_size)
    self.prefix_len, self.targets_width = 0, 0
    if pays:
      longest = np.sort(self.data["loss_mask"].sum(axis=1))[-config.micro_batch_size:]
      self.prefix_len, self.targets_width = prefix, int(longest.sum())
    # Under LoRA the trained params are the adapters; the base weights sit frozen in `rest`.
    self.graphdef, self.params, self.rest = lora.split(model)
    self.checkpointer = checkpoints.Checkpointer(f"{config.workdir}/checkpoints",
                                                 max_to_keep=config.checkpoint.max_to_keep,
                                                 compress=config.checkpoint.compress)

  def train(self, max_steps: Optional[int] = None) -> list[dict]:
    """Runs (or resumes) num_epochs over the rows (seeded shuffle per epoch); returns this call's
    per-step metrics.

    Args:
      max_steps: stop after this many steps in this call (checkpointing at the stop); None = all.
    """
    c = self.config
    n = self.data["completion_ids"].shape[0]
    steps_per_epoch = n // c.batch_size
    total = steps_per_epoch * c.num_epochs
    optimizer = optim.build_optimizer(c.optimizer, total, updates_per_step=1)
    opt_state = optimizer.init(self.params)
    step = 0
    if c.checkpoint.resume and self.checkpointer.latest_step() is not None:
      state, meta = self.checkpointer.restore(self._state(opt_state))
      self.params, opt_state, step = state["params"], state["opt_state"], meta["step"]
      if "base" in state:
        self.rest = nnx.merge_state(self.rest, state["base"])
    sft_step = make_sft_step(self.graphdef, optimizer, c.logprob_chunk_size)
    writer = metrics_writer.MetricsWriter(f"{c.workdir}/logs", total_steps=total, initial_step=step,
                                          console=c.logging.console, console_keys=("loss",))
    history = []
    try:
      while step < total and (max_steps is None or len(history) < max_steps):
        epoch, k = divmod(step, steps_per_epoch)
        order = np.random.default_rng([c.seed, epoch]).permutation(n)
        idx = order[k * c.batch_size:(k + 1) * c.batch_size]
        if self.prefix_len:
          host = pack_micro_batches(self.data, idx, c.micro_batch_size, self.prefix_len,
                                    targets_width=self.targets_width)
        else:
          host = {key: v[idx].reshape(-1, c.micro_batch_size, *v.shape[1:])
                  for key, v in self.data.items()}
        batch = {key: jnp.asarray(v) for key, v in host.items()}
        t0 = time.perf_counter()
        self.params, opt_state, m = sft_step(self.params, self.rest, opt_state, batch,
                                             jax.random.fold_in(jax.random.key(c.seed), step))
        m = {key: float(v) for key, v in jax.device_get(m).items()}
        m["time/step"] = time.perf_counter() - t0
        step += 1
        writer.write(step, m)
        history.append({"step": step, **m})
        if step % c.checkpoint.every_steps == 0 or step == total or len(history) == max_steps:
          self.checkpointer.save(step, self._state(opt_state))
    finally:
      writer.close()
    self.model = nnx.merge(self.graphdef, self.params, self.rest)
    return history

  def _state(self, opt_state) -> dict:
    """The checkpointed state: params (the adapters under LoRA) and optimizer state, plus the
    frozen base weights with model.lora.save_base."""
    state = {"params": self.params, "opt_state": opt_state}
    if lora.has_adapters(self.model) and self.config.model.lora.save_base:
      state["base"] = nnx.filter_state(self.rest, nnx.Param)
    return state
