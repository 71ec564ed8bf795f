"""Collection: the rollout rounds of one GRPO step, their rewards, and the groups the update trains on.

    batch = Collector(view, recipe, ...).collect(key, stream, policy)   # -> GroupBatch

A round takes the next prompts from the stream, samples G completions each with the stage recipe's
rollout, and scores them in the reward pool (DAPO's overlong shaping is added to the reward before
normalisation). With DAPO dynamic sampling, rounds repeat until enough groups have reward variance
(or the cap is reached); the update then takes whole groups, informative first. Advantages are
group-normalised and the loss mask drops padding, a tool's inserted tokens (multi-turn rollouts),
truncated completions (DAPO overlong filtering) and groups whose rewards failed under
on_error="skip".

With evidence-contrast groups (`EvidenceContrast`, a stage's data.evidence_contrast) a group is one
question under k evidence conditions: k consecutive prompts of G/k completions each, so the G rows
of a question stay consecutive and every group-wise step (advantages, zero-variance filtering, DAPO
refill, skipped groups, host shards) works on the question's G rows unchanged; only the sampler
and the update's shared prompts see k prompts of G/k rows. In a searching rollout the gold_removed
prompt's searches skip the question's gold passages (the sampler reads them from the Example,
data/contrast.WITHHELD_KEY), and its reward sees the Example marked answerable=False.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable

import jax
import ml_collections
import numpy as np

from grounding_jax.data import contrast as contrast_lib
from grounding_jax.recipes import base as recipes_base
from grounding_jax.recipes import reward_fn
from grounding_jax.rl import abstention as abstention_lib
from grounding_jax.rl import advantages as adv_lib
from grounding_jax.rl import data_stream
from grounding_jax.rl import host_batch
from grounding_jax.rl import reward_pool
from grounding_jax.sampling import multiturn
from grounding_jax.sampling import rollout as rollout_lib


@dataclasses.dataclass
class GroupBatch:
  """What one step trains on: whole groups of this host, prompt-major.

  Attributes:
    rollout: the selected groups' prompts and completions.
    advantages: float32 [N], one per completion.
    loss_mask: bool [N, L], the completion tokens that count in the loss.
    metrics: the step's rollout, reward, advantage and DAPO metrics (global over hosts).
    sample_seconds, reward_seconds: time spent sampling and scoring.
    values: name -> float64 [N], each completion's reward ("reward") and its components (the
      readable rollouts, rl/rollout_log.py).
  """
  rollout: rollout_lib.Rollout
  advantages: np.ndarray
  loss_mask: np.ndarray
  metrics: dict
  sample_seconds: float
  reward_seconds: float
  values: dict = dataclasses.field(default_factory=dict)


def select_groups(usable: np.ndarray, informative: np.ndarray, wanted: int) -> np.ndarray:
  """Indices of `wanted` groups for the update (DAPO dynamic sampling).

  Informative (non-zero-variance) usable groups first, in sampling order; if fewer than `wanted`
  exist after the sampling cap, the batch is topped up with usable zero-variance groups, then with
  unusable ones (the caller masks their loss), so the update always sees the same shapes.

  Args:
    usable: bool [groups], False for groups the caller must not learn from (failed rewards, "skip").
    informative: bool [groups], True where the rewards in the group differ.
    wanted: groups needed.
  """
  order = [np.flatnonzero(usable & informative), np.flatnonzero(usable & ~informative),
           np.flatnonzero(~usable)]
  picked = np.concatenate(order)[:wanted]
  if picked.size < wanted:
    raise ValueError(f"only {picked.size} groups sampled, {wanted} needed")
  return picked


def _answerable_labels(rollout: rollout_lib.Rollout) -> np.ndarray:
  """float [N]: 1 for a row whose example is answerable, 0 unanswerable, NaN unlabelled."""
  return np.array([np.nan if ex.answerable is None else float(ex.answerable)
                   for ex in rollout.row_examples()])


def answerability_metrics(values: dict, answerable: np.ndarray) -> dict:
  """The reward and its components averaged over the rows of answerable and of unanswerable
  examples: `answerable/reward/<k>`, `unanswerable/reward/<k>` (`.../mean` for the reward), and
  `answerable_frac`, the answerable share of the labelled rows.

  A step samples a few prompts, so its answerable share varies from step to step, and the pooled
  means move with it: TruthRL's `reward/abstain` of a step whose prompts are mostly unanswerable is
  high though no behaviour changed. Split by label, the curves show the policy (accuracy on the
  answerable prompts, abstention on the unanswerable ones). Unlabelled rows are left out; a side
  with no rows this step is not logged.
  """
  labelled = ~np.isnan(answerable)
  if not labelled.any():
    return {}
  m = {"answerable_frac": float(answerable[labelled].mean())}
  for side, rows in (("answerable", answerable == 1), ("unanswerable", answerable == 0)):
    if rows.any():
      for k, v in sorted(values.items()):
        m[f"{side}/reward/{'mean' if k == 'reward' else k}"] = float(np.mean(np.asarray(v)[rows]))
  return m


def condition_metrics(values: dict, condition: np.ndarray) -> dict:
  """The reward and its components averaged over the rows of each evidence condition of the
  contrast groups: `contrast/<condition>/reward/<k>` (`.../mean` for the reward), e.g.
  `contrast/gold_removed/reward/abstain`, TruthRL's abstention share without the gold passages.
  `condition` is int [N], an index into data/contrast.CONDITIONS (-1: outside a contrast group,
  left out).
  """
  m = {}
  for code, name in enumerate(contrast_lib.CONDITIONS):
    rows = condition == code
    if rows.any():
      for k, v in sorted(values.items()):
        m[f"contrast/{name}/reward/{'mean' if k == 'reward' else k}"] = float(
            np.mean(np.asarray(v)[rows]))
  return m


def condition_search_metrics(counts: np.ndarray, recall: np.ndarray, condition: np.ndarray) -> dict:
  """The search metrics (multiturn.tool_metrics) of each evidence condition's rows:
  `contrast/<condition>/search/calls_per_completion`, `.../searching_frac` and, where the rows have
  gold passages (gold_kept), `.../gold_recall`. `counts`, `recall`: multiturn.tool_call_stats'
  columns; `condition`: as condition_metrics'."""
  m = {}
  for code, name in enumerate(contrast_lib.CONDITIONS):
    rows = condition == code
    if rows.any():
      m.update(multiturn.tool_metrics(counts[rows], recall[rows], f"contrast/{name}/search/"))
  return m


