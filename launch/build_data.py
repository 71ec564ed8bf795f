r"""Builds a recipe's data splits (JSONL, one `Example` per line) and a manifest from dataset files.

  # GRACE on HotpotQA (§4.1): the authors' seeded 2,000 train / 500 test questions; train contexts
  # from 5 retrievers × 50/50 sufficient / insufficient, test = dense top-3
  python launch/build_data.py --preset=grace_hotpotqa --train_input=hotpot_train_v1.1.json \
      --eval_input=hotpot_dev_distractor_v1.json --output_dir=/tmp/data/grace_hotpotqa
  #   GRACE's own retrievers and chunks: add --dense_encoder=/ckpt/Qwen3-Embedding-0.6B
  #   --reranker=/ckpt/bge-reranker-v2-m3 --chunk_tokenizer=/ckpt/Qwen3-Embedding-0.6B

  # ARENA: 10k HotpotQA + 10k 2Wiki + 5k MuSiQue train (500 held out), 500 dev each as test
  python launch/build_data.py --preset=arena --input=hotpotqa:train=hotpot_train_v1.1.json \
      --input=hotpotqa:eval=hotpot_dev_distractor_v1.json --input=2wikimultihopqa:train=train.json \
      --input=2wikimultihopqa:eval=dev.json --input=musique:train=musique_ans_v1.0_train.jsonl \
      --input=musique:eval=musique_ans_v1.0_dev.jsonl --output_dir=/tmp/data/arena

  # Ground-GRPO: stage 1 = 100 answerable, stage 2 = 1,000 (half unanswerable) per dataset, disjoint
  python launch/build_data.py --preset=trust --input=asqa:train=asqa_train.json \
      --input=qampari:train=qampari_train.json --input=eli5:train=eli5_train.json \
      --reader_kwargs=ndoc=5 --output_dir=/tmp/data/trust

  # Any mix: --draw=SPLIT=SOURCE:ROLE[:COUNT[:ANSWERABLE]] (repeatable), or one source by flags
  python launch/build_data.py --recipe=arena --source=hotpotqa --train_input=hotpot_train_v1.1.json \
      --train_limit=1000 --eval_fraction=0.1 --output_dir=/tmp/data/arena_small

  # The offline synthetic benchmark (seconds)
  python launch/build_data.py --recipe=grace --source=synthetic --synthetic_train_size=2000 \
      --synthetic_eval_size=200 --output_dir=/tmp/data/grace_synth

Writes <output_dir>/<split>.jsonl per split (read back with `grounding_jax.data.jsonl.read_examples`)
and <output_dir>/manifest.json: the command, preset, seed, git commit, every flag, each input file
(size, sha256), each draw (rows, requested, drawn, answerable, shortfall), the GRACE construction
settings and counts, and per-split counts (also per dataset). Prints a table per split: examples,
answerable / unanswerable / unlabelled, answerable rate, mean passages, mean gold passages, mean prompt
characters (the recipe's prompt, chat-templated when --tokenizer is given).

Sampling is seeded (grounding_jax/data/mixture.py): a draw of n rows is `random.Random(seed).sample`
over the file's rows — the GRACE authors' exact procedure — never the first n. Each file is streamed
twice (labels, then the drawn rows), so memory holds the sample, not the file; a split that is a whole
file (no count) is streamed through.
"""

from __future__ import annotations

import json
import logging
import os
import pathlib
import subprocess
import sys
from typing import Any, Iterable, Iterator

from absl import app
from absl import flags
import tqdm

from grounding_jax import recipes
from grounding_jax.data import construct, mixture, readers, retrieval, synthetic
from grounding_jax.data.jsonl import write_examples
from grounding_jax.data.schema import Example
from grounding_jax.data.split_summary import SplitStats, format_summary
from grounding_jax.models import embedding, reranker
from grounding_jax.models.tokenizer import load_tokenizer


_PRESET = flags.DEFINE_enum("preset", None, list(recipes.data_presets()),
                            "A paper's data mix (its recipe's data_presets, grounding_jax/recipes/).")
_RECIPE = flags.DEFINE_enum("recipe", None, recipes.available_recipes(), "Recipe the data is for.")
_SOURCE = flags.DEFINE_string(
    "source", None, f"'synthetic' or a reader name: {', '.join(readers.available_readers())}.")
