r"""Builds a recipe's train/eval JSONL (one `Example` per line) from raw dataset files or the synthetic world.

  # ARENA on HotpotQA: official files in, Examples out, summary printed
  python launch/build_data.py --recipe=arena --source=hotpotqa \
      --train_input=hotpot_train_v1.1.json --eval_input=hotpot_dev_distractor_v1.json \
      --train_limit=10000 --eval_limit=500 --output_dir=/tmp/data/arena_hotpotqa

  # Ground-GRPO on Trust-Score ASQA with 5 docs, prompts stored through a chat template
  python launch/build_data.py --recipe=trust_stage1 --source=asqa --train_input=asqa_train.json \
      --reader_kwargs=ndoc=5 --tokenizer=~/.cache/grounding_jax/smollm2-135m-instruct --with_prompts \
      --output_dir=/tmp/data/trust_asqa

  # GRACE on HotpotQA: 5 retrievers x 50/50 sufficient/insufficient train contexts, dense top-3 eval
  python launch/build_data.py --recipe=grace --source=hotpotqa --grace_construct \
      --train_input=hotpot_train_v1.1.json --train_limit=2000 \
      --eval_input=hotpot_dev_distractor_v1.json --eval_limit=500 --output_dir=/tmp/data/grace_hotpotqa

  # The offline synthetic benchmark (seconds)
  python launch/build_data.py --recipe=grace --source=synthetic --synthetic_train_size=2000 \
      --synthetic_eval_size=200 --output_dir=/tmp/data/grace_synth

Writes <output_dir>/train.jsonl and/or eval.jsonl (read back with `grounding_jax.data.jsonl.read_examples`)
and prints a table per split: examples, answerable / unanswerable / unlabelled counts, answerable rate
over the labelled ones, mean passages, mean gold passages, mean prompt characters (the recipe's prompt,
chat-templated when --tokenizer is given). Streams the input, so memory stays flat on large files.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pathlib
import random
from typing import Any, Iterable, Iterator

from absl import app
from absl import flags
import tqdm

from grounding_jax import recipes
from grounding_jax.data import readers
from grounding_jax.data.jsonl import write_examples
from grounding_jax.data.schema import Example

_RECIPE = flags.DEFINE_enum("recipe", None, recipes.available_recipes(), "Recipe the data is for.")
_SOURCE = flags.DEFINE_string(
    "source", None, f"'synthetic' or a reader name: {', '.join(readers.available_readers())}.")
_TRAIN_INPUT = flags.DEFINE_string("train_input", None, "Raw file for the train split.")
_EVAL_INPUT = flags.DEFINE_string("eval_input", None, "Raw file for the eval split.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Where train.jsonl / eval.jsonl go.")
_TRAIN_LIMIT = flags.DEFINE_integer("train_limit", None, "Keep at most this many train examples.")
_EVAL_LIMIT = flags.DEFINE_integer("eval_limit", None, "Keep at most this many eval examples.")
_EVAL_FRACTION = flags.DEFINE_float(
    "eval_fraction", 0.0, "Without --eval_input: hold out this seeded fraction of train as eval.")
_SEED = flags.DEFINE_integer("seed", 0, "Seed for --eval_fraction and the synthetic generator.")
_READER_KWARGS = flags.DEFINE_list(
    "reader_kwargs", [], "Reader options as key=value (e.g. ndoc=5,missing_facts=skip,pages=html).")
_PROMPT_KWARGS = flags.DEFINE_list(
    "prompt_kwargs", [], "Recipe.render_prompt options as key=value (e.g. numbered=true for GRACE, "
    "template=few_shot_hotpotqa for a baseline prompt).")
_TOKENIZER = flags.DEFINE_string("tokenizer", None, "HF folder whose chat template wraps the prompts.")
_ENABLE_THINKING = flags.DEFINE_enum(
    "enable_thinking", "default", ["default", "on", "off"], "Qwen3 thinking switch for the chat template.")
_WITH_PROMPTS = flags.DEFINE_bool("with_prompts", False, "Store each rendered prompt under 'prompt'.")
_GRACE_CONSTRUCT = flags.DEFINE_bool(
    "grace_construct", False, "GRACE §3.1: train contexts from several retrievers, 50/50 sufficient / "
    "insufficient, deduplicated; eval contexts = one retriever's natural top-k (construct.py).")
_GRACE_RETRIEVERS = flags.DEFINE_list(
    "grace_retrievers", ["oracle", "bm25", "dense", "dense_rerank", "random"], "Train-time retrievers.")
_GRACE_K = flags.DEFINE_integer("grace_k", 5, "Train context size k (GRACE: 5).")
_GRACE_TEST_RETRIEVER = flags.DEFINE_string("grace_test_retriever", "dense", "Eval retriever (GRACE: dense).")
_GRACE_TEST_K = flags.DEFINE_integer("grace_test_k", 3, "Eval context size k (GRACE: 3).")
_SYN_TRAIN = flags.DEFINE_integer("synthetic_train_size", 1000, "Synthetic train examples.")
_SYN_EVAL = flags.DEFINE_integer("synthetic_eval_size", 200, "Synthetic eval examples.")
_SYN_ANSWERABLE = flags.DEFINE_float("synthetic_answerable_ratio", 0.5, "Synthetic answerable share.")
_SYN_PASSAGES = flags.DEFINE_integer("synthetic_num_passages", 5, "Synthetic context size k.")


def parse_kwargs(items: Iterable[str], flag: str) -> dict[str, Any]:
  """["ndoc=5", "pages=html", "numbered=true"] -> {"ndoc": 5, "pages": "html", "numbered": True}."""
  out: dict[str, Any] = {}
  for item in items:
    key, sep, raw = item.partition("=")
    if not sep or not key:
      raise app.UsageError(f"--{flag}: {item!r} is not key=value")
    value: Any = raw
    if raw.lower() in ("true", "false"):
      value = raw.lower() == "true"
    elif raw.lower() in ("none", "null"):
      value = None
    else:
      for cast in (int, float):
        try:
          value = cast(raw)
          break
        except ValueError:
          pass
    out[key] = value
  return out


@dataclasses.dataclass
class SplitStats:
  """Running counts for one split's summary row."""
  name: str
  examples: int = 0
  answerable: int = 0
  unanswerable: int = 0
  passages: int = 0
  gold: int = 0
  prompt_chars: int = 0

  def add(self, ex: Example, prompt: str) -> None:
    self.examples += 1
    self.answerable += ex.answerable is True
    self.unanswerable += ex.answerable is False
    self.passages += len(ex.passages)
    self.gold += len(ex.gold_passage_ids)
    self.prompt_chars += len(prompt)


