"""Judge styles reach judges/ as objects: with_style resolves a config's style name with a recipe's
styles, and a correctness LLM judge without one is refused before anything loads."""

import pickle

import pytest

from grounding_jax import judges
from grounding_jax.judges import prompts as jp
from grounding_jax.judges.style import JudgeStyle, with_style


def _messages(question, golds, prediction, few_shot=None):
  return [{"role": "user", "content": f"{question}|{','.join(golds)}|{prediction}|{few_shot}"}]


def _exact_yes(reply):
  return reply == "yes" if isinstance(reply, str) else None


FIRST = JudgeStyle(name="first", messages=_messages, parser=jp.parse_yes_no,
                   parsers={"exact": _exact_yes}, decoding=dict(max_tokens=3, temperature=0.0))
SECOND = JudgeStyle(name="second", messages=_messages, parser=_exact_yes, per_alias=True,
                    few_shot_block=lambda path: f"block from {path}")
STYLES = {"first": FIRST, "second": SECOND}


def test_with_style_resolves_names_and_passes_the_rest_through():
  spec = {"kind": "llm", "path": "/m", "style": "second"}
  assert with_style(spec, STYLES) == {**spec, "style": SECOND}
  assert with_style({"kind": "openai", "base_url": "u", "model": "m"}, STYLES)["style"] is FIRST
  assert with_style({"kind": "llm", "style": FIRST}, STYLES)["style"] is FIRST
  for other in (None, "exact_match", {"kind": "exact_match"}, {"kind": "nli", "path": "/m"}):
    assert with_style(other, STYLES) == other
  judge_object = lambda q, p, g: [True] * len(p)
  assert with_style(judge_object, STYLES) is judge_object
  assert with_style(spec, {}) is spec  # a recipe without judge styles leaves specs alone
  with pytest.raises(ValueError, match=r"style='third'.*\['first', 'second'\]"):
    with_style({"kind": "llm", "style": "third"}, STYLES)


def test_the_judge_uses_the_styles_messages_parser_and_few_shot_block():
  seen = []

  def backend(prompts):
    seen.extend(prompts)
    return ["yes"] * len(prompts)

  judge = judges.LLMCorrectnessJudge(backend, style=SECOND, examples_path="/x", cache=False)
  assert judge.examples == "block from /x"
  assert judge(["q"], ["p"], [["a", "b"]]).tolist() == [True]
  assert seen == ["q|a|p|block from /x"]  # per alias: "a" was correct, "b" never asked
  assert judges.LLMCorrectnessJudge(backend, style=FIRST, parser="exact")._parse is _exact_yes
  assert judges.LLMCorrectnessJudge(backend, style=FIRST, parser="robust")._parse is jp.parse_yes_no
  with pytest.raises(ValueError, match="unknown reply parser 'nope'"):
    judges.LLMCorrectnessJudge(backend, style=FIRST, parser="nope")
  with pytest.raises(ValueError, match="not a judges.JudgeStyle"):
    judges.LLMCorrectnessJudge(backend, style="first")


def test_a_correctness_spec_needs_a_style_object_and_pickles_with_it():
  with pytest.raises(ValueError, match="needs style="):
    judges.lazy({"kind": "llm", "path": "/m", "style": "first"})
  with pytest.raises(ValueError, match="needs style="):
    judges.lazy({"kind": "openai", "base_url": "http://h:1/v1", "model": "m"})
  assert isinstance(judges.lazy({"kind": "llm", "path": "/m"}, role="nli"), judges.LazyJudge)
  lazy = judges.lazy({"kind": "openai", "base_url": "http://h:1/v1", "model": "m", "style": FIRST})
  assert pickle.loads(pickle.dumps(lazy)).spec["style"] == FIRST
  built = judges.build({"kind": "openai", "base_url": "http://h:1/v1", "model": "m", "style": FIRST})
  assert built.backend.body == {"max_tokens": 3, "temperature": 0.0}  # the style's decoding