_INPUT = flags.DEFINE_multi_string("input", [], "SOURCE:ROLE=PATH, e.g. hotpotqa:train=file.json.")
_TRAIN_INPUT = flags.DEFINE_string("train_input", None, "= --input=SOURCE:train=PATH.")
_EVAL_INPUT = flags.DEFINE_string("eval_input", None, "= --input=SOURCE:eval=PATH.")
_DRAW = flags.DEFINE_multi_string(
    "draw", [], "SPLIT=SOURCE:ROLE[:COUNT[:ANSWERABLE]] (replaces the preset's draws).")
_HOLDOUT = flags.DEFINE_string("holdout", None, "SPLIT=FROM:COUNT, e.g. heldout=train:500.")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "Where <split>.jsonl and manifest.json go.")
_TRAIN_LIMIT = flags.DEFINE_integer("train_limit", None, "Seeded sample of this many train rows.")
_EVAL_LIMIT = flags.DEFINE_integer("eval_limit", None, "Seeded sample of this many eval rows.")
_EVAL_FRACTION = flags.DEFINE_float(
    "eval_fraction", 0.0, "Without --eval_input: hold out this seeded fraction of train as eval.")
_SEED = flags.DEFINE_integer("seed", None, "Sampling seed (default: the preset's, else 0).")
_READER_KWARGS = flags.DEFINE_list(
    "reader_kwargs", [], "Reader options as key=value (e.g. ndoc=5,missing_facts=skip,pages=html).")
_PROMPT_KWARGS = flags.DEFINE_list(
    "prompt_kwargs", [], "Recipe.render_prompt options as key=value (e.g. numbered=true for GRACE, "
    "template=few_shot_hotpotqa for a baseline prompt).")
_TOKENIZER = flags.DEFINE_string(
    "tokenizer", None, "HF folder whose chat template wraps the prompts; also the chunking tokenizer "
    "unless --chunk_tokenizer is given.")
_ENABLE_THINKING = flags.DEFINE_enum(
    "enable_thinking", "default", ["default", "on", "off"], "Qwen3 thinking switch for the chat template.")
_WITH_PROMPTS = flags.DEFINE_bool("with_prompts", False, "Store each rendered prompt under 'prompt'.")
_GRACE_CONSTRUCT = flags.DEFINE_bool(
    "grace_construct", None, "GRACE §3.1: train contexts from several retrievers, 50/50 sufficient / "
    "insufficient, deduplicated; eval/test contexts = one retriever's natural top-k (construct.py).")
_GRACE_MODE = flags.DEFINE_enum(
    "grace_mode", construct.GRACE_MODES[0], list(construct.GRACE_MODES), "Train construction: grace, or Table 5's "
    "ablations naive (gold only / random distractors) and wo_ab (natural top-k, no balancing).")
_GRACE_RETRIEVERS = flags.DEFINE_list(
    "grace_retrievers", ["oracle", "bm25", "dense", "dense_rerank", "random"], "Train-time retrievers.")
_GRACE_K = flags.DEFINE_integer("grace_k", 5, "Train context size k (GRACE: 5).")
_GRACE_TEST_RETRIEVER = flags.DEFINE_string("grace_test_retriever", "dense", "Eval retriever (GRACE: dense).")
_GRACE_TEST_K = flags.DEFINE_integer("grace_test_k", 3, "Eval context size k (GRACE: 3).")
_DENSE_ENCODER = flags.DEFINE_string(
    "dense_encoder", None, "HF folder of the dense retriever: Qwen3-Embedding-0.6B (GRACE) or a BERT "
    "sentence encoder; default all-MiniLM-L6-v2 (offline).")
_DENSE_QUERY_PROMPT = flags.DEFINE_string(
    "dense_query_prompt", None, "Text before each query for a Qwen3 embedder; default the model's "
    "own instruction, '' for none (the GRACE authors' vLLM calls).")
_RERANKER = flags.DEFINE_string(
    "reranker", None, "HF folder of a cross-encoder for dense_rerank (GRACE: bge-reranker-v2-m3); "
    "default: a rank fusion of dense and BM25 over the dense candidates (offline stand-in).")
_CHUNK_TOKENIZER = flags.DEFINE_string(
    "chunk_tokenizer", None, "HF folder whose tokens GRACE chunks count (GRACE: Qwen3-Embedding's); "
    "default --tokenizer, else whitespace words.")
