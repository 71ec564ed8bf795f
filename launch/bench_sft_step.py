r"""One SFT step (4 rows, forward + backward + AdamW) with SmolLM2-135M on CPU: ours vs transformers.

  python launch/bench_sft_step.py              # the demo's SFT rows (TruthRL prompt, 3 passages)
  python launch/bench_sft_step.py --steps=10   # more timed steps
  python launch/bench_sft_step.py --peer=false # ours only
  python launch/bench_sft_step.py --sft_workdir=<run>/sft   # the rows and sizes of an SFT run

The workload is `make demo`'s SFT warm-up (configs/demo.py:sft): its rows (a ~354-token TruthRL
prompt over three synthetic passages, of which ~236 tokens of chat template and instructions every
row shares, and a ~42-token gold completion), batches of 4 in the trainer's order, float32, with
activation rematerialisation (gradient checkpointing), completion-only token-mean loss, AdamW.
Three runs over the same batches:
  - ours, shared prefix: SFTTrainer as the demo runs it (the instructions once per micro-batch, the
    rows' other tokens packed after them; sft/trainer.pack_micro_batches);
  - ours, whole rows: the same with config.shared_prefix_min_tokens = 0 (every row padded to the
    set's longest prompt and completion);
  - the peer: transformers' LlamaForCausalLM (torch, the same weights) with gradient checkpointing and
    torch.optim.AdamW, each batch padded to its own longest row (TRL's SFTTrainer collator), labels
    −100 on prompt and padding.
Each runs --steps steps; step 1 (compilation / warm-up) is left out and the median of the others is
compared; a packed step whose width is new compiles too, so the median, not the mean. The three
step-1 losses (the same weights and rows) are printed as a check that they train the same thing.
Takes ~3 minutes on the 2-core CPU.

--sft_workdir benches another SFT run's workload instead: its config.json (written by launch/sft.py
and the learning checks' warm-ups) gives the rows, the token limits and what happens past them
(data.overlong), the batch and micro-batch sizes and the model; e.g. launch/real_data_check.py's
<workdir>/sft (real HotpotQA / MuSiQue / NQ contexts, prompts of 240-1,280 tokens).
"""

from __future__ import annotations

import importlib.util
import pathlib
import statistics
import tempfile
import time

from absl import app
from absl import flags
import numpy as np

_STEPS = flags.DEFINE_integer("steps", 6, "Steps per run; all but the first are timed.")
_PEER = flags.DEFINE_bool("peer", True, "Also time the transformers (torch) step.")
_SFT_WORKDIR = flags.DEFINE_string("sft_workdir", None, "An SFT run's folder: bench the rows, limits, "
                                   "batch sizes and model of its config.json instead of the demo's.")

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _demo_sft_config():
  spec = importlib.util.spec_from_file_location("demo_config", ROOT / "configs" / "demo.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  from grounding_jax.rl.config import presets
  c = module.get_config("sft")
  c.model.path = presets.resolve_model_path(c.model.path)
  c.logging.console = False
  c.checkpoint.every_steps = 10**6  # no checkpoint inside the timed steps
  return c


def _run_sft_config(workdir: str):
  """The SFT config of a run's <workdir>/config.json, over today's defaults (fields added since)."""
  from grounding_jax.eval import model_ref
  from grounding_jax.sft import trainer
  c = trainer.default_config()
  c.update(model_ref.read_run_config(workdir))  # nested dicts update the nested fields
  c.logging.console = False
  c.checkpoint.every_steps = 10**6
  return c


def run_ours(c, rows, min_tokens: int) -> tuple[list[float], float, int]:
  """(seconds per step, step-1 loss, shared prefix tokens) of SFTTrainer over `rows`."""
  from grounding_jax.sft import trainer
  c = c.copy_and_resolve_references()
  c.workdir = tempfile.mkdtemp(prefix="bench_sft_")
  c.shared_prefix_min_tokens = min_tokens
  tr = trainer.SFTTrainer(c, rows=rows)
  history = tr.train(max_steps=_STEPS.value)
  return [h["time/step"] for h in history], history[0]["loss"], tr.prefix_len


def run_peer(c, data: dict[str, np.ndarray]) -> tuple[list[float], float]:
  """(seconds per step, step-1 loss) of transformers + torch AdamW over the trainer's batches."""
  import torch
  import transformers
  from grounding_jax.sft import trainer
  torch.manual_seed(0)
  model = transformers.AutoModelForCausalLM.from_pretrained(c.model.path, dtype=torch.float32)
  model.gradient_checkpointing_enable()
  model.config.use_cache = False
  model.train()
  opt = torch.optim.AdamW(model.parameters(), lr=c.optimizer.learning_rate, weight_decay=0.0)
  n = data["prompt_ids"].shape[0]
  order = np.random.default_rng([c.seed, 0]).permutation(n)  # SFTTrainer's epoch-0 order
  attended = trainer.attended_lengths(data["loss_mask"])  # a tool's inserted text: context, no loss
  times, first_loss = [], None
  for step in range(_STEPS.value):
    idx = order[step * c.batch_size:(step + 1) * c.batch_size]
    seqs, labels = [], []
    for r in idx:  # each row unpadded: its prompt tokens, then its completion tokens
      prompt = data["prompt_ids"][r][data["prompt_mask"][r]]
      completion = data["completion_ids"][r][:attended[r]]
      seqs.append(np.concatenate([prompt, completion]))
      labels.append(np.concatenate([np.full(len(prompt), -100),
                                    np.where(data["loss_mask"][r][:attended[r]], completion, -100)]))
    width = max(len(s) for s in seqs)  # padded to the batch's longest row, on the right
    ids = torch.zeros((len(seqs), width), dtype=torch.long)
    lab = torch.full((len(seqs), width), -100, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, (s, l) in enumerate(zip(seqs, labels)):
      ids[i, :len(s)], lab[i, :len(s)], mask[i, :len(s)] = torch.from_numpy(s), torch.from_numpy(l), 1
    t0 = time.perf_counter()
    loss = model(input_ids=ids, attention_mask=mask, labels=lab).loss  # token mean over labels
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), c.optimizer.max_grad_norm)
    opt.step()
    opt.zero_grad(set_to_none=True)
    times.append(time.perf_counter() - t0)
    first_loss = float(loss.detach()) if first_loss is None else first_loss
  return times, first_loss


