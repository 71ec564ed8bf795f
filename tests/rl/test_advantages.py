"""Advantages against a plain-Python re-derivation and the papers' worked examples."""

import itertools

import numpy as np
import pytest

from grounding_jax.rl import advantages as adv_lib


def _reference(rewards, g, scale, ddof, floor, eps, loo):
  out = []
  allr = list(rewards)
  n = len(allr)
  bmean = sum(allr) / n
  bstd = (sum((x - bmean) ** 2 for x in allr) / (n - ddof)) ** 0.5
  for start in range(0, n, g):
    grp = allr[start:start + g]
    mean = sum(grp) / g
    std = (sum((x - mean) ** 2 for x in grp) / (g - ddof)) ** 0.5
    for i, r in enumerate(grp):
      if all(x == grp[0] for x in grp):
        out.append(0.0)
        continue
      base = (sum(grp) - r) / (g - 1) if loo else mean
      if scale == "group":
        out.append((r - base) / (max(std, floor) + eps))
      elif scale == "batch":
        out.append((r - base) / (max(bstd, floor) + eps))
      else:
        out.append(r - base)
  return np.array(out)


@pytest.mark.parametrize("scale,ddof,floor,eps,loo", list(itertools.product(
    ["group", "batch", "none"], [0, 1], [0.0, 0.1], [1e-4, 1e-6], [False, True])))
def test_matches_reference(scale, ddof, floor, eps, loo):
  rng = np.random.default_rng(0)
  rewards = rng.normal(size=24).round(1)
  rewards[4:8] = 0.5  # one zero-variance group
  got = adv_lib.group_advantages(rewards, 4, scale=scale, std_ddof=ddof, std_floor=floor, eps=eps,
                                 leave_one_out=loo)
  np.testing.assert_allclose(got, _reference(rewards, 4, scale, ddof, floor, eps, loo), rtol=1e-5,
                             atol=1e-6)
  assert np.all(got[4:8] == 0)


def test_lear_worked_example():
  # LEAR §3.3: R = {0.49, 0.51}: vanilla GRPO (population std 0.01) gives ±1; the 0.1 floor gives ±0.1.
  r = np.array([0.49, 0.51])
  np.testing.assert_allclose(adv_lib.group_advantages(r, 2, std_ddof=0, eps=0.0), [-1, 1], rtol=1e-6)
  np.testing.assert_allclose(adv_lib.group_advantages(r, 2, std_ddof=0, std_floor=0.1, eps=0.0),
                             [-0.1, 0.1], rtol=1e-6)


def test_zero_variance_groups_give_zero():
  r = np.array([1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 0.3, 0.7, 0.1])
  np.testing.assert_array_equal(adv_lib.zero_variance_groups(r, 3), [True, True, False])
  a = adv_lib.group_advantages(r, 3, scale="none")
  np.testing.assert_array_equal(a[:6], 0.0)
  assert np.all(a[6:] != 0)


def test_bad_group_size_raises():
  with pytest.raises(ValueError, match="group_size=4"):
    adv_lib.group_advantages(np.zeros(6), 4)



def test_std_tolerance_counts_float_noise_groups_as_zero_variance():
  # F1 / ROUGE / judge rewards: a group equal up to float noise (OpenRLHF #1270).
  noisy = np.array([0.7, 0.7 + 1e-9, 0.7 - 1e-9, 0.7])
  r = np.concatenate([noisy, [0.0, 1.0, 0.5, 0.5]])
  np.testing.assert_array_equal(adv_lib.zero_variance_groups(r, 4), [False, False])  # exact test
  np.testing.assert_array_equal(adv_lib.zero_variance_groups(r, 4, 1e-6), [True, False])
  exact = adv_lib.group_advantages(r, 4)
  assert np.abs(exact[:4]).max() > 1e-6  # noise scaled up by the group's tiny std
  tol = adv_lib.group_advantages(r, 4, std_tolerance=1e-6)
  np.testing.assert_array_equal(tol[:4], 0.0)
  np.testing.assert_array_equal(tol[4:], exact[4:])
  # The bound is the group's population std: a group whose std is just above it keeps its signal.
  spread = np.array([0.0, 2e-6, 0.0, 2e-6])  # population std 1e-6
  assert not adv_lib.zero_variance_groups(spread, 4, 0.9e-6)[0]
  assert adv_lib.zero_variance_groups(spread, 4, 1.1e-6)[0]


def test_batch_tokens_is_token_weighted_whitening_of_the_centred_rewards():
  # Plain-Python re-derivation of REINFORCE++-baseline (arXiv:2501.03262) as verl computes it:
  # (r − group mean) at every loss token, whitened over all tokens; verl's own run: test_verl_reference.py.
  rewards = [1.0, 0.0, 0.5, 0.5, 0.2, 0.9]
  counts = [3, 1, 2, 2, 5, 4]
  centred = [0.5, -0.5, 0.0, 0.0, -0.35, 0.35]
  tokens = [c for c, n in zip(centred, counts) for _ in range(n)]
  mean = sum(tokens) / len(tokens)
  std = (sum((t - mean) ** 2 for t in tokens) / (len(tokens) - 1) + 1e-8) ** 0.5
  got = adv_lib.group_advantages(np.array(rewards), 2, scale="batch_tokens", eps=1e-8,
                                 token_counts=np.array(counts))
  np.testing.assert_allclose(got, [(c - mean) / std for c in centred], rtol=1e-6)
  assert got[2] != 0  # the all-equal group keeps −mean/std, as in verl
  with pytest.raises(ValueError, match="token_counts"):
    adv_lib.group_advantages(np.array(rewards), 2, scale="batch_tokens")
