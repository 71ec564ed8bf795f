"""The RL trainer's config: its fields declared once, their checks, presets and overrides.

    from grounding_jax.rl import config as rl_config
    c = rl_config.default_config()                   # every field's default (fields.py)
    c.stages = [rl_config.stage("grpo", 100, recipe="grace")]
    checks.check_config(c)                           # raises ConfigError, one line per bad value

Modules: fields (the declarations, default_config, stage) · checks (the generated per-field checks
and the hand-written rules between fields) · presets (DAPO / Dr.GRPO / RLOO, runlocal, reward_fn) ·
overrides (presets and `--config.<field>` values on a config: launch/train.py, launch/sweep.py) ·
describe (docs/config.md, the table of every field).
"""

from grounding_jax.rl.config.fields import default_config, stage

__all__ = ["default_config", "stage"]