def format_summary(rows: list[SplitStats]) -> str:
  """A fixed-width table, one line per split."""
  header = ("split", "examples", "answerable", "unanswerable", "unlabelled", "answerable rate",
            "mean passages", "mean gold", "mean prompt chars")
  lines = []
  for s in rows:
    n = max(s.examples, 1)
    labelled = s.answerable + s.unanswerable
    rate = f"{s.answerable / labelled:.3f}" if labelled else "n/a"
    lines.append((s.name, str(s.examples), str(s.answerable), str(s.unanswerable),
                  str(s.examples - labelled), rate, f"{s.passages / n:.2f}", f"{s.gold / n:.2f}",
                  f"{s.prompt_chars / n:.0f}"))
  widths = [max(len(h), *(len(r[i]) for r in lines)) if lines else len(h) for i, h in enumerate(header)]

  def fmt(row) -> str:  # split name left-aligned, numbers right-aligned
    return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))

  return "\n".join([fmt(header), fmt(tuple("-" * w for w in widths))] + [fmt(r) for r in lines])


def write_split(name: str, examples: Iterable[Example], out_path: pathlib.Path, *, recipe: str,
                tokenizer: Any, enable_thinking: bool | None, prompt_kwargs: dict[str, Any],
                with_prompts: bool, total: int | None = None) -> SplitStats:
  """Renders each example's prompt (for the statistics, and stored if asked) and writes the JSONL."""
  stats = SplitStats(name)
  rendered: list[str] = []

  def stream() -> Iterator[Example]:
    for ex in tqdm.tqdm(examples, desc=name, unit="ex", total=total):
      prompt = recipes.render_prompt(recipe, ex, tokenizer, enable_thinking=enable_thinking,
                                     **prompt_kwargs)
      stats.add(ex, prompt)
      if with_prompts:
        rendered.append(prompt)
      yield ex

  if with_prompts:  # write_examples takes the prompts as a list aligned with the rows
    write_examples(out_path, list(stream()), prompts=rendered)
  else:
    write_examples(out_path, stream())
  return stats


def _limited(it: Iterable[Example], limit: int | None) -> Iterator[Example]:
  for i, ex in enumerate(it):
    if limit is not None and i >= limit:
      return
    yield ex


