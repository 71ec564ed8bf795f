"""A run's examples from its config: a training stage's data, and the held-out split it is evaluated on.

    train = load(config.stages[0].data)                     # kind "synthetic" or "jsonl"
    heldout = held_out(config.evals.data, config.evals.num_examples, [st.data for st in config.stages])

A data spec is a mapping (a ConfigDict section) with `kind`: "synthetic" (num_examples, seed,
answerable_ratio, optional unanswerable and num_passages: `synthetic.generate_examples`) or "jsonl"
(path: one Example per line, every row validated as it is read). The held-out split of a synthetic
run asks the training world's other questions (`synthetic.held_out_examples`), so it never holds an
item the run trains on; a "jsonl" held-out split is the file given (build_data.py writes test.jsonl
/ heldout.jsonl beside train.jsonl).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from grounding_jax.data import jsonl
from grounding_jax.data import synthetic
from grounding_jax.data.schema import Example

KINDS = ("synthetic", "jsonl")


def synthetic_options(spec: Mapping[str, Any]) -> dict[str, Any]:
  """A synthetic spec's optional context and world fields as `synthetic.generate_examples` takes them,
  each the generator's default when absent: `unanswerable` ("mentions"), `num_passages` (5 a
  context), `num_countries` (12: the world's size; people are 2x, companies 1x) and
  `withheld_share` (0: the share of facts a search corpus leaves out). The generator checks the
  values."""
  return dict(unanswerable=spec.get("unanswerable") or "mentions",
              num_passages=int(spec.get("num_passages") or 5),
              num_countries=int(spec.get("num_countries") or 12),
              withheld_share=float(spec.get("withheld_share") or 0.0))


def load(spec: Mapping[str, Any], *, limit: int | None = None) -> list[Example]:
  """The examples a data spec names (the first `limit` of a file when given)."""
  kind = spec["kind"]
  if kind == "synthetic":
    return synthetic.generate_examples(int(spec["num_examples"]), seed=int(spec["seed"]),
                                       answerable_ratio=float(spec["answerable_ratio"]),
                                       **synthetic_options(spec))
  if kind == "jsonl":
    if not spec.get("path"):
      raise ValueError("data.kind='jsonl' needs data.path (a JSONL file of Examples)")
    return list(jsonl.read_examples(spec["path"], limit=limit or None))
  raise ValueError(f"data.kind={kind!r}; expected one of {KINDS}")


# What validation while training asks (config.evals.split): the held-out questions, or a dev split.
EVAL_SPLITS = ("test", "dev")


def held_out(spec: Mapping[str, Any], num_examples: int, train_specs: Sequence[Mapping[str, Any]],
             *, exclude: Sequence[Example] = (), seed_offset: int = 0) -> list[Example]:
  """The evaluation split of `spec` (config.evals.data), at most `num_examples` (0 = all of a file).

  kind "synthetic": `num_examples` questions of the world the synthetic training stages use (the
  first one's seed and num_countries), none of them asked in any of those stages nor in `exclude`;
  `spec.seed` + `seed_offset` seeds the draw, `spec.answerable_ratio` fixes the answerable share and
  `spec.unanswerable` / `spec.num_passages` the contexts (as for `load`). A dev split is another
  draw: `exclude` the held-out split, `seed_offset=1`. kind "jsonl": the file's first `num_examples`.
  """
  if spec["kind"] != "synthetic":
    return load(spec, limit=num_examples)
  synthetic_train = [s for s in train_specs if s["kind"] == "synthetic"]
  train = [ex for s in synthetic_train for ex in load(s)]
  world_spec = synthetic_train[0] if synthetic_train else spec
  world = synthetic.build_world(int(world_spec["seed"]), synthetic_options(world_spec)["num_countries"])
  options = synthetic_options(spec)
  del options["num_countries"]  # the training world's size, above
  # The facts the training world's search corpus withholds are the world's, not the split's.
  options["withheld_share"] = synthetic_options(world_spec)["withheld_share"]
  return synthetic.held_out_examples(int(num_examples), train=[*train, *exclude], world=world,
                                     seed=int(spec["seed"]) + seed_offset,
                                     answerable_ratio=float(spec["answerable_ratio"]), **options)


def dev_split(spec: Mapping[str, Any], num_examples: int, train_specs: Sequence[Mapping[str, Any]],
              *, num_test: int | None = None) -> list[Example]:
  """A dev split of the synthetic world of `spec` (config.evals.data): `num_examples` questions that
  neither the training stages nor the held-out split (`held_out` with `num_test` questions, default
  `num_examples`) ask, another draw (seed + 1). Settings and checkpoints are chosen on it, never on
  the held-out questions. Raises ValueError for file data (pass the dev file as the data path)."""
  if spec["kind"] != "synthetic":
    raise ValueError(f"a dev split is drawn from the synthetic world; evals.data.kind="
                     f"{spec['kind']!r}: give the dev file as evals.data.path instead")
  test = held_out(spec, num_examples if num_test is None else num_test, train_specs)
  return held_out(spec, num_examples, train_specs, exclude=test, seed_offset=1)
