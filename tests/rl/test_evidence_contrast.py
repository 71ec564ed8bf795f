"""Evidence-contrast groups: what the advantages give a shared answer-or-abstain choice, a toy
two-armed policy trained with the project's advantage function, the collector's contrast groups
against a numpy re-derivation, and a tiny-model run that logs the per-condition metrics."""

import jax
import numpy as np
import pytest

import toy_task
from grounding_jax import models
from grounding_jax.data import contrast as contrast_lib
from grounding_jax.data.schema import Example, Passage
from grounding_jax.rl import abstention
from grounding_jax.rl import advantages as adv_lib
from grounding_jax.rl import collect
from grounding_jax.rl import config as config_lib
from grounding_jax.rl import data_stream
from grounding_jax.rl import host_batch
from grounding_jax.rl import reward_pool
from grounding_jax.rl import setup
from grounding_jax.rl import trainer

# TruthRL's ternary reward (arXiv:2509.25760 §3.2): +1 right, 0 abstain, −1 wrong.
RIGHT, ABSTAIN, WRONG = 1.0, 0.0, -1.0


def _pull(advantages, abstained):
  """Σ_i A_i ∂log π(a_i)/∂s / N for a shared abstain logit s, π(abstain) = the group's share."""
  return float(np.mean(advantages * (abstained - abstained.mean())))


def test_issue_step1_shares_per_group_std_doubles_the_unanswerable_pull():
  # The issue's step-1 groups as exact shares of 100 rows: unanswerable 70 % abstain / 30 % wrong,
  # answerable 47 % right / 30 % wrong / 23 % abstain (docs/training.md's table).
  un = np.r_[np.full(70, ABSTAIN), np.full(30, WRONG)]
  an = np.r_[np.full(47, RIGHT), np.full(30, WRONG), np.full(23, ABSTAIN)]
  rewards, n = np.r_[an, un], 100

  def sides(group, **kw):
    a = adv_lib.group_advantages(rewards, group, std_ddof=0, eps=0.0, **kw)
    return a[:n], a[n:]

  a_an, a_un = sides(n, scale="group")  # today: one group per prompt
  np.testing.assert_allclose([a_un[0], a_an[-1]], [0.655, -0.197], atol=1e-3)  # the issue's ±
  c_an, c_un = sides(2 * n, scale="group")  # one contrast group: the same question, gold removed
  np.testing.assert_allclose([c_un[0], c_an[-1]], [0.089, 0.089], atol=1e-3)
  ratio = lambda a, u: _pull(u, un == ABSTAIN) / -_pull(a, an == ABSTAIN)
  none_an, none_un = sides(n, scale="none")
  # The objective's own ratio (unnormalised): E[r | answer] is +0.22 with the gold, −1 without it.
  np.testing.assert_allclose(ratio(none_an, none_un), 0.21 / 0.039, rtol=0.01)
  np.testing.assert_allclose(ratio(a_an, a_un), 10.1, atol=0.05)
  np.testing.assert_allclose(ratio(c_an, c_un), ratio(none_an, none_un), rtol=1e-6)


