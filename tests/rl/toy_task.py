"""A toy RL task for learning / resume tests: reward = share of completion words in a target set.

Word-level tokenizer over the tiny checkpoints' 96-token vocabulary ("<pad>", "<s>", "</s>", w3 … w95),
prompts of random words, reward = fraction of generated words among w3 … w12 (≈ 10% at random init).
"""

import numpy as np
import tokenizers
import transformers

from grounding_jax.data.schema import Example

VOCAB = 96
TARGET = {f"w{i}" for i in range(3, 13)}


def make_tokenizer():
  vocab = {"<pad>": 0, "<s>": 1, "</s>": 2, **{f"w{i}": i for i in range(3, VOCAB)}}
  tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="<pad>"))
  tok.pre_tokenizer = tokenizers.pre_tokenizers.WhitespaceSplit()
  tok.decoder = tokenizers.decoders.WordPiece(prefix="##")  # joins words with spaces
  out = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                                             pad_token="<pad>")
  out.padding_side = "left"
  return out


def make_examples(n, seed=0):
  rng = np.random.default_rng(seed)
  return [Example(question=" ".join(f"w{t}" for t in rng.integers(13, VOCAB, size=4)), id=f"toy{i}")
          for i in range(n)]


def prompt_fn(example):
  return example.question


class TargetShareReward:
  """Picklable reward: share of words in TARGET (0 for an empty completion)."""

  reward_range = (0.0, 1.0)  # failed rows score the floor (reward.on_error="min")

  def __call__(self, completions, examples, **extra):
    out = []
    for text in completions:
      words = text.split()
      out.append(sum(w in TARGET for w in words) / len(words) if words else 0.0)
    r = np.asarray(out, np.float64)
    return {"reward": r, "target_share": r}


def toy_config(workdir, *, steps=4, lr=3e-3, prompts=4, group=4, new_tokens=6):
  from grounding_jax.rl import config as config_lib
  c = config_lib.default_config()
  c.workdir = str(workdir)
  c.rollout.prompts_per_step = prompts
  c.rollout.group_size = group
  c.rollout.max_new_tokens = new_tokens
  c.reward.num_workers = 0
  c.update_loop.micro_batch_size = prompts * group // 2
  c.optimizer.learning_rate = lr
  c.loss.logprob_chunk_size = 48
  c.stages = [config_lib.stage("toy", num_steps=steps)]
  c.checkpoint.every_steps = 1
  c.checkpoint.background_write = "on"  # the trainer tests write their checkpoints as a GPU run does
  c.logging.console = False
  c.mesh.fsdp = 1  # one device: toy runs stay single-device
  return c


def resume_config(workdir):
  """Stages of 2 and 3 steps (checkpoint every step); stage 2 reads the data in another order."""
  from grounding_jax.rl import config as config_lib
  c = toy_config(workdir, steps=2, lr=1e-2)
  c.stages = [config_lib.stage("toy", num_steps=2), config_lib.stage("toy2", num_steps=3)]
  return c


def make_trainer(ckpt, workdir, config=None, reward=None):
  """A Trainer on the toy task, scored by `reward` (default TargetShareReward)."""
  from grounding_jax import models
  from grounding_jax.rl import trainer
  config = config or resume_config(workdir)
  data = make_examples(64)
  return trainer.Trainer(config, model=models.load_pretrained(ckpt), tokenizer=make_tokenizer(),
                         reward_functions=[("toy", 1.0, reward or TargetShareReward())],
                         datasets={"toy": data, "toy2": data[::-1]}, prompt_fn=prompt_fn)
