"""Answerability from answers_found (Ground-GRPO)."""

import pytest

from grounding_jax.data import answerability as probing
from grounding_jax.data.schema import Example, Passage


def _ex(found, answers=("a", "b", "c"), **kw):
  return Example("q", passages=tuple(Passage(f"d{i}") for i in range(len(found))), answers=answers,
                 meta={"answers_found": found}, **kw)


def test_answerability_is_the_union_over_the_first_five_docs():
  assert probing.answers_found_union(_ex([[0, 0, 0], [1, 0, 0], [0, 0, 1]])) == [1, 0, 1]
  assert probing.is_answerable(_ex([[0, 1, 0]] + [[0, 0, 0]] * 4))
  assert not probing.is_answerable(_ex([[0, 0, 0]] * 5))
  # A supporting sixth document is not shown to the model, so it does not count.
  assert not probing.is_answerable(_ex([[0, 0, 0]] * 5 + [[1, 1, 1]]))
  assert probing.is_answerable(_ex([[0, 0, 0]] * 5 + [[1, 1, 1]]), num_docs=None)
  assert probing.found_answers(_ex([[0, 0, 1], [0, 1, 0]])) == ("b", "c")


def test_label_answerability_keeps_existing_labels_unless_told():
  e1, e2 = _ex([[1, 0, 0]]), _ex([[0, 0, 0]], answerable=True)
  assert [e.answerable for e in probing.label_answerability([e1, e2])] == [True, True]
  assert [e.answerable for e in probing.label_answerability([e1, e2], overwrite=True)] == [True, False]


def test_malformed_answers_found_raises_naming_the_example():
  with pytest.raises(ValueError, match="'x1'.*missing"):
    probing.is_answerable(Example("q", id="x1"))
  with pytest.raises(ValueError, match="'x2'.*lengths"):
    probing.is_answerable(_ex([[1, 0], [0]], id="x2"))