def main(argv):
  del argv
  if _STEPS.value < 2:
    raise app.UsageError(f"--steps={_STEPS.value}: need at least 2 (step 1 is not timed)")
  import torch
  torch.set_num_threads(2)
  from grounding_jax import models
  from grounding_jax.sft import data as sft_data
  from grounding_jax.sft import trainer
  c = _run_sft_config(_SFT_WORKDIR.value) if _SFT_WORKDIR.value else _demo_sft_config()
  rows = sft_data.load_rows(c.data)
  tok = models.load_tokenizer(c.model.path)
  pairs = sft_data.render(rows, tok, prompt_as_user_turn=c.data.prompt_as_user_turn,
                          enable_thinking=c.data.enable_thinking)
  data = sft_data.tokenize_pairs(tok, pairs,
                                 max_prompt_tokens=c.data.max_prompt_tokens,
                                 max_completion_tokens=c.data.max_completion_tokens,
                                 inserted_spans=[r.inserted_spans for r in rows],
                                 overlong=c.data.get("overlong", "cut"))
  runs = {}
  runs["ours, shared prefix"] = run_ours(c, rows, c.shared_prefix_min_tokens)
  runs["ours, whole rows"] = run_ours(c, rows, 0)
  if _PEER.value:
    runs["transformers + torch AdamW"] = (*run_peer(c, data), 0)
  lengths = data["prompt_mask"].sum(1) + trainer.attended_lengths(data["loss_mask"])
  print(f"\n{len(data['prompt_ids'])} rows of {lengths.min()}-{lengths.max()} tokens "
        f"(mean {lengths.mean():.0f}); "
        f"shared prefix {runs['ours, shared prefix'][2]} tokens; batches of {c.batch_size}, "
        f"{_STEPS.value} steps, the median of steps 2-{_STEPS.value}")
  medians = {name: statistics.median(t[1:]) for name, (t, _, _) in runs.items()}
  for name, (t, loss, _) in runs.items():
    print(f"  {name}: {medians[name]:.2f} s/step (steps {', '.join(f'{x:.2f}' for x in t)}); "
          f"step-1 loss {loss:.4f}")
  ours = medians["ours, shared prefix"]
  for name in list(medians)[1:]:
    print(f"  {name} / ours, shared prefix: {medians[name] / ours:.2f}x")


if __name__ == "__main__":
  app.run(main)