def train_two_armed(mode, *, seed, steps=300, lr=0.5, feature=0.2, group=8, precision=0.61,
                    abstain_answerable=ABSTAIN, start=-0.18, prices=None, questions=2,
                    project=False):
  """A two-parameter policy on answerable and gold-removed copies of one question; returns the
  final (abstention on the answerable copy, on the unanswerable copy).

  π(abstain | x) = σ(s + feature·w·x), x = −1 with the gold passage, +1 without: s is shared by
  both copies, w is the small evidence-conditioned term. Answering is right with probability
  `precision` with the gold passage and always wrong without it. It starts at the issue's step 1
  (abstention 0.23 answerable, 0.70 unanswerable). Each step samples 2·group rows: one group per
  copy ("group", today), or two contrast groups of group/2 + group/2 ("contrast"); advantages are
  the project's (scale="group"), and a plain policy-gradient step follows. `abstain_answerable` is
  the reward of an abstention on the answerable copy (TruthRL's reward option
  abstain_reward_answerable; the paper's 0 by default). `start` is the shared logit s at step 0
  (another world's SFT bias), `prices` an rl/abstention.AbstentionPrices that shapes each step's
  rewards, `questions` the contrast groups a step, `project` whether each step's advantages lose
  their component along the shared choice (abstention.control="project").
  """
  rng = np.random.default_rng(seed)
  s, w = start, 1.03 / feature
  if mode == "group":
    x = np.r_[np.full(group, -1.0), np.full(group, 1.0)]
  else:
    x = np.tile(np.r_[np.full(group // 2, -1.0), np.full(group // 2, 1.0)], questions)
  for _ in range(steps):
    p = 1 / (1 + np.exp(-(s + feature * w * x)))
    abstain = rng.random(x.size) < p
    right = (x < 0) & (rng.random(x.size) < precision)
    r = np.where(abstain, np.where(x < 0, abstain_answerable, ABSTAIN), np.where(right, RIGHT, WRONG))
    if prices is not None:
      answerable = (x < 0).astype(np.float64)
      prices.update(abstain, answerable)
      r = prices.shape(r, abstain, answerable)
    a = adv_lib.group_advantages(r, group)
    if project:
      answerable = (x < 0).astype(np.float64)
      a = abstention.project_out_shared_choice(
          a, abstention.shared_choice_scores(abstain, answerable))[0]
    g = a * (abstain - p)  # A · ∂log π/∂logit
    s, w = s + lr * g.mean(), w + lr * (g * feature * x).mean()
  sig = lambda z: 1 / (1 + np.exp(-z))
  return sig(s - feature * w), sig(s + feature * w)


def test_toy_two_armed_contrast_groups_drift_less_towards_abstaining():
  # Measured over seeds 0-31 (4 sets of 8, mean of each): per-group std ends at 0.50-0.57
  # abstention on the answerable copy (from 0.23), contrast groups at 0.36-0.41 (seeds 0-7: 0.50 and
  # 0.36); both at 0.93-0.97 on the unanswerable copy. Contrast groups cut the drift by about 40 %
  # here; they do not remove it (docs/training.md).
  per_group = np.mean([train_two_armed("group", seed=s) for s in range(8)], axis=0)
  contrasted = np.mean([train_two_armed("contrast", seed=s) for s in range(8)], axis=0)
  assert per_group[0] > 0.42, per_group
  assert contrasted[0] < 0.45 and contrasted[0] < per_group[0] - 0.08, (contrasted, per_group)
  assert per_group[1] > 0.85 and contrasted[1] > 0.85


def test_toy_two_armed_contrast_groups_with_a_priced_over_refusal_do_not_drift():
  # Contrast groups plus abstain_reward_answerable=-0.5: seeds 0-31 end at 0.13-0.15 abstention on
  # the answerable copy (means of 4 sets of 8; start 0.23) and 0.88-0.90 on the unanswerable one
  # (start 0.70); the same price without contrast groups at 0.21-0.25, per-group std alone at
  # 0.50-0.57. Neither corner: the answerable copy's abstention falls, the other's rises.
  both = np.mean([train_two_armed("contrast", seed=s, abstain_answerable=-0.5) for s in range(8)], axis=0)
  assert both[0] < 0.2 and both[1] > 0.8, both


def test_toy_two_armed_fixed_prices_land_by_world_and_dual_prices_near_the_targets():
  # The shared logit's start stands for where another world's SFT left it (σ(s) 0.18 to 0.73), the
  # precision for how often its answers are right; 60 steps of 4 contrast groups, seeds 0-7 (means).
  # Measured (answerable copy's abstention at the end, per price): with a fixed price of -0.5 the
  # worlds end at 0.15-0.52, of -1.0 at 0.12-0.28 and unanswerable 0.62-0.83; dual prices
  # (max_answerable 0.2, min_unanswerable 0.7) at 0.17-0.28 / 0.74-0.83 from every start.
  worlds = [(precision, start) for precision in (0.4, 0.61, 0.9) for start in (-1.5, -0.18, 1.0)]
  run = lambda **kw: np.mean([train_two_armed("contrast", seed=s, steps=60, questions=4, **kw)
                              for s in range(8)], axis=0)
  fixed = np.array([run(precision=p, start=s0, abstain_answerable=-0.5) for p, s0 in worlds])
  dual = np.array([run(precision=p, start=s0, prices=abstention.AbstentionPrices(0.2, 0.7, 1.0, 1.0))
                   for p, s0 in worlds])
  assert np.ptp(fixed[:, 0]) > 0.3, fixed  # a fixed price: where a world ends depends on the world
  assert np.all(dual[:, 0] < 0.32) and np.all(dual[:, 1] > 0.72), dual
  assert np.ptp(dual[:, 0]) < 0.15 and np.ptp(dual[:, 1]) < 0.15, dual


def test_toy_two_armed_projection_holds_the_shared_choice_where_it_started():
  # The same 9 worlds and 60 steps as above, the paper's reward (no price), advantages projected
  # off the shared choice. Measured (means of seeds 0-7): the answerable copy ends within 0.07 of
  # where it started (0.07-0.49), the unanswerable copy 0.01-0.06 above its start; without the
  # projection the same worlds end at 0.21-0.89 on the answerable copy (the corner where
  # precision is low). Held, not learned: the evidence-conditioned term moves little in 60 steps.
  worlds = [(precision, start) for precision in (0.4, 0.61, 0.9) for start in (-1.5, -0.18, 1.0)]
  sig = lambda z: 1 / (1 + np.exp(-z))
  run = lambda **kw: np.mean([train_two_armed("contrast", seed=s, steps=60, questions=4, **kw)
                              for s in range(8)], axis=0)
  for precision, start in worlds:
    first = np.array([sig(start - 1.03), sig(start + 1.03)])  # the feature term at step 0: ±1.03
    held = run(precision=precision, start=start, project=True)
    free = run(precision=precision, start=start)
    assert abs(held[0] - first[0]) < 0.1 and held[1] > first[1] - 0.02, (precision, start, held)
    if precision == 0.4:  # answers mostly wrong: without the projection, towards refusing
      assert free[0] > first[0] + 0.2, (precision, start, free)


class AnswerableShareReward(toy_task.TargetShareReward):
  """The target-word share with the gold passage, one minus it without (picklable)."""

  def __call__(self, completions, examples, **extra):
    share = super().__call__(completions, examples)["reward"]
    ans = np.array([ex.answerable is not False for ex in examples], np.float64)
    return {"reward": np.where(ans == 1, share, 1 - share), "answered": ans}


def _toy_examples(n, seed=0):
  """Toy-vocabulary questions with 3 passages, passage 2 the gold; every third unanswerable."""
  rng = np.random.default_rng(seed)
  words = lambda k: " ".join(f"w{t}" for t in rng.integers(13, toy_task.VOCAB, size=k))
  return [Example(question=words(3), passages=tuple(Passage(words(2)) for _ in range(3)),
                  answers=(f"w{i % 10 + 3}",), gold_passage_ids=() if i % 3 == 2 else (2,),
                  answerable=i % 3 != 2, id=f"toy{i}") for i in range(n)]


def _prompt(ex):
  return " ".join([ex.question] + [p.text for p in ex.passages])


def _contrast_config(tmp_path, steps=2):
  c = toy_task.toy_config(tmp_path, steps=steps, prompts=2, group=4)
  c.stages = [config_lib.stage("toy", num_steps=steps, data=dict(evidence_contrast="gold_removed"))]
  c.checkpoint.every_steps = 1000
  return c


@pytest.mark.parametrize("baseline", ["shared", "condition"])
def test_collector_contrast_groups_share_one_baseline_or_one_per_condition(tiny_checkpoint, tmp_path,
                                                                          baseline):
  c = _contrast_config(tmp_path)
  c.advantage.scale = "group"
  c.advantage.contrast_baseline = baseline
  st = c.stages[0]
  view = setup.stage_config(c, st)
  data = _toy_examples(12)
  questions, contrast = setup.evidence_contrast(st, data, seed=5)
  assert len(questions) == 8 and contrast.conditions == ("gold_kept", "gold_removed")
  recipe = setup.recipes.get_recipe("naive")
  pool = reward_pool.RewardPool([("toy", 1.0, AnswerableShareReward())], num_workers=0)
  settings = setup.sampling_settings(view, recipe, setup.samples_per_prompt(view, st))
  assert settings.group_size == 2
  collector = collect.Collector(view, recipe, toy_task.make_tokenizer(), None,
                                host_batch.HostBatches(None), pool, _prompt, settings, contrast)
  model = models.load_pretrained(tiny_checkpoint("llama"))
  batch = collector.collect(jax.random.key(0), data_stream.ExampleStream(questions, seed=0), model)
  ro = batch.rollout
  # 2 questions × (gold kept, gold removed) prompts × 2 samples, question-major.
  assert [ex.meta[contrast_lib.CONDITION_KEY] for ex in ro.examples] == ["gold_kept", "gold_removed"] * 2
  assert ro.examples[0].question == ro.examples[1].question and ro.examples[1].answerable is False
  rewards = AnswerableShareReward()(ro.texts, ro.row_examples())["reward"]
  # shared: a group is a question's 4 rows; condition: each condition's 2 rows
  groups = rewards.reshape(2, 4) if baseline == "shared" else rewards.reshape(4, 2)
  mean, std = groups.mean(1, keepdims=True), groups.std(1, ddof=1, keepdims=True)
  want = np.where(std > 0, (groups - mean) / (std + 1e-4), 0.0).reshape(-1)
  np.testing.assert_allclose(batch.advantages, want, rtol=1e-5, atol=1e-6)
  rows = rewards.reshape(2, 2, 2)  # [question, condition, sample]
  np.testing.assert_allclose(batch.metrics["contrast/gold_kept/reward/mean"], rows[:, 0].mean())
  np.testing.assert_allclose(batch.metrics["contrast/gold_removed/reward/mean"], rows[:, 1].mean())
  assert batch.metrics["contrast/gold_removed/reward/answered"] == 0.0


def test_trainer_runs_contrast_groups_and_logs_each_condition(tiny_checkpoint, tmp_path, capsys):
  c = _contrast_config(tmp_path)
  data = _toy_examples(12)
  history = trainer.Trainer(c, model=models.load_pretrained(tiny_checkpoint("llama")),
                            tokenizer=toy_task.make_tokenizer(),
                            reward_functions=[("toy", 1.0, AnswerableShareReward())],
                            datasets={"toy": data}, prompt_fn=_prompt).train()
  assert len(history) == 2
  for h in history:
    for cond in ("gold_kept", "gold_removed"):
      assert np.isfinite(h[f"contrast/{cond}/reward/mean"])
    assert h["contrast/gold_kept/reward/answered"] == 1.0
    assert h["answerable_frac"] == 0.5  # half of every step's rows are gold-removed
  assert "4 examples labelled unanswerable left out" in capsys.readouterr().out


def test_overlong_drop_keeps_a_question_only_when_every_condition_fits(tmp_path, capsys):
  # q0's own passages are short; the only distractors (q1's) are long, so q0's gold-removed prompt
  # is over the limit though its gold-kept prompt fits: q0 leaves the data whole.
  short, long = Passage("w20 w21"), Passage(" ".join(["w30"] * 10))
  q0 = Example(question="w40 w41", passages=(short, Passage("w22 w23")), answers=("w5",),
               gold_passage_ids=(1,), answerable=True, id="q0")
  q1 = Example(question="w42", passages=(long, long), answers=("w6",), answerable=False, id="q1")
  c = _contrast_config(tmp_path)
  c.rollout.update(dict(max_prompt_tokens=len(_prompt(q0).split()) + 1, overlong_prompts="drop"))
  st = c.stages[0]
  view = setup.stage_config(c, st)
  questions, contrast = setup.evidence_contrast(st, [q0, q1], seed=0)
  assert [q.id for q in questions] == ["q0"]
  tok = toy_task.make_tokenizer()
  with pytest.raises(ValueError, match="every prompt is longer"):
    setup.fit_prompt_limit(view, "toy", questions, _prompt, tok, contrast)
  assert "dropped 1 of 1 examples" in capsys.readouterr().out
  # Without contrast groups the same question fits.
  assert setup.fit_prompt_limit(view, "toy", questions, _prompt, tok) == [q0]


def test_group_size_must_split_over_the_conditions(tmp_path):
  c = _contrast_config(tmp_path)
  c.stages[0].data.evidence_contrast = "gold_removed_shuffled"
  with pytest.raises(ValueError, match="evidence_contrast.*multiple of 3"):
    trainer.Trainer(c, model=object(), tokenizer=object())


def test_a_baseline_per_condition_needs_two_samples_per_condition(tmp_path):
  c = _contrast_config(tmp_path)  # G = 4 over 2 conditions: 2 each, enough
  c.advantage.contrast_baseline = "condition"
  c.rollout.group_size, c.update_loop.micro_batch_size = 3, 3
  c.stages[0].data.evidence_contrast = "gold_removed_shuffled"  # 1 sample per condition
  with pytest.raises(ValueError, match="contrast_baseline='condition'.*1 sample"):
    trainer.Trainer(c, model=object(), tokenizer=object())
