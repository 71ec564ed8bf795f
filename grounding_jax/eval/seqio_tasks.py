"""seqio Tasks, one per dataset × recipe, for users of the T5X / seqio tool chain (optional extra).

A task's source yields serialised `Example`s; its preprocessor renders the recipe's prompt
(`get_recipe(name).render_prompt`; features "inputs" = prompt text, "targets" = first gold answer); its
postprocessor extracts the answer the output states (`Recipe.answer`, the paper evaluator's rule); its
metric reports SQuAD EM / F1 (`grounding_jax.text`). Features stay strings: tokenisation belongs to
the model side.

The trainer never needs this module — it reads plain Python iterators of `Example`s — so TensorFlow
is only imported here. Install with `pip install -e '.[seqio]'`.

Usage:
  from grounding_jax.eval import seqio_tasks
  seqio_tasks.register_synthetic_tasks()                # gj_synthetic_<recipe> for every recipe
  seqio_tasks.register_dataset_tasks("hotpotqa", {"validation": "hotpot_dev_distractor_v1.json"})
  seqio_tasks.register_tfds_tasks("my_qa:1.0.0", data_dir, to_example)   # a locally prepared tfds set
  ds = seqio.get_mixture_or_task("gj_synthetic_grace").get_dataset(None, split="validation")
"""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Callable, Iterable, Mapping, Sequence

try:
  import seqio
  import tensorflow as tf
except ImportError as e:  # pragma: no cover - exercised only without the extra
  raise ImportError(
      "grounding_jax.data.seqio_tasks needs the optional `seqio` extra (seqio, tensorflow, "
      "tensorflow-datasets): `pip install -e '.[seqio]'`. Training does not need it; the trainer "
      f"reads plain Python iterators. Original error: {e}") from e

from grounding_jax import recipes
from grounding_jax import text as text_lib
from grounding_jax.data import readers
from grounding_jax.data import schema
from grounding_jax.data import synthetic
from grounding_jax.data.schema import Example
_STRING_FEATURE = dict(vocabulary=seqio.PassThroughVocabulary(size=0), add_eos=False,
                       dtype=tf.string, rank=0)
OUTPUT_FEATURES = {"inputs": seqio.Feature(**_STRING_FEATURE),
                   "targets": seqio.Feature(**_STRING_FEATURE)}
_SOURCE_SIGNATURE = {"id": tf.TensorSpec([], tf.string), "example": tf.TensorSpec([], tf.string)}


def _serialise(example: Example) -> dict[str, str]:
  return {"id": example.id, "example": json.dumps(schema.example_to_dict(example), default=str)}


def _deserialise(blob: bytes | str) -> Example:
  text = blob.decode("utf-8") if isinstance(blob, bytes) else blob
  return schema.example_from_dict(json.loads(text), source="seqio example")


def _dataset_from(make_examples: Callable[[], Iterable[Example]]) -> tf.data.Dataset:
  return tf.data.Dataset.from_generator(lambda: map(_serialise, make_examples()),
                                        output_signature=_SOURCE_SIGNATURE)


def examples_source(splits: Mapping[str, Callable[[], Iterable[Example]]]) -> seqio.DataSource:
  """A seqio source over Python `Example` iterables: split name -> zero-arg callable."""
  splits = dict(splits)

  def dataset_fn(split: str, shuffle_files: bool, seed: int | None = None) -> tf.data.Dataset:
    del shuffle_files, seed  # one in-memory stream per split; seqio shuffles downstream if asked
    return _dataset_from(splits[split])

  return seqio.FunctionDataSource(dataset_fn, splits=list(splits))


def tfds_source(name: str, data_dir: str, to_example: Callable[[Mapping[str, Any]], Example], *,
                splits: Sequence[str] = ("train", "validation")) -> seqio.DataSource:
  """Reads a tfds dataset already prepared under `data_dir` (never downloads).

  `to_example` maps one record (numpy values; strings as bytes) to an `Example`.
  """
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

  def dataset_fn(split: str, shuffle_files: bool, seed: int | None = None) -> tf.data.Dataset:
    del seed
    try:
      builder = tfds.builder(name, data_dir=data_dir)
    except Exception as e:  # tfds raises DatasetNotFoundError and friends
      raise FileNotFoundError(f"tfds dataset {name!r} is not available under {data_dir!r}: {e}. "
                              "Prepare it locally first (tfds build / download_and_prepare); "
                              "seqio_tasks never downloads.") from e
    if not tf.io.gfile.exists(builder.data_path) or not builder.info.splits:
      raise FileNotFoundError(f"tfds dataset {name!r} is not prepared under {data_dir!r} "
                              f"(looked in {builder.data_path}). Prepare it locally first; "
                              "seqio_tasks never downloads.")
    records = builder.as_dataset(split=split, shuffle_files=shuffle_files)
    return _dataset_from(lambda: (to_example(r) for r in tfds.as_numpy(records)))

  return seqio.FunctionDataSource(dataset_fn, splits=list(splits))


