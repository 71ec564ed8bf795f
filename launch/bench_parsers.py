r"""Every parser and reward on 1M-character adversarial completions: seconds per call, target < 1 s.

  python launch/bench_parsers.py                  # ~1 min on 2 cores
  python launch/bench_parsers.py --chars=4000000

Adversarial texts are what a diverging policy writes or a truncation leaves: thousands of unclosed
`<answer>` or `\boxed{` openers, repeated `</think>` closers before a final answer, nested braces, one
well-formed answer whose blocks are a megabyte long, and plain text with no tags. Each is scored by
every recipe's parser and reward (tests/text/test_tags.py checks that their cost grows linearly; this
prints the absolute time). The peer is the regular expression the authors' code uses, where one
exists: its time is printed beside ours on the same text, shortened to --peer_chars.
"""

from __future__ import annotations

import re
import time

from absl import app
from absl import flags
import numpy as np

from grounding_jax import text
from grounding_jax.data.schema import Example, Passage
from grounding_jax import recipes
from grounding_jax.text import tags

_CHARS = flags.DEFINE_integer("chars", 1_000_000, "Length of each adversarial completion.")
_PEER_CHARS = flags.DEFINE_integer(
    "peer_chars", 40_000, "Length at which the authors' regexes are timed beside ours (they are "
    "quadratic on some of these texts: at 1M characters they run for hours).")


class WordNLI:
  """Deterministic NLI for timing: entailed iff every hypothesis word occurs in the premise."""

  def entails(self, premises, hypotheses):
    return np.array([set(text.normalize_answer(h).split()) <= set(text.normalize_answer(p).split())
                     for p, h in zip(premises, hypotheses)], bool)


def texts(n: int) -> dict[str, str]:
  long = ("Orsk lies on the river. " * (n // 24))[:n // 2]
  return {
      "unclosed <answer>": "<answer>" * (n // 8),
      "unclosed \\boxed{": "\\boxed{" * (n // 7),
      "nested braces": "\\boxed{" + "{" * (n // 2) + "}" * (n // 2 - 1),
      "</think> closers": "<think>" + "</think> " * (n // 9) + "<answer>x</answer>",
      "huge blocks": (f"<think>{long}</think><evidence>{long}</evidence>"
                      f"<answer>{long} [1].</answer>")[:n + 64],
      "plain text": long + long,
  }


# Each recipe's parser (Recipe.parse), then the shared tag readers.
PARSERS = {
    **{f"{name}.parse": recipes.get_recipe(name).parse for name in recipes.available_recipes()},
    "tags.extract_boxed": tags.extract_boxed, "tags.blocks(answer)": lambda t: tags.blocks(t, "answer"),
}
# The authors' regexes for the same reads: Trust-Align's format check, ARENA's answer read
# (`src/evaluate.py`), TruthRL's box read.
PEERS = {
    "trust_stage1.parse": lambda t: re.match(r"^\s*<think>(.*?)</think>\s*<answer>(.*?)</answer>\s*$", t,
                                           re.S),
    "arena.parse": lambda t: re.search(r"<answer>\s*(.*?)\s*</answer>", t, re.S | re.M),
    "tags.extract_boxed": lambda t: re.search(r"\\boxed{(.*?)}", t, re.S),
    "tags.blocks(answer)": lambda t: re.findall(r"<answer>(.*?)</answer>", t, re.S),
}


def rewards():
  ex = Example("What is the capital of Veltria?",
               passages=(Passage("Orsk is the capital of Veltria.", title="Veltria"),),
               answers=("Orsk",), evidence=("Orsk is the capital of Veltria.",),
               gold_passage_ids=(1,), answerable=True, id="adv", meta={"dataset": "asqa"})
  # The judges are not what is measured: stand-ins for the options a reward cannot do without.
  stand_ins = {"judge": "exact_match", "nli": WordNLI()}
  fns = {name: recipes.get_reward(name, **{k: stand_ins[k] for k in recipes.get_recipe(name).required_judges})
         for name in recipes.available_recipes()}
  return ex, fns


def _seconds(fn, *args, **kwargs) -> float:
  start = time.perf_counter()
  fn(*args, **kwargs)
  return time.perf_counter() - start


def main(argv):
  del argv
  ex, fns = rewards()
  worst = 0.0
  peer_texts = texts(_PEER_CHARS.value)
  for kind, t in texts(_CHARS.value).items():
    print(f"\n{kind} ({len(t):,} characters; authors' regex at {len(peer_texts[kind]):,})")
    for name, parse in PARSERS.items():
      ours = _seconds(parse, t)
      worst = max(worst, ours)
      line = f"  {name:22s} ours {ours:8.3f} s"
      if name in PEERS:
        short = peer_texts[kind]
        peer, ours_short = _seconds(PEERS[name], short), _seconds(parse, short)
        line += (f" | at {len(short):,}: authors' regex {peer:7.3f} s, ours {ours_short:7.4f} s "
                 f"({peer / max(ours_short, 1e-6):.0f}x)")
      print(line)
    for name, fn in fns.items():
      extra = {k: [t] for k in recipes.get_recipe(name).rollout_extras}
      secs = _seconds(fn, [t], [ex], completion_lengths=[len(t)], **extra)
      worst = max(worst, secs)
      print(f"  reward {name:15s} ours {secs:8.3f} s")
  print(f"\nslowest call: {worst:.3f} s (target < 1 s on {_CHARS.value:,} characters): "
        f"{'met' if worst < 1.0 else 'MISSED'}")


if __name__ == "__main__":
  app.run(main)
