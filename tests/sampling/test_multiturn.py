"""Multi-turn rollouts: a scripted policy that searches 0, 1 and max_turns − 1 times in one batch,
against a small deterministic tool; the inserted tokens' mask; sampler vs trainer log-probs."""

import jax.numpy as jnp
import numpy as np
import pytest

from grounding_jax import sampling
from grounding_jax.models import logprobs as logprobs_lib
from grounding_jax.rl import losses
from grounding_jax.sampling import engine, multiturn
from grounding_jax.sampling.tools import ToolResult, Withheld
from scripted_policy import FORMAT, PROMPTS, STOP, DictTool, prompts


@pytest.mark.parametrize("num_samples", [1, 2])
def test_scripted_policy_searches_zero_one_and_max_times(scripted, tokenizer, num_samples):
  tool = DictTool()
  ids, mask = prompts(tokenizer)
  before = engine.trace_counts().get("continue", 0)
  gen = multiturn.generate_turns(scripted, ids, mask, tool=tool, tool_format=FORMAT, max_turns=3,
                                 max_new_tokens=24, tokenizer=tokenizer, stop=STOP, eos_ids=[2],
                                 pad_id=2, num_samples=num_samples)
  g = num_samples
  expected = [" apple banana finish"[len(" apple"):],
              " box mars halt info lemon grape finish",
              " fox bean halt info peach plum six kiwi halt info wax finish"]
  assert gen.texts == [t for t in expected for _ in range(g)]
  assert [len(c) for c in gen.tool_calls] == [n for n in (0, 1, 2) for _ in range(g)]
  assert [c.query for c in gen.tool_calls[2 * g]] == ["bean", "kiwi"]
  assert gen.tool_calls[g][0].result.doc_ids == ("d1",)
  # One batched call per turn: both searching prompts' rows in turn 1, the last one's in turn 2.
  assert tool.batches == [["mars"] * g + ["bean"] * g, ["kiwi"] * g]
  # The inserted tokens (" info", the passage) are the mask's zeros; logprob 0 there.
  for r, text in enumerate(expected):
    row = r * g
    toks = [tokenizer.decode([t]) for t in gen.token_ids[row, :gen.lengths[row]]]
    inserted = [t for t, p in zip(toks, gen.policy_mask[row, :gen.lengths[row]]) if not p]
    assert inserted == [w for c in gen.tool_calls[row] for w in (" info", c.result.text)]
    assert np.all(gen.logprobs[row][~gen.policy_mask[row]] == 0.0)
  assert not gen.truncated.any()
  assert np.array_equal(gen.completion_mask, np.arange(24)[None] < gen.lengths[:, None])
  assert engine.trace_counts()["continue"] - before <= 1  # one chunk bucket: compiled once


def test_sampler_logprobs_equal_trainer_logprobs_on_policy_tokens(scripted, tokenizer):
  """The cached continuation (per-row slots and positions after an inserted chunk) gives the
  log-probs a full forward pass over [prompt | completion] gives (the log-prob gap monitor)."""
  ids, mask = prompts(tokenizer)
  gen = multiturn.generate_turns(scripted, ids, mask, tool=DictTool(), tool_format=FORMAT,
                                 max_turns=3, max_new_tokens=24, tokenizer=tokenizer, stop=STOP,
                                 eos_ids=[2], pad_id=2, num_samples=2)
  rows = np.repeat(np.arange(len(PROMPTS)), 2)
  policy = gen.completion_mask & gen.policy_mask

  def trainer_logp(completion_ids):
    logp, _ = logprobs_lib.completion_logprobs(
        scripted, jnp.asarray(gen.prompt_ids[rows]), jnp.asarray(gen.prompt_mask[rows]),
        jnp.asarray(completion_ids), jnp.asarray(gen.completion_mask), temperature=1.0)
    return np.asarray(logp)

  gap = losses.logprob_gap(trainer_logp(gen.token_ids), gen.logprobs, policy, xp=np)
  assert float(gap["logprob_gap_peak"][0]) < 1e-4, gap
  # The check has teeth: with other inserted tokens the later policy tokens' log-probs move.
  other = np.where(gen.policy_mask, gen.token_ids, tokenizer.encode(" apple")[0])
  moved = np.abs(trainer_logp(other) - gen.logprobs)[policy]
  assert moved.max() > 1e-3