def render_prompts(dataset: tf.data.Dataset, *, recipe: str, tokenizer=None,
                   render_kwargs: Mapping[str, Any] | None = None) -> tf.data.Dataset:
  """seqio preprocessor: adds "inputs" (the recipe's prompt) and "targets" (first gold answer)."""
  kwargs = dict(render_kwargs or {})
  rendering = recipes.get_recipe(recipe)

  def render(blob: bytes) -> tuple[bytes, bytes]:
    ex = _deserialise(blob)
    prompt = rendering.render_prompt(ex, tokenizer, **kwargs)
    return prompt.encode("utf-8"), (ex.answers[0] if ex.answers else "").encode("utf-8")

  def add_features(row):
    inputs, targets = tf.numpy_function(render, [row["example"]], (tf.string, tf.string))
    return {**row, "inputs": tf.ensure_shape(inputs, []), "targets": tf.ensure_shape(targets, [])}

  return dataset.map(add_features, num_parallel_calls=1, deterministic=True)


def postprocess(output: Any, example: Mapping[str, Any] | None = None, is_target: bool = False, *,
                recipe: str) -> Any:
  """Targets -> {"answers", "answerable"} from the serialised example; outputs -> extracted answer."""
  if is_target:
    ex = _deserialise(example["example"])
    return {"answers": list(ex.answers), "answerable": ex.answerable}
  text = output.decode("utf-8") if isinstance(output, bytes) else str(output)
  return recipes.get_recipe(recipe).answer(text)


def answer_metrics(targets: Sequence[Mapping[str, Any]], predictions: Sequence[str]) -> dict[str, float]:
  """SQuAD EM / F1 (×100) over all examples and over the answerable ones."""
  em = [text_lib.exact_match(p, t["answers"]) for t, p in zip(targets, predictions)]
  f1 = [text_lib.token_f1(p, t["answers"]) for t, p in zip(targets, predictions)]
  keep = [i for i, t in enumerate(targets) if t["answerable"] is not False]
  mean = lambda xs: 100.0 * sum(xs) / len(xs) if xs else 0.0
  return {"exact_match": mean(em), "f1": mean(f1),
          "answerable_exact_match": mean([em[i] for i in keep]),
          "answerable_f1": mean([f1[i] for i in keep])}


def register_task(name: str, source: seqio.DataSource, recipe: str, *, tokenizer=None,
                  render_kwargs: Mapping[str, Any] | None = None) -> seqio.Task:
  """Registers (replacing any same-named task) and returns a seqio Task for one recipe."""
  recipes.get_recipe(recipe)  # an unknown name fails here, naming the recipes
  if name in seqio.TaskRegistry.names():
    seqio.TaskRegistry.remove(name)
  return seqio.TaskRegistry.add(
      name, source=source, output_features=OUTPUT_FEATURES,
      preprocessors=[functools.partial(render_prompts, recipe=recipe, tokenizer=tokenizer,
                                       render_kwargs=render_kwargs)],
      postprocess_fn=functools.partial(postprocess, recipe=recipe),
      metric_fns=[answer_metrics], shuffle_buffer_size=None)


def register_synthetic_tasks(names: Sequence[str] | None = None, *, num_train: int = 1000,
                             num_validation: int = 200, seed: int = 0, tokenizer=None,
                             **generator_kwargs) -> list[str]:
  """`gj_synthetic_{recipe}` over the synthetic benchmark (train and validation share a world), for
  the recipes `names` (default: all)."""
  world = synthetic.build_world(seed, generator_kwargs.pop("num_countries", 12))
  source = examples_source({
      "train": lambda: synthetic.generate_examples(num_train, seed=seed, world=world,
                                                   **generator_kwargs),
      "validation": lambda: synthetic.generate_examples(num_validation, seed=seed + 1, world=world,
                                                        **generator_kwargs),
  })
  return _register_all(names, "gj_synthetic", source, tokenizer)


def _register_all(names: Sequence[str] | None, prefix: str, source: seqio.DataSource,
                  tokenizer) -> list[str]:
  tasks = []
  for recipe in names or recipes.available_recipes():
    tasks.append(f"{prefix}_{recipe}")
    register_task(tasks[-1], source, recipe, tokenizer=tokenizer)
  return tasks


def register_dataset_tasks(dataset: str, files: Mapping[str, str], names: Sequence[str] | None = None,
                           *, tokenizer=None, **reader_kwargs) -> list[str]:
  """`gj_{dataset}_{recipe}` reading official files with `data.readers` (split -> path)."""
  readers.get_reader(dataset)  # fail early on an unknown dataset name
  source = examples_source({split: functools.partial(readers.read_dataset, dataset, path,
                                                     **reader_kwargs)
                            for split, path in files.items()})
  return _register_all(names, f"gj_{dataset}", source, tokenizer)


def register_tfds_tasks(tfds_name: str, data_dir: str,
                        to_example: Callable[[Mapping[str, Any]], Example],
                        names: Sequence[str] | None = None, *,
                        splits: Sequence[str] = ("train", "validation"), tokenizer=None) -> list[str]:
  """`gj_{tfds base name}_{recipe}` over a tfds dataset prepared under `data_dir`."""
  source = tfds_source(tfds_name, data_dir, to_example, splits=splits)
  base = re.sub(r"\W+", "_", tfds_name.split(":")[0].split("/")[0])
  return _register_all(names, f"gj_{base}", source, tokenizer)
