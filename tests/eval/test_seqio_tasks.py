"""seqio tasks: prompts from the preprocessor, answers from the postprocessor, EM/F1 metrics, tfds."""

import pytest

seqio = pytest.importorskip("seqio", reason="the optional `seqio` extra is not installed")
tf = pytest.importorskip("tensorflow", reason="the optional `seqio` extra is not installed")

from grounding_jax.data import synthetic  # noqa: E402
from grounding_jax.eval import seqio_tasks  # noqa: E402
from grounding_jax.recipes import get_recipe  # noqa: E402
from grounding_jax.data.schema import Example, Passage  # noqa: E402


def _rows(task_name, split="validation", n=None):
  task = seqio.get_mixture_or_task(task_name)
  ds = task.get_dataset(sequence_length=None, split=split, shuffle=False)
  rows = list(ds.as_numpy_iterator())
  return task, rows[:n] if n else rows


@pytest.fixture(scope="module")
def grace_task():
  names = seqio_tasks.register_synthetic_tasks(("grace", "truthrl"), num_train=8, num_validation=6,
                                               seed=2)
  assert names == ["gj_synthetic_grace", "gj_synthetic_truthrl"]
  return names


def test_preprocessor_renders_the_recipe_prompt(grace_task):
  _, rows = _rows("gj_synthetic_grace")
  world = synthetic.build_world(2)
  want = synthetic.generate_examples(6, seed=3, world=world)
  assert len(rows) == 6
  for row, ex in zip(rows, want):
    assert row["inputs"].decode() == get_recipe("grace").render_prompt(ex)
    assert ex.question in row["inputs"].decode()
    assert row["targets"].decode() == ex.answers[0]


def test_metrics_score_a_correct_reader_high_and_a_wrong_one_low(grace_task):
  for name, fmt in (("gj_synthetic_grace", "<evidence>e</evidence><answer>{}</answer>"),
                    ("gj_synthetic_truthrl", "<think>t</think> \\boxed{{{}}}")):
    task, rows = _rows(name)
    targets = [task.postprocess_fn(r["targets"], example=r, is_target=True) for r in rows]
    good = [task.postprocess_fn(fmt.format(t["answers"][-1]).encode(), example=r)
            for t, r in zip(targets, rows)]
    bad = [task.postprocess_fn(fmt.format("Nowhere").encode(), example=r) for r in rows]
    (metric,) = task.metric_fns
    assert metric(targets, good)["exact_match"] == 100.0
    assert metric(targets, bad) == {"exact_match": 0.0, "f1": 0.0, "answerable_exact_match": 0.0,
                                    "answerable_f1": 0.0}


def test_answer_extraction_per_recipe():
  post = lambda recipe, text: seqio_tasks.postprocess(text.encode(), recipe=recipe)
  assert post("grace", "<think><answer>x</answer></think><llm>m</llm><answer> Orsk </answer>") == " Orsk "
  assert post("grace", "just Orsk") == "just Orsk"  # GRACE's evaluator scores untagged text whole
  assert post("grace", "<answer>Orsk</answer><answer>Tver</answer>") == "Orsk"  # the first block
  assert post("lear", "<answer>Orsk</answer><answer>Tver</answer>") == "Orsk"
  assert post("truthrl", "\\boxed{Orsk}") == "Orsk"
  assert post("arena", "<relevance>[1]</relevance><analysis>a</analysis><answer>Orsk</answer>") == "Orsk"


def test_reads_a_locally_prepared_tfds_dataset(tmp_path):
  import tensorflow_datasets as tfds

  class TinyQa(tfds.core.GeneratorBasedBuilder):
    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
      return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict({
          "question": tfds.features.Text(), "context": tfds.features.Text(),
          "answer": tfds.features.Text()}))

    def _split_generators(self, dl_manager):
      return {"validation": self._generate_examples()}

    def _generate_examples(self):
      yield 0, {"question": "What is the capital of Veltria?",
                "context": "The capital of Veltria is Orsk.", "answer": "Orsk"}

  TinyQa(data_dir=str(tmp_path)).download_and_prepare()
  to_example = lambda r: Example(r["question"].decode(), passages=(Passage(r["context"].decode()),),
                                 answers=(r["answer"].decode(),), answerable=True)
  names = seqio_tasks.register_tfds_tasks("tiny_qa:1.0.0", str(tmp_path), to_example, ("trust_stage1",),
                                          splits=("validation",))
  _, rows = _rows(names[0])
  assert len(rows) == 1 and "The capital of Veltria is Orsk." in rows[0]["inputs"].decode()

  missing = seqio_tasks.register_tfds_tasks("tiny_qa:1.0.0", str(tmp_path / "empty"), to_example,
                                            ("trust_stage1",), splits=("validation",))
  with pytest.raises(FileNotFoundError, match="never downloads"):
    _rows(missing[0])
