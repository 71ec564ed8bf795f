"""The override protocol shared by launch/train.py and launch/sweep.py: an override dict applied in
process equals the same dict rendered as train.py flags and parsed by ml_collections' config_flags;
presets run before field overrides, which win; bad names fail early with the name in the message."""

import pathlib

from absl import flags
from ml_collections import config_flags
import pytest

from grounding_jax.rl.config import overrides
from grounding_jax.rl.config import presets

ROOT = pathlib.Path(__file__).resolve().parents[3]
_TRUTHRL = str(ROOT / "configs" / "truthrl.py")


def _parse(argv):
  """A fresh launch/train.py-style --config flag parsed from argv (config_flags reads overrides
  from the argv it is given)."""
  flag_values = flags.FlagValues()
  config_flags.DEFINE_config_file("config", None, "", flag_values=flag_values, lock_config=True,
                                  sys_argv=argv)
  flag_values(argv)
  return flag_values


def _load_config():
  return _parse(["prog", f"--config={_TRUTHRL}"]).config


def _parse_as_train_py(override_dict):
  """What launch/train.py builds from the flags `to_flags` renders (its own parser and rule)."""
  preset_flag = [f for f in overrides.to_flags(override_dict) if f.startswith("--preset=")]
  config_args = [f for f in overrides.to_flags(override_dict) if f.startswith("--config.")]
  flag_values = _parse(["prog", f"--config={_TRUTHRL}", *config_args])
  names = preset_flag[0].split("=", 1)[1] if preset_flag else None
  return overrides.apply_presets(flag_values.config, names,
                                 config_flags.get_override_values(flag_values["config"]))


def test_flags_round_trip_equals_in_process():
  ov = {"preset": "runlocal", "rollout.group_size": 2, "loss.kl_coef": 0.0,
        "reward.functions[0].options.abstain_reward": -0.5, "rollout.stop": ("</a>", "</b>"),
        "rollout.top_k": 5, "model.remat": False, "stages[0].num_steps": 7}
  flags_list = overrides.to_flags(ov)
  assert flags_list[0] == "--preset=runlocal"
  assert "--config.reward.functions[0].options.abstain_reward=-0.5" in flags_list
  assert "--config.model.remat=false" in flags_list
  in_process = overrides.apply(_load_config(), ov)
  assert _parse_as_train_py(ov).to_dict() == in_process.to_dict()
  # the preset ran (runlocal's model and batch) and every explicit field won over it
  assert in_process.model.path == presets.SMOLLM2 and in_process.rollout.prompts_per_step == 2
  assert in_process.rollout.group_size == 2 and in_process.stages[0].num_steps == 7
  assert in_process.model.remat is False and in_process.rollout.stop == ("</a>", "</b>")
  assert in_process.reward.functions[0].options.abstain_reward == -0.5


def test_fixed_fields_win_over_presets_and_run_fields_over_fixed():
  base = _load_config()
  base.rollout.group_size = 3  # as a shared --config.rollout.group_size=3 leaves it
  c = overrides.apply(base, {"preset": ["runlocal"], "loss.kl_coef": 0.5},
                      fixed={"rollout.group_size": 3, "loss.kl_coef": 0.1})
  assert c.rollout.group_size == 3 and c.loss.kl_coef == 0.5 and c.model.path == presets.SMOLLM2


def test_bad_names_fail_early():
  with pytest.raises(ValueError, match=r"preset 'dapo_v9'.*no function dapo_v9\(config\).*runlocal"):
    overrides.apply(_load_config(), {"preset": "dapo_v9"})
  with pytest.raises(ValueError, match=r"no field 'learnig_rate' under optimizer"):
    overrides.apply(_load_config(), {"optimizer.learnig_rate": 1e-6})
  with pytest.raises(ValueError, match=r"stages has no item \[3\]"):
    overrides.apply(_load_config(), {"stages[3].num_steps": 1})
  with pytest.raises(ValueError, match=r"override loss.kl_coef='high'"):
    overrides.apply(_load_config(), {"loss.kl_coef": "high"})
  assert overrides.preset_names("a, b") == ["a", "b"] and overrides.preset_names(None) == []