@dataclasses.dataclass(frozen=True)
class EvidenceContrast:
  """A stage's evidence-contrast groups (data/contrast.py): each question drawn becomes one prompt
  per condition, in this order, its G samples split evenly over them.

  Attributes:
    conditions: data/contrast.CONTRASTS[data.evidence_contrast], e.g. ("gold_kept", "gold_removed").
    pool: the passages gold_removed draws distractors from (the stage's whole dataset).
    seed: seeds the distractors and shuffles (with each example's id).
  """
  conditions: tuple[str, ...]
  pool: tuple
  seed: int = 0

  def prompts(self, questions) -> list:
    """[len(questions) * k] the condition prompts' Examples, question-major."""
    return [ex for q in questions
            for ex in contrast_lib.conditions(q, self.conditions, self.pool, seed=self.seed)]


def _conditions(rollout: rollout_lib.Rollout) -> np.ndarray:
  """int [N]: each row's evidence condition, an index into CONDITIONS (-1 outside contrast groups);
  numbers, so that hosts can gather them."""
  names = [ex.meta.get(contrast_lib.CONDITION_KEY, "") for ex in rollout.row_examples()]
  return np.array([contrast_lib.CONDITIONS.index(n) if n else -1 for n in names], np.int32)


@dataclasses.dataclass
class _Round:
  rollout: rollout_lib.Rollout
  values: dict  # name -> float64 [N]: "reward" and its components
  usable: np.ndarray  # bool [groups]
  failed: np.ndarray  # bool [N]
  nonfinite: np.ndarray  # bool [N], the failed rows whose reward was NaN or inf


