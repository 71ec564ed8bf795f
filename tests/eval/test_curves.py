"""curves.png's panels (eval/curves.py): the corner alarm's abstention rates get a panel of their own."""

from grounding_jax.eval import curves


def test_the_curves_draw_the_abstention_of_both_sides():
  keys = {"reward/mean", "health/abstain_answerable", "health/abstain_unanswerable"}
  panels = dict(curves._panels(keys))  # pylint: disable=protected-access
  assert panels["abstention (the corner alarm)"] == sorted(keys - {"reward/mean"})
  assert "abstention (the corner alarm)" not in dict(curves._panels({"reward/mean"}))  # pylint: disable=protected-access
