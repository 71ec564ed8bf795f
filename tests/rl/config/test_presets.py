"""Algorithm presets set what their papers change, and a stage's own loss / optimizer apply to it."""

import pytest

from grounding_jax.rl import config as config_lib
from grounding_jax.rl.config import presets
from grounding_jax.rl import setup
from grounding_jax.rl import update


@pytest.mark.parametrize("preset,expected", [
    # DAPO §3: clip-higher, dynamic sampling, soft overlong punishment, token-level loss, no KL.
    (presets.dapo, {"loss.clip_eps_low": 0.2, "loss.clip_eps_high": 0.28, "loss.kl_coef": 0.0,
                    "loss.aggregation": "token_mean", "dapo.dynamic_sampling": True,
                    "dapo.overlong_shaping": True, "dapo.overlong_buffer": 51}),  # 256 // 5
    # Dr.GRPO §3.2: no std normalisation, no per-response length normalisation.
    (presets.dr_grpo, {"advantage.scale": "none", "loss.aggregation": "seq_sum_constant"}),
    # RLOO: leave-one-out baseline, unscaled.
    (presets.rloo, {"advantage.scale": "none", "advantage.leave_one_out": True}),
    # GSPO §4.1 / §5.1: sequence ratio, clip 3e-4 / 4e-4, sequence-mean loss, four mini-batches.
    (presets.gspo, {"loss.ratio_level": "sequence", "loss.clip_eps_low": 3e-4,
                    "loss.clip_eps_high": 4e-4, "loss.aggregation": "seq_mean_token_mean",
                    "update_loop.num_minibatches": 4}),
    # REINFORCE++-baseline as verl: group-centred, whitened over the batch's tokens.
    (presets.reinforce_pp_baseline, {"advantage.scale": "batch_tokens", "advantage.eps": 1e-8,
                                     "advantage.leave_one_out": False}),
])
def test_preset_sets_its_papers_fields(preset, expected):
  c = preset(config_lib.default_config())
  for path, value in expected.items():
    section, field = path.split(".")
    assert c[section][field] == value, path
  setup.check_config(c, need_model_path=False)  # the preset leaves a runnable config


def test_gspo_token_variant():
  c = presets.gspo(config_lib.default_config(), token_level_gradient=True, num_minibatches=None)
  assert c.loss.ratio_level == "sequence_token" and c.update_loop.num_minibatches == 1


def test_dapo_without_dynamic_sampling_is_graces_variant():
  c = presets.dapo(config_lib.default_config(), dynamic_sampling=False, overlong_buffer=1024)
  assert not c.dapo.dynamic_sampling and c.dapo.overlong_buffer == 1024


def test_stage_overrides_apply_to_that_stage_only():
  c = config_lib.default_config()
  c.stages = [config_lib.stage("a", 1),
              config_lib.stage("b", 1, loss=dict(kl_coef=0.1, clip_eps_high=0.28),
                               optimizer=dict(learning_rate=3e-6))]
  first, second = (setup.stage_config(c, st) for st in c.stages)
  assert first.loss.kl_coef == 0.0 and second.loss.kl_coef == 0.1
  assert update.settings_from_config(second).loss.clip_eps_high == 0.28
  assert second.optimizer.learning_rate == 3e-6 and first.optimizer.learning_rate == 1e-6
  c.stages[1].loss.kl_coeff = 0.2  # a typo in a stage override is named, not ignored
  with pytest.raises(ValueError, match=r"stages\[1\].loss=.*sets unknown fields \['kl_coeff'\]"):
    setup.check_config(c, need_model_path=False)
  with pytest.raises(ValueError, match="unknown override 'lossy'"):
    config_lib.stage("c", 1, lossy=dict(kl_coef=0.1))