class Collector:
  """Samples and scores the groups of one step for one stage.

  Args:
    view: the stage's config (setup.stage_config): rollout, reward, advantage, dapo sections.
    recipe: the stage's recipe (its rollout).
    tokenizer, mesh, hosts: the policy's tokenizer, mesh and host plumbing.
    pool: the stage's reward pool.
    prompt_fn: Example -> prompt text.
    settings: the rollout's sampling settings (group_size G/k with k evidence conditions).
    contrast: the stage's evidence-contrast groups, or None (a group is one prompt's G samples).
    prices: the stage's abstention prices (rl/abstention.py, config section `abstention`), or None.
  """

  def __init__(self, view: ml_collections.ConfigDict, recipe: recipes_base.Recipe, tokenizer, mesh,
               hosts: host_batch.HostBatches, pool: reward_pool.RewardPool,
               prompt_fn: Callable[[Any], str], settings: rollout_lib.SamplingSettings,
               contrast: EvidenceContrast | None = None,
               prices: abstention_lib.AbstentionPrices | None = None):
    self.c, self.recipe, self.tokenizer, self.mesh, self.hosts = view, recipe, tokenizer, mesh, hosts
    self.pool, self.prompt_fn, self.settings = pool, prompt_fn, settings
    self.options = view.rollout.options.to_dict()
    self.contrast, self.prices = contrast, prices  # prices: setup.check_config checked the recipe
    k = len(contrast.conditions) if contrast else 1
    if settings.group_size * k != view.rollout.group_size:
      raise ValueError(f"{k} evidence condition(s) × {settings.group_size} samples per prompt != "
                       f"rollout.group_size={view.rollout.group_size}")
    self.prompts_per_group = k  # consecutive prompts whose rows form one advantage group

  def _round(self, key, stream: data_stream.ExampleStream, policy) -> tuple[_Round, float, float]:
    c = self.c
    examples = stream.take(c.rollout.prompts_per_step)
    if self.contrast is not None:
      examples = self.contrast.prompts(examples)
    t0 = time.perf_counter()
    rr = self.recipe.rollout(policy, self.tokenizer, examples, self.prompt_fn, self.settings,
                             seed=key, mesh=self.mesh, options=self.options)
    ro = rr.rollout
    t1 = time.perf_counter()
    sampled = ro.sampled_lengths()  # a tool's inserted tokens count in no length penalty
    scored = self.pool(rr.completions, ro.row_examples(), {"completion_lengths": list(sampled),
                                                          "truncated": list(ro.truncated),
                                                          **rr.extras})
    values = dict(scored.values)
    if c.dapo.overlong_shaping:  # DAPO Eq. 13, added to the reward before normalisation
      pen = reward_fn.overlong_penalty(sampled, c.rollout.max_new_tokens, c.dapo.overlong_buffer,
                                       c.dapo.overlong_factor)
      values["overlong"] = pen
      values["reward"] = values["reward"] + pen
    for e in scored.errors[:5]:
      print(f"[reward] {e}", flush=True)
    g = c.rollout.group_size
    usable = ~scored.failed.reshape(-1, g).any(axis=1) if c.reward.on_error == "skip" else \
        np.ones(len(examples) // self.prompts_per_group, bool)
    return (_Round(ro, values, usable, scored.failed, scored.nonfinite), t1 - t0,
            time.perf_counter() - t1)

  def collect(self, key, stream: data_stream.ExampleStream, policy) -> GroupBatch:
    """The step's groups: sampled from `policy` (a model or its (graphdef, state) split) with `key`."""
    c = self.c
    g = c.rollout.group_size
    want = c.rollout.prompts_per_step // jax.process_count()
    rounds: list[_Round] = []
    t_sample = t_reward = 0.0
    max_rounds = 1 + (c.dapo.max_sampling_rounds if c.dapo.dynamic_sampling else 0)
    for i in range(max_rounds):
      rnd, ts, tr = self._round(jax.random.fold_in(key, i), stream, policy)
      rounds.append(rnd)
      t_sample, t_reward = t_sample + ts, t_reward + tr
      informative = ~adv_lib.zero_variance_groups(
          np.concatenate([r.values["reward"] for r in rounds]), g, c.dapo.std_tolerance)
      usable = np.concatenate([r.usable for r in rounds])
      if not c.dapo.dynamic_sampling or self.hosts.all_hosts((informative & usable).sum() >= want):
        break
    # Metrics describe the first round: an unbiased sample of the current policy.
    metrics = self._round_metrics(rounds[0])
    metrics["dapo/sampling_rounds"] = float(len(rounds))
    merged = rollout_lib.concat([r.rollout for r in rounds],
                                pad_id=int(self.tokenizer.pad_token_id or 0))
    values = {k: np.concatenate([r.values[k] for r in rounds]) for k in rounds[0].values}
    if self.prices is not None:  # before the advantages (and the groups' variance) see them
      metrics.update(self._price_abstentions(values, merged))
    rewards = values["reward"]
    informative = ~adv_lib.zero_variance_groups(rewards, g, c.dapo.std_tolerance)
    groups = select_groups(usable, informative, want) if c.dapo.dynamic_sampling else np.arange(want)
    batch_ro = rollout_lib.take_groups(merged, rollout_lib.group_rows(groups, self.prompts_per_group))
    loss_mask = batch_ro.sampled_mask().copy()  # a tool's inserted tokens carry no loss
    if c.dapo.mask_truncated:  # DAPO overlong filtering
      loss_mask &= ~batch_ro.truncated[:, None]
    loss_mask &= np.repeat(usable[groups], g)[:, None]
    a = c.advantage
    rows = rollout_lib.group_rows(groups, g)
    # advantage.contrast_baseline="condition": each condition's consecutive G/k rows are a group
    per = g // self.prompts_per_group if a.contrast_baseline == "condition" else g
    advantages = adv_lib.group_advantages(
        rewards[rows], per, scale=a.scale, std_ddof=a.std_ddof,
        std_floor=a.std_floor, eps=a.eps, leave_one_out=a.leave_one_out,
        std_tolerance=c.dapo.std_tolerance, token_counts=loss_mask.sum(axis=1))
    if c.abstention.control == "project":  # after the advantages: their shared-choice part removed
      advantages, projected = self._project_shared_choice(advantages, values, rows, batch_ro,
                                                          loss_mask)
      metrics.update(projected)
    all_adv = self.hosts.gather(advantages)  # metrics describe the global batch, equal on every host
    metrics["advantage/mean"] = float(all_adv.mean())
    metrics["advantage/std"] = float(all_adv.std())
    metrics["advantage/abs_max"] = float(np.abs(all_adv).max())
    metrics["dapo/kept_informative_frac"] = float(self.hosts.gather(informative[groups]).mean())
    return GroupBatch(batch_ro, advantages.astype(np.float32), loss_mask, metrics, t_sample, t_reward,
                      {k: v[rows] for k, v in values.items()})

  def _abstention_marks(self, values: dict) -> np.ndarray:
    """bool [N]: the rows whose completion abstained (the recipe's abstention component)."""
    component = self.recipe.abstention_component
    marks = abstention_lib.component_values(values, component)
    if marks is None:
      raise ValueError(f"abstention.control: the rewards have no component {component!r} (the "
                       f"abstention mark of recipe {self.recipe.name!r}); they have "
                       f"{sorted(values)}")
    return np.asarray(marks) > 0.5

  def _project_shared_choice(self, advantages: np.ndarray, values: dict, rows: np.ndarray,
                             batch_ro: rollout_lib.Rollout, loss_mask: np.ndarray
                             ) -> tuple[np.ndarray, dict]:
    """The batch's advantages without their component along the shared answer-or-abstain choice
    (rl/abstention.py, control "project"), over every host's rows; rows that carry no loss count
    as unlabelled."""
    abstained = self._abstention_marks(values)[rows]
    labels = np.where(loss_mask.any(axis=1), _answerable_labels(batch_ro), np.nan)
    all_labels = self.hosts.gather(labels)
    shares = abstention_lib.side_shares(self.hosts.gather(abstained), all_labels)
    scores = abstention_lib.shared_choice_scores(abstained, labels, shares)
    projected, lam, dot = abstention_lib.project_out_shared_choice(
        advantages, scores, lambda x: self.hosts.gather(x[None]).sum(axis=0))
    return projected.astype(advantages.dtype), {"abstention/shared_push": dot / len(all_labels),
                                                "abstention/projection": lam}

  def _price_abstentions(self, values: dict, rollout: rollout_lib.Rollout) -> dict:
    """Updates the abstention prices from this step's rows (all hosts') and shapes `values`'
    reward with them in place; the shift each row got is kept as values["abstention_shift"]."""
    abstained, answerable = self._abstention_marks(values), _answerable_labels(rollout)
    self.prices.update(self.hosts.gather(abstained), self.hosts.gather(answerable))
    shaped = self.prices.shape(values["reward"], abstained, answerable)
    values["abstention_shift"] = shaped - values["reward"]
    values["reward"] = shaped
    return self.prices.metrics()

  def _round_metrics(self, rnd: _Round) -> dict:
    g = self.c.rollout.group_size  # an advantage group's rows (a contrast group's, when on)
    # Every host's rows (groups stay whole), so logged means/stds/extremes are the global ones.
    values = {k: self.hosts.gather(rnd.values[k]) for k in sorted(rnd.values)}
    failed, nonfinite, lengths, truncated = (self.hosts.gather(x) for x in (
        rnd.failed, rnd.nonfinite, rnd.rollout.lengths, rnd.rollout.truncated))
    m = {}
    for k, v in sorted(values.items()):
      m["reward/mean" if k == "reward" else f"reward/{k}"] = float(np.mean(v))
    m["reward/std"] = float(np.std(values["reward"]))
    m.update(answerability_metrics(values, self.hosts.gather(_answerable_labels(rnd.rollout))))
    searches = self.settings.max_turns > 1
    stats = ([self.hosts.gather(x) for x in multiturn.tool_call_stats(rnd.rollout)]
             if searches else [])
    if self.contrast is not None:
      conditions = self.hosts.gather(_conditions(rnd.rollout))
      m.update(condition_metrics(values, conditions))
      if searches:
        m.update(condition_search_metrics(*stats, conditions))
    m["reward/failed_frac"] = float(np.mean(failed))  # raised, timed out or not finite
    m["reward/nonfinite_frac"] = float(np.mean(nonfinite))  # of them, NaN or inf
    m["zero_variance_frac"] = float(adv_lib.zero_variance_groups(
        values["reward"], g, self.c.dapo.std_tolerance).mean())
    m["completion_length/mean"] = float(lengths.mean())
    m["completion_length/max"] = float(lengths.max())
    m["completion_length/min"] = float(lengths.min())
    m["truncated_frac"] = float(truncated.mean())
    if searches:
      m.update(multiturn.tool_metrics(*stats))
    return m
