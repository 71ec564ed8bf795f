"""TruthRL's judge prompts (arXiv:2509.25760 Tables 11-12) against the authors' strings; the paper's
few-shot blocks.

The expected texts below are typed from the instructions as restored from the authors' code, not from
grounding_jax; the SHA-256 digests are those of the strings in TruthRL's released
`evaluation/prompts.py` (computed from the authors' code), so both sides are independent references.
"""

import hashlib
import logging

import pytest

from grounding_jax import judges
from grounding_jax.recipes.truthrl import judge as jp

PAPER_INSTRUCTIONS = (  # Table 11, restored (trailing space after "1 or 0.")
    'Assume you are a human expert in grading predictions given by a model. You are given a question '
    'and a model prediction. Judge if the prediction matches the ground truth answer by following '
    'these steps:\n'
    '1: Take it as granted that the Ground Truth is always correct.\n'
    '2: If the Prediction exactly matches the Ground Truth, "score" is 1.\n'
    '3: If the Prediction does not exactly match the Ground Truth, go through the following steps and '
    'likely give a score as 0.\n'
    '4: If the Ground Truth is a number, "score" is 1 if and only if the Prediction gives a number that '
    'almost exactly matches the ground truth.\n'
    '5: If the Prediction is self-contradictory, "score" must be 0.\n'
    '6: If the prediction is not answering the question, "score" must be 0.\n'
    '7: If the prediction is a concise and correct summary of the ground truth, "score" is 1.\n'
    '8: If ground truth contains a set of items, prediction must contain exactly same items for the '
    'score to be 1.\n'
    '9: Otherwise, "score" is 0.\n'
    '\n'
    '### Output a JSON blob with an "explanation" field explaining your answer as short as possible and '
    'an "score" field with value 1 or 0. \n'
)
PAPER_REASONING_INSTRUCTIONS = (  # Table 12, restored (no trailing space)
    'Assume you are a human expert in evaluating the usefulness of model-generated reasoning. You are '
    'given a question and a model-generated reasoning. Judge if the reasoning provides precise '
    'information to correctly answer the question by following these steps:\n'
    '1: Evaluate if the reasoning directly addresses the question.\n'
    '2: Check if the key points in the reasoning are relevant to the query.\n'
    '3: If the reasoning provides precise and relevant information, "score" is 1.\n'
    '4: If the reasoning is vague, unrelated, or does not address the question, "score" is 0.\n'
    '\n'
    '### Output a JSON blob with an "explanation" field explaining your answer as short as possible and '
    'a "score" field with value 1 or 0.\n'
)
AUTHORS_SHA256 = {  # TruthRL evaluation/prompts.py INSTRUCTIONS / INSTRUCTIONS_REASONING
    "INSTRUCTIONS": "88e7c0a4bfd845d6c61dcc8b4e3f9a5a4c419e3b6fe750530662edd3f8879a00",
    "INSTRUCTIONS_REASONING": "ce1c5fa9172b689ac65483d90bfcfdeaf853de9ff93bffe7ed9fd8bf90653121",
}


def _sha(text):
  return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_truthrl_instructions_are_the_papers_and_the_authors_strings():
  assert jp.TRUTHRL_INSTRUCTIONS == PAPER_INSTRUCTIONS
  assert jp.TRUTHRL_REASONING_INSTRUCTIONS == PAPER_REASONING_INSTRUCTIONS
  assert _sha(jp.TRUTHRL_INSTRUCTIONS) == AUTHORS_SHA256["INSTRUCTIONS"]
  assert _sha(jp.TRUTHRL_REASONING_INSTRUCTIONS) == AUTHORS_SHA256["INSTRUCTIONS_REASONING"]
  # The message layout of Table 11 in the authors' code: system = INSTRUCTIONS + "\n" + examples; one alias per call.
  msgs = jp.truthrl_messages("q?", "g", "p", examples="EXAMPLES")
  assert msgs == [{"role": "system", "content": PAPER_INSTRUCTIONS + "\nEXAMPLES"},
                  {"role": "user", "content": "Question: q?\n Ground truth: g\n Prediction: p\n"}]


def _backend(prompts):
  return ['{"score": 1}'] * len(prompts)


def test_the_papers_few_shot_block_is_read_hash_checked_and_used(tmp_path, monkeypatch):
  # Our stand-in file holds a different text, so the check must refuse it, naming file and hashes.
  wrong = tmp_path / "truthrl_examples.txt"
  wrong.write_text("You should make the judgment based on provided examples.\nExamples:\n")
  with pytest.raises(ValueError, match=r"truthrl_examples\.txt: SHA-256 [0-9a-f]{64} is not .*1279e02a"):
    judges.LLMCorrectnessJudge(_backend, style=jp.STYLE, examples_path=str(wrong))
  monkeypatch.setenv(jp.PAPER_EXAMPLES_ENV, str(tmp_path))
  with pytest.raises(ValueError, match="SHA-256"):
    judges.LLMCorrectnessJudge(_backend, style=jp.STYLE)
  with pytest.raises(FileNotFoundError, match="truthrl_reasoning_examples.txt"):
    judges.LLMCorrectnessJudge(_backend, style=jp.REASONING_STYLE)
  # With the expected digest of this file, the judge reads the block and sends it as the paper does.
  monkeypatch.setitem(jp._PAPER_FILES, "truthrl", ("truthrl_examples.txt", _sha(wrong.read_text())))
  judge = judges.LLMCorrectnessJudge(_backend, style=jp.STYLE)
  assert judge.examples == wrong.read_text()
  assert judge._messages("q", ["g"], "p")[0]["content"] == jp.TRUTHRL_INSTRUCTIONS + "\n" + wrong.read_text()


def test_without_the_papers_block_our_short_set_is_used_with_one_warning(monkeypatch, caplog):
  monkeypatch.delenv(jp.PAPER_EXAMPLES_ENV, raising=False)
  monkeypatch.setattr(jp, "_warned_short_examples", set())
  with caplog.at_level(logging.WARNING):
    first = judges.LLMCorrectnessJudge(_backend, style=jp.STYLE)
    judges.LLMCorrectnessJudge(_backend, style=jp.STYLE)
  assert first.examples == jp.TRUTHRL_EXAMPLES
  assert caplog.text.count("not the paper's block") == 1
  assert judges.LLMCorrectnessJudge(_backend, style=jp.STYLE, examples="MINE").examples == "MINE"
