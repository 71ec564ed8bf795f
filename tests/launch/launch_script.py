"""Load a launch/*.py script as a module in the test process.

Each script defines its absl flags at import, in the one global FLAGS, and several scripts share
names (--config, --workdir, ...). Tests call the scripts' functions with explicit arguments, never
their parsed flags, so a name an earlier script defined is dropped before the next one defines it.
"""

import importlib.util
import pathlib
import sys

from absl import flags

ROOT = pathlib.Path(__file__).resolve().parents[2]


def load(script: str, name: str):
  """launch/<script>.py as module `name` (registered in sys.modules: its dataclasses look it up)."""
  path = ROOT / "launch" / f"{script}.py"
  while True:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
      spec.loader.exec_module(module)
      return module
    except flags.DuplicateFlagError as e:
      taken = [n for n in list(flags.FLAGS) if f"--{n}" in str(e) or f"'{n}'" in str(e)]
      if not taken:
        raise
      for n in taken:
        delattr(flags.FLAGS, n)