_CHUNK_TOKENS = flags.DEFINE_integer("chunk_tokens", 512, "GRACE chunk length in tokens.")
_CHUNK_OVERLAP = flags.DEFINE_integer("chunk_overlap", 64, "GRACE chunk overlap in tokens.")
_SYN_TRAIN = flags.DEFINE_integer("synthetic_train_size", 1000, "Synthetic train examples.")
_SYN_EVAL = flags.DEFINE_integer("synthetic_eval_size", 200, "Synthetic eval examples.")
_SYN_ANSWERABLE = flags.DEFINE_float("synthetic_answerable_ratio", 0.5, "Synthetic answerable share.")
_SYN_PASSAGES = flags.DEFINE_integer("synthetic_num_passages", 5, "Synthetic context size k.")

_DENSE_KINDS = ("dense", "dense_rerank", "bm25_rerank")


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


def _plan(preset: mixture.Preset | None
          ) -> tuple[dict[tuple[str, str], str], list[mixture.Draw], mixture.Holdout | None]:
  """Input files, draws and hold-out from the preset and the flags (flags win)."""
  files: dict[tuple[str, str], str] = {}
  for item in _INPUT.value:
    key, sep, path = item.partition("=")
    source, _, role = key.partition(":")
    if not sep or not source or not role or not path:
      raise app.UsageError(f"--input={item!r}: expected SOURCE:ROLE=PATH, e.g. hotpotqa:train=f.json")
    files[(source, role)] = path
  try:
    specs = _DRAW.value or (list(preset.draws) if preset else [])
    draws = [mixture.Draw.parse(s) for s in specs]
  except ValueError as e:
    raise app.UsageError(str(e)) from None
  sources = sorted({d.source for d in draws}) or ([_SOURCE.value] if _SOURCE.value else [])
  if _TRAIN_INPUT.value or _EVAL_INPUT.value:
    if len(sources) != 1:
      raise app.UsageError(f"--train_input / --eval_input need exactly one source (--source, or a "
                           f"one-dataset preset); this build reads {sources or 'none'}: use --input.")
    for role, flag in (("train", _TRAIN_INPUT), ("eval", _EVAL_INPUT)):
      if flag.value:
        files[(sources[0], role)] = flag.value
  if draws and (_TRAIN_LIMIT.value is not None or _EVAL_LIMIT.value is not None):
    raise app.UsageError("--train_limit / --eval_limit set the counts of a one-source build; with "
                         "--preset or --draw, give counts in --draw=SPLIT=SOURCE:ROLE:COUNT.")
  if not draws:  # one source by flags: a seeded sample of --*_limit rows of each file given
    if not files:
      raise app.UsageError(f"--source={_SOURCE.value} needs --train_input and/or --eval_input")
    limits = {"train": _TRAIN_LIMIT.value, "eval": _EVAL_LIMIT.value}
    draws = [mixture.Draw(role, source, role, limits.get(role)) for source, role in files]
  holdout = None
  if _HOLDOUT.value or (preset and preset.holdout and not _DRAW.value):
    spec = _HOLDOUT.value or preset.holdout
    split, _, rest = spec.partition("=")
    source, _, count = rest.partition(":")
    if not split or not source or not count.isdigit():
      raise app.UsageError(f"--holdout={spec!r}: expected SPLIT=FROM:COUNT, e.g. heldout=train:500")
    holdout = mixture.Holdout(split, source, count=int(count))
  elif _EVAL_FRACTION.value > 0 and not any(d.split == "eval" for d in draws):
    if not 0 < _EVAL_FRACTION.value < 1:
      raise app.UsageError(f"--eval_fraction={_EVAL_FRACTION.value}: must be in (0, 1)")
    holdout = mixture.Holdout("eval", "train", fraction=_EVAL_FRACTION.value)
  return files, draws, holdout


def _synthetic(seed: int) -> mixture.Mixture:
  world = synthetic.build_world(seed)
  kw = dict(answerable_ratio=_SYN_ANSWERABLE.value, num_passages=_SYN_PASSAGES.value, world=world)
  splits, sizes = {}, {}
  for name, size, split_seed in (("train", _SYN_TRAIN.value, seed), ("eval", _SYN_EVAL.value, seed + 1)):
    if size:
      splits[name], sizes[name] = synthetic.generate_examples(size, seed=split_seed, **kw), size
  return mixture.Mixture(splits, sizes, [{"draw": f"{n}=synthetic", "drawn": s} for n, s in sizes.items()])