def test_budget_counts_inserted_tokens_and_cuts_the_result(scripted, tokenizer):
  ids, mask = prompts(tokenizer)
  gen = multiturn.generate_turns(scripted, ids[1:2], mask[1:2], tool=DictTool(), tool_format=FORMAT,
                                 max_turns=3, max_new_tokens=4, tokenizer=tokenizer, stop=STOP,
                                 eos_ids=[2], pad_id=2)
  # " box mars halt" (3 policy tokens), then one of the result's two tokens fits.
  assert gen.lengths.tolist() == [4] and gen.truncated.tolist() == [True]
  assert gen.policy_mask[0].tolist() == [True, True, True, False]


def test_one_turn_is_generate_ids_and_a_missing_tool_is_named(scripted, tokenizer):
  ids, mask = prompts(tokenizer)
  kw = dict(max_new_tokens=8, tokenizer=tokenizer, stop=STOP, eos_ids=[2], pad_id=2)
  one = multiturn.generate_turns(scripted, ids, mask, tool=None, tool_format=FORMAT, max_turns=1,
                                 **kw)
  ref = sampling.generate_ids(scripted, ids, mask, **kw)
  assert one.texts == ref.texts and one.policy_mask is None
  np.testing.assert_array_equal(one.token_ids, ref.token_ids)
  with pytest.raises(ValueError, match="rollout.max_turns=2"):
    multiturn.generate_turns(scripted, ids, mask, tool=None, tool_format=FORMAT, max_turns=2, **kw)


class WithholdingDictTool(DictTool):
  """DictTool that can withhold: records the Withheld of every query, and hides a result whose id
  its query's Withheld names."""

  withholds = True

  def __init__(self):
    super().__init__()
    self.withheld = []

  def __call__(self, queries, withheld=None):
    self.withheld.append(list(withheld))
    results = super().__call__(queries)
    return [ToolResult("", ()) if w.hides(r.doc_ids[0], r.text) else r
            for r, w in zip(results, withheld)]


def test_each_row_passes_its_prompts_withheld_passages_with_its_queries(scripted, tokenizer):
  tool = WithholdingDictTool()
  ids, mask = prompts(tokenizer)
  hide_d2 = Withheld(ids=frozenset({"d2"}))
  gen = multiturn.generate_turns(scripted, ids, mask, tool=tool, tool_format=FORMAT, max_turns=3,
                                 max_new_tokens=24, tokenizer=tokenizer, stop=STOP, eos_ids=[2],
                                 pad_id=2, num_samples=2, withheld=[Withheld(), Withheld(), hide_d2])
  # Turn 1: prompt 1's two rows ("mars") withhold nothing, prompt 2's two ("bean") withhold d2.
  assert tool.batches[0] == ["mars", "mars", "bean", "bean"]
  assert tool.withheld[0] == [Withheld(), Withheld(), hide_d2, hide_d2]
  assert [c[0].result.doc_ids for c in gen.tool_calls[2:]] == [("d1",), ("d1",), (), ()]
  with pytest.raises(ValueError, match="withheld has 2 entries for 3 prompts"):
    multiturn.generate_turns(scripted, ids, mask, tool=tool, tool_format=FORMAT, max_turns=3,
                             max_new_tokens=8, tokenizer=tokenizer, withheld=[hide_d2] * 2)
  with pytest.raises(ValueError, match="cannot filter per query"):
    multiturn.generate_turns(scripted, ids, mask, tool=DictTool(), tool_format=FORMAT, max_turns=3,
                             max_new_tokens=8, tokenizer=tokenizer, withheld=[hide_d2] * 3)
