"""Against the corners of GRPO's shared answer-or-abstain choice: prices set by dual ascent, or the
advantages projected off the choice (config section `abstention`).

    prices = AbstentionPrices.from_config(view.abstention, saved=meta)  # None unless "dual"
    prices.update(abstained, answerable)                                # every host's rows
    rewards = prices.shape(rewards, abstained, answerable)              # before the advantages

    scores = shared_choice_scores(abstained, answerable, shares)        # "project": after them
    advantages, lam, push = project_out_shared_choice(advantages, scores, total)

Neither holds on every one of the demo's dev worlds (docs/results.md, "The next default"): both
are options, measured, not defaults.

A small policy's answer-or-abstain choice is largely one choice shared by all prompts: its expected
policy gradient is the sum over the two kinds of prompt of π(1 − π)(E[r | abstain] − E[r | answer]),
and which side wins depends on the world (how often the answers are right, where SFT left the
abstention). A fixed price on over-refusal therefore fixes one world and breaks another: on the
demo's dev worlds TruthRL's reward with an abstention on an answerable prompt at −0.5
(abstain_reward_answerable) ended in the refuse-everything corner on worlds 14 and 15, and at −1.0
in the answer-everything corner on world 10 (docs/results.md, "Abstention prices by dual ascent").

Here the two prices are the Lagrange multipliers of two constraints on each step's sampled
completions (constrained policy optimisation by reward shaping, as RCPO, arXiv:1805.11074 §4):

    abstention on prompts whose passages hold the answer        ≤ max_answerable
    abstention on prompts whose passages do not hold it         ≥ min_unanswerable

Each step, from the step's sampled shares a_ans and a_un (all hosts' rows):

    price ← clip(price + rate · (a_ans − max_answerable), 0, max_price)
    bonus ← clip(bonus + rate · (min_unanswerable − a_un), 0, max_price)
    r     ← r − price · [abstained, answerable] + bonus · [abstained, unanswerable]

and the group advantages are computed from the shaped r. While both constraints hold, both
multipliers decay to 0 and the recipe's reward is unchanged; a drift towards either corner raises
the multiplier that pushes back, and when both bind the shared choice is pushed both ways and only
the evidence-conditioned part of it gains. Rows without an answerability label are left as they are.
The multipliers are part of the checkpoint's meta (a resumed run continues with them).

`abstention.control="project"` instead leaves the rewards alone and removes from each step's
advantages their component along the shared choice. With s_i = a_i − p(i) (a_i = 1 when row i
abstained, p(i) the step's sampled abstention share on row i's side: answerable or not), the
first-order push of a step on a logit shared by all prompts is Σ A_i s_i (A · ∂log π/∂logit, the
sampled share standing in for π). The step's advantages become

    A ← A − (A·s / s·s) s

so that push is zero: the shared answer-or-abstain choice stays where the start model left it, and
only what tells the two kinds of prompt apart is trained (with contrast groups, the gold passage).
Nothing is tuned or carried between steps; s sums to zero on each side, so each side's mean
advantage is unchanged. The cost: where only one side is near its corner the shared choice could
have moved safely, and is held anyway. And the hold is first-order in the abstain decision alone:
on the demo's world 14 the choice still drifted, to answering (abstention on unanswerable held-out
items 52 → 11 %), moved by what the update did to the answers themselves.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Mapping, Optional

import ml_collections
import numpy as np

CONTROLS = ("", "dual", "project")
_META_KEY = "abstention_prices"


def component_values(values: Mapping[str, Any], component: str) -> Optional[Any]:
  """The reward component `component` in `values` (per row, or a step's mean): `component`, or
  `<fn>/<component>` with several reward functions (the first by name); None when there is none."""
  if component in values:
    return values[component]
  key = next((k for k in sorted(values) if k.endswith(f"/{component}") and k.count("/") == 1), None)
  return None if key is None else values[key]


@dataclasses.dataclass
class AbstentionPrices:
  """The two multipliers and their constraints (config section `abstention`)."""
  max_answerable: float
  min_unanswerable: float
  rate: float
  max_price: float
  price: float = 0.0   # taken from an abstention on a prompt whose passages hold the answer
  bonus: float = 0.0   # added to an abstention on a prompt whose passages do not

  @classmethod
  def from_config(cls, section: ml_collections.ConfigDict,
                  saved: Optional[Mapping[str, Any]] = None) -> Optional["AbstentionPrices"]:
    """The prices of config section `abstention` (None unless abstention.control is "dual"),
    continuing from a checkpoint's meta `saved` when it holds them."""
    if section.control not in CONTROLS:
      raise ValueError(f"abstention.control={section.control!r}; expected one of {CONTROLS}")
    if section.control != "dual":
      return None
    prices = cls(float(section.max_answerable), float(section.min_unanswerable),
                 float(section.rate), float(section.max_price))
    if saved and _META_KEY in saved:
      prices.price, prices.bonus = (float(x) for x in saved[_META_KEY])
    return prices

  def meta(self) -> dict:
    """What a checkpoint's meta keeps of them."""
    return {_META_KEY: [self.price, self.bonus]}

  def update(self, abstained: np.ndarray, answerable: np.ndarray) -> None:
    """One dual-ascent step from the sampled rows: `abstained` bool [N], `answerable` float [N]
    (1, 0, NaN unlabelled); a side without rows leaves its multiplier as it is."""
    abstained = np.asarray(abstained, bool)
    for side, attr in ((1.0, "price"), (0.0, "bonus")):
      rows = answerable == side
      if rows.any():
        share = float(abstained[rows].mean())
        violation = share - self.max_answerable if side else self.min_unanswerable - share
        setattr(self, attr, float(np.clip(getattr(self, attr) + self.rate * violation, 0.0,
                                          self.max_price)))

  def shape(self, rewards: np.ndarray, abstained: np.ndarray, answerable: np.ndarray) -> np.ndarray:
    """`rewards` with the current price taken from answerable abstentions and the bonus added to
    unanswerable ones (float64 [N])."""
    abstained = np.asarray(abstained, bool)
    delta = np.where(answerable == 1, -self.price, np.where(answerable == 0, self.bonus, 0.0))
    return np.asarray(rewards, np.float64) + abstained * delta

  def metrics(self) -> dict:
    return {"abstention/price_answerable": self.price, "abstention/bonus_unanswerable": self.bonus}


def side_shares(abstained: np.ndarray, answerable: np.ndarray) -> dict[float, float]:
  """{1.0: sampled abstention share of the answerable rows, 0.0: of the unanswerable ones} (NaN
  for a side without rows); pass every host's rows."""
  abstained = np.asarray(abstained, np.float64)
  return {side: float(abstained[answerable == side].mean()) if (answerable == side).any()
          else float("nan") for side in (1.0, 0.0)}


def shared_choice_scores(abstained: np.ndarray, answerable: np.ndarray,
                         shares: Optional[Mapping[float, float]] = None) -> np.ndarray:
  """s_i = a_i − (the sampled abstention share of row i's side), float64 [N]: the direction of the
  shared answer-or-abstain choice (module doc). 0 on unlabelled rows (`answerable` NaN). `shares`:
  side_shares of every host's rows (default: of these rows)."""
  abstained = np.asarray(abstained, np.float64)
  shares = side_shares(abstained, answerable) if shares is None else shares
  s = np.zeros_like(abstained)
  for side in (1.0, 0.0):
    rows = answerable == side
    s[rows] = abstained[rows] - shares[side]
  return s


def project_out_shared_choice(advantages: np.ndarray, scores: np.ndarray,
                              total: Callable[[np.ndarray], np.ndarray] = lambda x: x
                              ) -> tuple[np.ndarray, float, float]:
  """(advantages − λ·scores, λ, A·s) with λ = A·s / s·s over every host's rows: the advantages
  without their component along the shared answer-or-abstain choice (module doc). `total` sums a
  host's [2] partial sums over hosts (default: one host). λ = 0 when no row's choice varies."""
  a, s = np.asarray(advantages, np.float64), np.asarray(scores, np.float64)
  dot, norm = (float(x) for x in total(np.array([a @ s, s @ s])))
  lam = dot / norm if norm > 0 else 0.0
  return a - lam * s, lam, dot