def _is_test_split(name: str) -> bool:
  return name.startswith(("eval", "test"))


def _retrievers(names: Iterable[str]) -> tuple[dict[str, retrieval.Retriever], dict[str, Any]]:
  """GRACE's retrievers by name, built once; the dense encoder and reranker load only if used."""
  names = list(dict.fromkeys(names))
  info: dict[str, Any] = {"dense_encoder": _DENSE_ENCODER.value or "all-MiniLM-L6-v2 (default)",
                          "dense_query_prompt": _DENSE_QUERY_PROMPT.value, "reranker": None}
  encoder = None
  if any(n in _DENSE_KINDS for n in names):
    encoder = embedding.load_text_encoder(_DENSE_ENCODER.value, query_prompt=_DENSE_QUERY_PROMPT.value)
    info["dense_query_prompt"] = getattr(encoder, "query_prompt", "")
  options: dict[str, Any] = {}
  if "dense_rerank" in names:
    if _RERANKER.value:
      options["rerank_fn"] = retrieval.cross_encoder_rerank_fn(reranker.CrossEncoder(_RERANKER.value))
      info["reranker"] = _RERANKER.value
    else:  # docs/recipes/grace.md deviations: no cross-encoder offline; fuse the dense and BM25 orders instead
      options["rerank_fn"] = retrieval.fusion_rerank_fn(encoder)
      info["reranker"] = "rank fusion of dense and BM25 (offline stand-in; pass --reranker)"
      print("dense_rerank: no --reranker folder, so the dense top k + 5 are reranked by a rank fusion "
            "of the dense and BM25 orders (stand-in for GRACE's bge-reranker-v2-m3)")
  built = {n: retrieval.make_retriever(n, encoder=encoder,
                                       **(options if n == "dense_rerank" else {})) for n in names}
  return built, info


def _grace_construct(mix: mixture.Mixture, sources: list[str], seed: int
                     ) -> dict[str, Any]:
  """Replaces each split's contexts: GRACE's construction for training splits, the test retriever's
  natural top-k for eval/test splits. Returns the manifest's construction record."""
  # QASPER: any gold chunk suffices and the word-overlap gold test applies; HotpotQA-style: all gold.
  qasper = sources == ["qasper"]
  dataset = "+".join(sources) or "synthetic"
  chunk_folder = _CHUNK_TOKENIZER.value or _TOKENIZER.value
  chunking = dict(recall_threshold=0.5 if qasper else None, precision_threshold=0.5 if qasper else None,
                  tokenizer=load_tokenizer(os.path.expanduser(chunk_folder)) if chunk_folder else None,
                  max_tokens=_CHUNK_TOKENS.value, overlap=_CHUNK_OVERLAP.value)
  train_names = [] if _GRACE_MODE.value in construct.MODES_WITHOUT_RETRIEVERS else _GRACE_RETRIEVERS.value
  has_test = any(_is_test_split(n) for n in mix.splits)
  retrievers, info = _retrievers(train_names + ([_GRACE_TEST_RETRIEVER.value] if has_test else []))
  record = {"mode": _GRACE_MODE.value, "retrievers": train_names, "k": _GRACE_K.value,
            "test_retriever": _GRACE_TEST_RETRIEVER.value, "test_k": _GRACE_TEST_K.value,
            "chunking": {"tokenizer": chunk_folder or "whitespace words",
                         "tokens": _CHUNK_TOKENS.value, "overlap": _CHUNK_OVERLAP.value},
            **info, "per_retriever": {}}
  for name, examples in list(mix.splits.items()):
    items = list(examples)
    if _is_test_split(name):
      out = construct.build_test_set(items, retrievers[_GRACE_TEST_RETRIEVER.value],
                                     k=_GRACE_TEST_K.value, all_gold=not qasper, **chunking)
    else:
      out = construct.build_grace_dataset(
          items, {n: retrievers[n] for n in train_names}, k=_GRACE_K.value, all_gold=not qasper,
          dataset=dataset, seed=seed, mode=_GRACE_MODE.value, **chunking)
      record["per_retriever"][name] = {r: dict(sorted(c.items()))
                                       for r, c in sorted(construct.summarize(out).items())}
    mix.splits[name], mix.sizes[name] = out, len(out)
  return record