def _sources(source: str) -> dict[str, tuple[Iterable[Example], int | None]]:
  """The examples of each split to build, with their expected count when known."""
  if source == "synthetic":
    from grounding_jax.data import synthetic  # the DATA-RETRIEVAL helper's generator; only needed here
    world = synthetic.build_world(_SEED.value)
    kw = dict(answerable_ratio=_SYN_ANSWERABLE.value, num_passages=_SYN_PASSAGES.value, world=world)
    splits = {}
    if _SYN_TRAIN.value:
      train = synthetic.generate_examples(_SYN_TRAIN.value, seed=_SEED.value, **kw)
      splits["train"] = (train, _SYN_TRAIN.value)
    if _SYN_EVAL.value:
      evals = synthetic.generate_examples(_SYN_EVAL.value, seed=_SEED.value + 1, **kw)
      splits["eval"] = (evals, _SYN_EVAL.value)
    return splits
  reader_kwargs = parse_kwargs(_READER_KWARGS.value, "reader_kwargs")
  if not _TRAIN_INPUT.value and not _EVAL_INPUT.value:
    raise app.UsageError(f"--source={source} needs --train_input and/or --eval_input")
  splits: dict[str, tuple[Iterable[Example], int | None]] = {}
  if _TRAIN_INPUT.value:
    train = _limited(readers.read_dataset(source, _TRAIN_INPUT.value, **reader_kwargs), _TRAIN_LIMIT.value)
    splits["train"] = (train, _TRAIN_LIMIT.value)
  if _EVAL_INPUT.value:
    evals = _limited(readers.read_dataset(source, _EVAL_INPUT.value, **reader_kwargs), _EVAL_LIMIT.value)
    splits["eval"] = (evals, _EVAL_LIMIT.value)
  elif _EVAL_FRACTION.value > 0:
    if not 0 < _EVAL_FRACTION.value < 1:
      raise app.UsageError(f"--eval_fraction={_EVAL_FRACTION.value}: must be in (0, 1)")
    pool = list(splits["train"][0])  # a held-out split needs the whole train set in memory
    random.Random(_SEED.value).shuffle(pool)
    n_eval = max(1, round(len(pool) * _EVAL_FRACTION.value))
    splits["train"], splits["eval"] = (pool[n_eval:], len(pool) - n_eval), (pool[:n_eval], n_eval)
  return splits


def _grace_construct(splits: dict[str, tuple[Iterable[Example], int | None]], source: str
                     ) -> dict[str, tuple[Iterable[Example], int | None]]:
  """Replaces each split's contexts by GRACE's construction (train) or natural top-k retrieval (eval)."""
  from grounding_jax.data import construct, retrieval  # the DATA-RETRIEVAL helper's modules
  # QASPER: any gold chunk suffices and the word-overlap gold test applies; HotpotQA-style: all gold.
  qasper = source == "qasper"
  chunking = dict(recall_threshold=0.5 if qasper else None, precision_threshold=0.5 if qasper else None)
  out = {}
  if "train" in splits:
    retrievers = {name: retrieval.make_retriever(name) for name in _GRACE_RETRIEVERS.value}
    train = construct.build_grace_dataset(list(splits["train"][0]), retrievers, k=_GRACE_K.value,
                                          all_gold=not qasper, dataset=source, seed=_SEED.value, **chunking)
    out["train"] = (train, len(train))
  if "eval" in splits:
    test_retriever = retrieval.make_retriever(_GRACE_TEST_RETRIEVER.value)
    evals = construct.build_test_set(list(splits["eval"][0]), test_retriever, k=_GRACE_TEST_K.value,
                                     all_gold=not qasper, **chunking)
    out["eval"] = (evals, len(evals))
  return out


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  for flag in (_RECIPE, _SOURCE, _OUTPUT_DIR):
    if flag.value is None:
      raise app.UsageError(f"--{flag.name} is required")
  tokenizer = None
  if _TOKENIZER.value:
    from grounding_jax.models.tokenizer import load_tokenizer
    tokenizer = load_tokenizer(os.path.expanduser(_TOKENIZER.value))
  thinking = {"default": None, "on": True, "off": False}[_ENABLE_THINKING.value]
  prompt_kwargs = parse_kwargs(_PROMPT_KWARGS.value, "prompt_kwargs")
  out_dir = pathlib.Path(_OUTPUT_DIR.value)
  out_dir.mkdir(parents=True, exist_ok=True)
  rows = []
  logging.getLogger("bm25s").setLevel(logging.WARNING)  # one "Building index" line per question otherwise
  splits = _sources(_SOURCE.value)
  if _GRACE_CONSTRUCT.value:
    splits = _grace_construct(splits, _SOURCE.value)
  for name, (examples, total) in splits.items():
    rows.append(write_split(name, examples, out_dir / f"{name}.jsonl", recipe=_RECIPE.value,
                            tokenizer=tokenizer, enable_thinking=thinking, prompt_kwargs=prompt_kwargs,
                            with_prompts=_WITH_PROMPTS.value, total=total))
  print(f"recipe={_RECIPE.value} source={_SOURCE.value} -> {out_dir}")
  print(format_summary(rows))


if __name__ == "__main__":
  app.run(main)
