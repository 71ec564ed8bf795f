"""Readable rollouts (logging.rollouts_every): the JSONL lines of a toy run agree with the step's
logged metrics, and a line carries the recipe's parse, the reward components, the evidence condition
and the abstention flag."""

import dataclasses
import pathlib
import sys

import numpy as np

import toy_task
from grounding_jax.data import contrast
from grounding_jax.data.schema import Example
from grounding_jax.rl import collect
from grounding_jax.rl import rollout_log
from grounding_jax.sampling import rollout as rollout_lib

sys.path.insert(0, str(pathlib.Path(__file__).parents[1]))
import test_metrics_writer  # noqa: E402  (its TensorBoard text reader)

_FIELDS = {"step", "stage", "group", "sample", "id", "question", "answerable", "completion",
           "num_tokens", "truncated", "answer", "parsed", "reward", "rewards", "advantage", "trained"}


def test_a_toy_run_logs_its_rollouts_every_n_steps(tiny_checkpoint, tmp_path):
  c = toy_task.toy_config(tmp_path, steps=2, prompts=2, group=4)
  c.logging.rollouts_every = 2
  history = toy_task.make_trainer(tiny_checkpoint("llama"), tmp_path, c).train()
  assert sorted(p.name for p in (tmp_path / "rollouts").iterdir()) == ["step_2.jsonl"]
  lines = rollout_log.read(str(tmp_path), 2)
  assert len(lines) == 2 * 4
  for i, line in enumerate(lines):
    assert _FIELDS <= set(line), _FIELDS - set(line)
    assert (line["step"], line["stage"], line["group"], line["sample"]) == (2, "toy", i // 4, i % 4)
    assert ("prompt" in line) == (i % 4 == 0)  # once per prompt
    assert line["num_tokens"] <= 6 and isinstance(line["completion"], str)
    assert set(line["rewards"]) == {"target_share"}
  assert lines[0]["prompt"] == lines[0]["question"]  # the toy prompt_fn renders the question
  # No DAPO refill: the step trains on the groups its metrics describe.
  step2 = history[1]
  np.testing.assert_allclose(np.mean([line["reward"] for line in lines]), step2["reward/mean"])
  np.testing.assert_allclose(np.mean([line["rewards"]["target_share"] for line in lines]),
                             step2["reward/target_share"])
  np.testing.assert_allclose(np.mean([line["num_tokens"] for line in lines]),
                             step2["completion_length/mean"])
  adv = np.array([line["advantage"] for line in lines]).reshape(2, 4)
  np.testing.assert_allclose(adv.sum(axis=1), 0.0, atol=1e-5)  # group-normalised
  np.testing.assert_allclose(adv.mean(), step2["advantage/mean"], atol=1e-6)
  texts = test_metrics_writer.tb_texts(tmp_path / "logs")
  assert set(texts) == {("rollouts", 2)} and "group 0" in texts[("rollouts", 2)]


@dataclasses.dataclass(frozen=True)
class _Parsed:
  answer: str
  quotes: tuple


class _StubRecipe:
  """What rollout_log reads from a recipe: its parse, its answer, its abstention component."""
  abstention_component = "abstain"

  def parse(self, completion):
    return _Parsed(completion.split(";")[0], tuple(completion.split(";")[1:]))

  def answer(self, completion):
    return completion.split(";")[0]


def test_a_line_has_the_parse_the_condition_and_the_abstention():
  q = Example(question="Capital of France?", id="q7", answerable=True)
  kept = dataclasses.replace(q, meta={contrast.CONDITION_KEY: "gold_kept"})
  removed = dataclasses.replace(q, answerable=False, meta={contrast.CONDITION_KEY: "gold_removed"})
  texts = ["Paris;p1", "Lyon", "unknown", "unknown;p2"]
  ro = rollout_lib.Rollout(  # one question, 2 conditions × 2 samples: one advantage group of 4
      examples=[kept, removed], prompt_ids=np.zeros((2, 3), np.int32),
      prompt_mask=np.ones((2, 3), bool), completion_ids=np.zeros((4, 5), np.int32),
      completion_mask=np.ones((4, 5), bool), sampler_logp=np.zeros((4, 5), np.float32),
      lengths=np.array([5, 3, 2, 5], np.int32), truncated=np.array([True, False, False, False]),
      texts=texts, group_size=2)
  values = {"reward": np.array([1.0, -1.0, 1.0, 0.0]), "abstain": np.array([0.0, 0.0, 1.0, 1.0])}
  loss_mask = np.ones((4, 5), bool)
  loss_mask[0] = False  # DAPO's overlong filter
  batch = collect.GroupBatch(ro, np.array([0.5, -1.5, 0.5, 0.5], np.float32), loss_mask, {}, 0.0,
                             0.0, values)
  lines = rollout_log.rows(3, "grpo", batch, _StubRecipe(), lambda ex: f"<p>{ex.question}</p>", 4)
  assert [line["group"] for line in lines] == [0, 0, 0, 0]
  assert [line["condition"] for line in lines] == ["gold_kept"] * 2 + ["gold_removed"] * 2
  assert [line.get("prompt") for line in lines] == ["<p>Capital of France?</p>", None] * 2
  assert [line["answerable"] for line in lines] == [True, True, False, False]
  assert lines[0]["parsed"] == {"answer": "Paris", "quotes": ["p1"]} and lines[0]["answer"] == "Paris"
  assert [line["abstained"] for line in lines] == [False, False, True, True]
  assert lines[3]["rewards"] == {"abstain": 1.0} and lines[1]["reward"] == -1.0
  assert [line["trained"] for line in lines] == [False, True, True, True]
  assert lines[0]["truncated"] and lines[0]["num_tokens"] == 5
  md = rollout_log.samples_markdown(lines)
  assert "group 0 · best" in md and "group 0 · worst" in md and "`Lyon`" in md