def _git_commit() -> dict[str, Any] | None:
  root = pathlib.Path(__file__).resolve().parents[1]
  try:
    commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=True, timeout=10).stdout.strip()
    dirty = subprocess.run(["git", "-C", str(root), "status", "--porcelain"], capture_output=True,
                           text=True, check=True, timeout=10).stdout.strip()
  except (OSError, subprocess.SubprocessError):
    return None
  return {"commit": commit, "dirty": bool(dirty)}


def main(argv):
  if len(argv) > 1:
    raise app.UsageError(f"unexpected arguments: {argv[1:]}")
  preset = recipes.data_presets()[_PRESET.value] if _PRESET.value else None
  if preset and _RECIPE.value and _RECIPE.value != preset.recipe:
    raise app.UsageError(f"--preset={_PRESET.value} builds {preset.recipe} data, not "
                         f"--recipe={_RECIPE.value}; drop one of them.")
  recipe = preset.recipe if preset else _RECIPE.value
  if recipe is None or _OUTPUT_DIR.value is None:
    raise app.UsageError("--output_dir and --recipe (or --preset) are required")
  if not preset and _SOURCE.value is None and not _DRAW.value:
    raise app.UsageError("--source (or --preset, or --draw) is required")
  seed = _SEED.value if _SEED.value is not None else (preset.seed if preset else 0)
  grace = _GRACE_CONSTRUCT.value if _GRACE_CONSTRUCT.value is not None else bool(
      preset and preset.grace_construct)
  tokenizer = None
  if _TOKENIZER.value:
    tokenizer = load_tokenizer(os.path.expanduser(_TOKENIZER.value))
  thinking = {"default": None, "on": True, "off": False}[_ENABLE_THINKING.value]
  prompt_kwargs = parse_kwargs(_PROMPT_KWARGS.value, "prompt_kwargs")
  out_dir = pathlib.Path(_OUTPUT_DIR.value)
  out_dir.mkdir(parents=True, exist_ok=True)
  logging.getLogger("bm25s").setLevel(logging.WARNING)  # one "Building index" line per question otherwise

  files: dict[tuple[str, str], str] = {}
  if _SOURCE.value == "synthetic" and not preset:
    mix, sources = _synthetic(seed), []
  else:
    files, draws, holdout = _plan(preset)
    try:
      mix = mixture.build_mixture(draws, files, seed=seed, holdout=holdout,
                                  reader_kwargs=parse_kwargs(_READER_KWARGS.value, "reader_kwargs"))
    except ValueError as e:
      raise app.UsageError(str(e)) from None
    sources = sorted({d.source for d in draws})
    for r in mix.draws:
      if r.get("shortfall"):
        print(f"WARNING: draw {r['draw']} asked for {r['requested']} rows but {r['file']} offers "
              f"{r['drawn']} (answerable {r['drawn_answerable']}); all of them were taken.")
  construction = _grace_construct(mix, sources, seed) if grace else None

  rows = []
  for name, examples in mix.splits.items():
    rows.append(write_split(name, examples, out_dir / f"{name}.jsonl", recipe=recipe,
                            tokenizer=tokenizer, enable_thinking=thinking, prompt_kwargs=prompt_kwargs,
                            with_prompts=_WITH_PROMPTS.value, total=mix.sizes.get(name)))
  manifest = {
      "command": [os.path.basename(sys.executable)] + sys.argv, "preset": _PRESET.value,
      "recipe": recipe, "seed": seed, "git": _git_commit(),
      "inputs": {f"{s}:{r}": mixture.file_fingerprint(p) for (s, r), p in files.items()},
      "draws": mix.draws, "holdout": mix.holdout, "grace_construction": construction,
      "splits": {s.name: s.manifest() for s in rows},
      "flags": {f.name: f.value for f in flags.FLAGS.get_flags_for_module(sys.argv[0])},
  }
  (out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
  print(f"recipe={recipe} preset={_PRESET.value} seed={seed} -> {out_dir} (manifest.json)")
  print(format_summary(rows))


if __name__ == "__main__":
  app.run(main)
