"""docs/config.md is the table the declarations generate, so it names every field with its default."""

import pathlib

from grounding_jax.models import lora
from grounding_jax.rl.config import describe
from grounding_jax.rl.config import fields

PAGE = pathlib.Path(__file__).resolve().parents[3] / "docs" / "config.md"


def test_the_page_is_up_to_date():
  assert PAGE.read_text() == describe.markdown(), (
      "docs/config.md is stale: python -m grounding_jax.rl.config.describe > docs/config.md")


def test_every_leaf_of_the_default_config_has_a_row():
  def leaves(node, prefix=""):
    for key in node.keys():
      value, path = node[key], f"{prefix}{key}"
      if hasattr(value, "keys") and len(value):
        yield from leaves(value, path + ".")
      else:
        yield path

  rows = describe.markdown()
  missing = [p for p in leaves(fields.default_config())
             if f"| `{p}` |" not in rows and p != "stages"]  # stages: the stages[].* rows
  assert not missing, missing
  assert "| `stages[].data.kind` |" in rows and "| `model.lora.rank` |" in rows
  assert len(lora.FIELDS) == 5
