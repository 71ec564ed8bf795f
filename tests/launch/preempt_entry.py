"""launch/train.py with a pause at the start of every GRPO step, for test_train_preemption.py; not a test.

usage: python preempt_entry.py MARKER_DIR <launch/train.py flags>
Before step n runs, each process writes MARKER_DIR/step_<n>.p<process index> and sleeps 1 s, so the
test can send SIGTERM while a known step is under way. Everything else is launch/train.py as it is.
"""

import pathlib
import runpy
import sys
import time

import jax

from grounding_jax.rl import stages

ROOT = pathlib.Path(__file__).resolve().parents[2]
_MARKERS = pathlib.Path(sys.argv.pop(1))
_STEP = stages.Stage.step


def _paused_step(self, run, key, global_step, *args, **kwargs):
  (_MARKERS / f"step_{global_step + 1}.p{jax.process_index()}").write_text("")
  time.sleep(1.0)
  return _STEP(self, run, key, global_step, *args, **kwargs)


if __name__ == "__main__":
  stages.Stage.step = _paused_step
  sys.argv[0] = str(ROOT / "launch" / "train.py")
  runpy.run_path(sys.argv[0], run_name="__main__")
