"""LLM judges (judges/llm.py): the logic around the backend in the papers' styles (their prompts and
parsers are tested in tests/recipes/test_judge_styles.py); then the judges on our own sampler,
single-device and sharded from a config spec.

Fake LLM backends are used only where the assertion is about logic around the judge (exact-match
short-circuit, per-alias early exit, parsing, counting); the sampler tests compare with the same
greedy generations parsed by the paper's rule.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grounding_jax import judges
from grounding_jax.judges import base as judges_base
from grounding_jax.judges import from_config as judges_build
from grounding_jax.recipes.arena import judge as arena_judge
from grounding_jax.recipes.grace import judge as grace_judge
from grounding_jax.recipes.truthrl import judge as truthrl_judge

# --- LLM judges: parsing and the logic around the backend -------------------------------------------

class FakeBackend:
  """Deterministic stand-in for an LLM: answers from a rule; records every prompt it receives."""

  def __init__(self, rule):
    self.rule, self.prompts = rule, []

  def __call__(self, prompts):
    self.prompts.extend(prompts)
    return [self.rule(p) for p in prompts]


_REPLY_TEXT = st.one_of(st.text(max_size=200), st.sampled_from(['{"score": 1}', "yes", "No.", "{", "}{", '"score":']))


@settings(max_examples=50, deadline=None)
@given(replies=st.lists(_REPLY_TEXT, min_size=3, max_size=3), preds=st.lists(st.text(max_size=30), min_size=3,
                                                                               max_size=3))
def test_correctness_judge_never_raises_on_model_text(replies, preds):
  for style in (truthrl_judge.STYLE, arena_judge.STYLE, grace_judge.STYLE):
    it = iter(replies * 3)
    judge = judges.LLMCorrectnessJudge(lambda prompts: [next(it) for _ in prompts], style=style, cache=False)
    out = judge(["q"] * 3, preds, [["gold"], ["a", "b"], ["c"]])
    assert out.dtype == bool and out.shape == (3,)


def test_correctness_judge_em_short_circuit_and_empty():
  backend = FakeBackend(lambda p: "yes")
  judge = judges.LLMCorrectnessJudge(backend, style=arena_judge.STYLE)
  out = judge(["q1", "q2", "q3", "q4"], ["The Beatles", "Fab Four", "  ", "Lennon"],
              [["beatles"], ["The Beatles"], ["x"], []])
  np.testing.assert_array_equal(out, [True, True, False, False])
  assert len(backend.prompts) == 1 and "Fab Four" in backend.prompts[0]  # only the non-EM, non-empty row
  assert backend.prompts[0].startswith(arena_judge.ARENA_SYSTEM + "\n\n")
  assert judge.stats["em_short_circuit"] == 1 and judge.stats["empty"] == 2 and judge.stats["judge_calls"] == 1


def test_truthrl_judge_asks_alias_by_alias_and_stops_at_first_yes():
  # TruthRL's per-alias judging: gold ["a", "b"], judge says 0 for "a" and 1 for "b" → correct after 2 calls.
  def rule(prompt):
    return '{"explanation": "", "score": 1}' if "Ground truth: b\n" in prompt else '{"score": 0}'
  backend = FakeBackend(rule)
  judge = judges.LLMCorrectnessJudge(backend, style=truthrl_judge.STYLE)
  out = judge(["q", "q2"], ["pred", "other"], [["a", "b", "c"], ["z"]])
  np.testing.assert_array_equal(out, [True, False])
  asked = [p.split("Ground truth: ")[1].split("\n")[0] for p in backend.prompts]
  assert asked == ["a", "z", "b"]  # round 1 asks a and z; round 2 only the undecided row's b; never c
  assert judge.stats["judge_calls"] == 3


def test_truthrl_reasoning_judge_sees_full_response_without_em_shortcut():
  backend = FakeBackend(lambda p: '{"score": 1}' if "Reasoning: <think>Document" in p else '{"score": 0}')
  judge = judges.LLMCorrectnessJudge(backend, style=truthrl_judge.REASONING_STYLE)
  responses = ["<think>Document [1] says Paris.</think> \\boxed{Paris}", "Paris"]
  out = judge(["q", "q"], responses, [["Paris"], ["Paris", "paris, france"]])
  np.testing.assert_array_equal(out, [True, False])  # "Paris" equals the gold, but EM does not apply
  assert len(backend.prompts) == 3 and "Reasoning: <think>Document [1]" in backend.prompts[0]
  assert backend.prompts[0].startswith(truthrl_judge.TRUTHRL_REASONING_INSTRUCTIONS + "\nYou should make")


def test_unparseable_replies_count_and_never_raise():
  replies = iter(['{"score": 2}', "I cannot", None, 7])
  judge = judges.LLMCorrectnessJudge(FakeBackend(lambda p: next(replies)), style=truthrl_judge.STYLE, cache=False)
  out = judge(["q"] * 4, ["w", "x", "y", "z"], [["g"]] * 4)
  assert not out.any() and judge.stats["unparseable"] == 4 and judge.last_unparseable.all()
  with pytest.raises(TypeError, match="sequence of gold strings"):
    judge(["q"], ["p"], ["gold as a bare string"])
  with pytest.raises(ValueError, match="one reply per prompt"):
    judges.LLMCorrectnessJudge(lambda prompts: [], style=grace_judge.STYLE)(["q"], ["p"], [["g"]])


def test_grace_style_counts_only_an_exact_yes():
  # GRACE's code (arXiv:2601.04525 §4.3 LJ, the authors' evaluator): correct iff reply.lower() == "yes"; "Yes." is wrong.
  for reply, want in (("Yes.", False), ("YES", True), ("yes", True), (" yes", False)):
    judge = judges.LLMCorrectnessJudge(FakeBackend(lambda p, r=reply: r), style=grace_judge.STYLE)
    assert judge(["q"], ["p"], [["g"]]).tolist() == [want], reply
  lenient = judges.LLMCorrectnessJudge(FakeBackend(lambda p: "Yes."), style=grace_judge.STYLE, parser="robust")
  assert lenient(["q"], ["p"], [["g"]]).tolist() == [True]


def test_llm_nli_judge_with_callable_backend():
  backend = FakeBackend(lambda p: "Yes" if "cat" in p.split("Hypothesis:")[1] else "No, it does not.")
  judge = judges.LLMNLIJudge(backend)
  out = judge.entails(["the cat sat", "the cat sat", "the cat sat"], ["a cat", "a dog", "a cat"])
  np.testing.assert_array_equal(out, [True, False, True])
  assert len(backend.prompts) == 2  # the repeated pair is asked once
  np.testing.assert_array_equal(judge.entails(["the cat sat"], ["a dog"]), [False])
  assert len(backend.prompts) == 2 and judge.stats["cache_hits"] == 1
  assert isinstance(judge, judges.NLIJudge)
  assert isinstance(judges.LLMCorrectnessJudge(backend, style=arena_judge.STYLE), judges.CorrectnessJudge)
  assert isinstance(judges.ExactMatchJudge(), judges.CorrectnessJudge)
  assert judges.ExactMatchJudge()(["q", "q"], ["the Beatles", "Wings"], [["Beatles"], ["Beatles"]]).tolist() == [True, False]


def test_caches_are_bounded(monkeypatch):
  monkeypatch.setattr(judges_base, "CACHE_SIZE", 2)
  backend = FakeBackend(lambda p: "yes")
  judge = judges.LLMNLIJudge(backend)
  judge.entails(["p1", "p2", "p3"], ["h", "h", "h"])
  judge.entails(["p3", "p1"], ["h", "h"])  # p3 still cached; p1 was evicted (oldest) → asked again
  assert len(backend.prompts) == 4 and judge.stats["cache_hits"] == 1


# --- LLM judges on our own sampler (a tiny random llama driven by SmolLM2's tokenizer) ---------------

@pytest.fixture(scope="module")
def sampler_backend(tiny_checkpoint, smollm2_dir):
  from grounding_jax.models import load_pretrained, load_tokenizer
  model = load_pretrained(tiny_checkpoint("llama", vocab_size=49152, initializer_range=0.3,
                                          bos_token_id=1, eos_token_id=2, pad_token_id=2))
  return judges.SamplerBackend(model, load_tokenizer(smollm2_dir), max_new_tokens=4, batch_size=4)


def test_llm_judge_through_the_sampler(sampler_backend):
  # One jit compile: the judge's call and the reference call have the same shapes.
  from grounding_jax import sampling
  backend = sampler_backend
  # Chat template applied: SmolLM2's template wraps turns in <|im_start|> … <|im_end|>.
  rendered = backend.render(arena_judge.arena_messages("q", ["Paris"], "Lyon"))
  assert rendered.startswith("<|im_start|>system\n" + arena_judge.ARENA_SYSTEM) and rendered.endswith("<|im_start|>assistant\n")
  questions = ["Capital of France?", "Capital of Italy?", "Who wrote Hamlet?"]
  preds = ["Lyon", "Rome", "Marlowe"]
  golds = [["Paris"], ["rome"], ["Shakespeare"]]
  judge = judges.LLMCorrectnessJudge(backend, style=arena_judge.STYLE, parser="arena", cache=False)
  verdicts = judge(questions, preds, golds)
  # Reference: the same greedy generations, all prompts in one call, parsed with ARENA's rule.
  asked = [0, 2]  # row 1 is an exact match and never reaches the LLM
  prompts = [backend.render(arena_judge.arena_messages(questions[i], golds[i], preds[i])) for i in asked]
  texts = sampling.generate(backend.model, backend.tokenizer, prompts, max_new_tokens=4).texts
  expected = [True, True, True]
  for i, t in zip(asked, texts):
    expected[i] = bool(arena_judge.parse_yes_no_arena(t))
  np.testing.assert_array_equal(verdicts, expected)
  assert judge.stats["judge_calls"] == 2 and judge.stats["em_short_circuit"] == 1
  assert judge.stats["unparseable"] == sum(arena_judge.parse_yes_no_arena(t) is None for t in texts)


def test_llm_judge_from_config_runs_sharded_on_a_mesh(tiny_smollm2_dir):
  # kind "llm" with mesh axes: the judge model is sharded over this process's 8 (fake) devices and
  # sampled on that mesh; its replies equal the single-device judge's greedy replies.
  import jax
  spec = {"kind": "llm", "path": str(tiny_smollm2_dir), "style": arena_judge.STYLE, "parser": "arena",
          "max_new_tokens": 4, "batch_size": 8, "cache": False}
  sharded = judges.build({**spec, "mesh": {"fsdp": -1}})
  plain = judges.build(spec)
  mesh = sharded.backend.mesh
  assert mesh is not None and mesh.devices.size == jax.local_device_count() == 8
  embed = sharded.backend.model.embed[...]
  assert len(embed.sharding.device_set) == 8 and not embed.sharding.is_fully_replicated
  conversations = [arena_judge.arena_messages("q", [g], p) for g, p in (("Paris", "Lyon"), ("Rome", "Milan"),
                                                               ("Oslo", "Bergen"))]
  prompts = [plain.backend.render(m) for m in conversations]
  assert sharded.backend(prompts) == plain.backend(prompts)
  with pytest.raises(ValueError, match="mesh axis sizes"):
    judges_build.judge_mesh(4)
