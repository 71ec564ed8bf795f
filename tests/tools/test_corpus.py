"""Corpora as JSONL: the round trip, malformed rows named by file:line and field, the synthetic
world's corpus without the facts its unanswerable questions need, and the real samples' paragraphs."""

import json
import pathlib

import pytest

from grounding_jax.data import readers
from grounding_jax.data import synthetic
from grounding_jax.data.schema import DataError, Passage
from grounding_jax.tools import corpus

REAL = pathlib.Path(__file__).resolve().parents[2] / "data" / "real"


def _write_lines(path, lines):
  path.write_text("\n".join(lines) + "\n", encoding="utf-8")
  return path


def test_round_trip_keeps_every_field(tmp_path):
  passages = [Passage("Orsk is the capital.", title="Veltria", id="a"), Passage("Ünïcode ✓", id="b")]
  path = tmp_path / "c.jsonl"
  assert corpus.write_corpus(path, passages) == 2
  assert corpus.read_corpus(path) == passages


@pytest.mark.parametrize("row,message", [
    ('{"id": "a", "title": "T"}', r"c\.jsonl:2: field 'text' is missing"),
    ('{"id": "a", "title": 3, "text": "x"}', r"c\.jsonl:2: field 'title' is int"),
    ('{"id": "", "title": "", "text": "x"}', r"c\.jsonl:2: field 'id' is empty"),
    ('{"id": "p0", "title": "", "text": "x"}', r"c\.jsonl:2: field 'id' 'p0' repeats line 1"),
    ('["a", "b", "c"]', r"c\.jsonl:2: expected a JSON object"),
    ('{"id": "a", ', r"c\.jsonl:2: not JSON"),
])
def test_a_malformed_row_names_file_line_and_field(tmp_path, row, message):
  path = _write_lines(tmp_path / "c.jsonl", ['{"id": "p0", "title": "", "text": "first"}', row])
  with pytest.raises(DataError, match=message):
    corpus.read_corpus(path)


def _chain(world, ex):
  """The entities whose facts answer `ex` (names are unique substrings: data/synthetic.py)."""
  subject = next(e for e in world.fact_sentence if e in ex.question)
  bridge = {"capital_of_home": world.lives_in, "home_of_founder": world.founder}.get(
      ex.meta["question_type"])
  return (subject,) if bridge is None else (subject, bridge[subject])


def test_the_synthetic_corpus_lacks_every_fact_an_unanswerable_question_needs():
  world = synthetic.build_world(0)
  withheld = synthetic.withheld_entities(world, 0.5)
  passages = corpus.synthetic_corpus(world, withheld)
  texts = {p.text for p in passages}
  assert len(passages) == len(world.passages) - len(withheld)
  examples = synthetic.generate_examples(60, seed=1, world=world, withheld_share=0.5,
                                         two_hop_ratio=0.5)
  assert sum(ex.answerable for ex in examples) == 30
  for ex in examples:
    # Every fact of an answerable question's chain is in the corpus; an unanswerable one misses one.
    found = [any(world.fact_sentence[e] in t for t in texts) for e in _chain(world, ex)]
    assert all(found) if ex.answerable else not all(found), ex.question
  # Mentions stay, so a withheld entity is still named somewhere.
  entity = sorted(withheld)[0]
  assert any(entity in t for t in texts) and world.fact_sentence[entity] not in " ".join(texts)


def test_withholding_is_off_by_default_and_leaves_the_examples_unchanged():
  assert synthetic.withheld_entities(synthetic.build_world(0), 0.0) == frozenset()
  assert synthetic.generate_examples(12, seed=4) == synthetic.generate_examples(12, seed=4,
                                                                                 withheld_share=0.0)
  with pytest.raises(ValueError, match="withheld_share"):
    synthetic.withheld_entities(synthetic.build_world(0), 1.0)


def test_the_corpus_of_a_data_spec_is_its_worlds():
  spec = dict(kind="synthetic", seed=2, num_examples=8, answerable_ratio=0.5, withheld_share=0.25)
  world = synthetic.build_world(2)
  assert corpus.synthetic_corpus_of(spec) == corpus.synthetic_corpus(
      world, synthetic.withheld_entities(world, 0.25))


def test_the_real_samples_paragraphs_once_each(tmp_path):
  examples = list(readers.read_dataset("hotpotqa", REAL / "hotpotqa_distractor_dev_sample.json",
                                       limit=5))
  passages = corpus.real_corpus(examples)
  keys = [(p.title, p.text) for p in passages]
  assert len(keys) == len(set(keys)) == len({(p.title, p.text) for ex in examples for p in ex.passages})
  assert len({p.id for p in passages}) == len(passages)
  corpus.write_corpus(tmp_path / "real.jsonl", passages)
  assert corpus.read_corpus(tmp_path / "real.jsonl") == passages
  assert json.loads((tmp_path / "real.jsonl").read_text().splitlines()[0]).keys() == {"id", "title", "text"}


def test_gold_recall_finds_a_shared_paragraph_stored_under_another_questions_id():
  """real_corpus keeps a paragraph shared by two questions once, under the first one's id; the
  second question's gold passage still counts as retrieved (by its text), and a miss stays a miss."""
  import types  # pylint: disable=g-import-not-at-top
  from grounding_jax.data import retrieval  # pylint: disable=g-import-not-at-top
  from grounding_jax.data.schema import Example  # pylint: disable=g-import-not-at-top
  from grounding_jax.sampling import multiturn  # pylint: disable=g-import-not-at-top
  from grounding_jax.tools import retriever  # pylint: disable=g-import-not-at-top
  shared = "The Rhine flows through Basel and Cologne before the North Sea."
  other = Passage(text="Lyon lies where the Rhone meets the Saone.", title="Lyon", id="q2-0")
  first = Example(question="Which river flows through Basel?", answers=("Rhine",),
                  passages=(Passage(text=shared, title="Rhine", id="q1-0"),), gold_passage_ids=(1,))
  second = Example(question="Where does the Rhine reach the sea?", answers=("North Sea",),
                   passages=(other, Passage(text=shared, title="Rhine", id="q2-1")),
                   gold_passage_ids=(2,))
  passages = corpus.real_corpus([first, second])
  assert [p.id for p in passages] == ["q1-0", "q2-0"]  # the shared paragraph under q1's id
  tool = retriever.RetrieverTool(passages, retrieval.BM25Retriever(), top_k=1)
  hit, miss = tool(["Rhine Basel Cologne North Sea", "Lyon Rhone Saone"])
  assert hit.doc_ids == ("q1-0",) and miss.doc_ids == ("q2-0",)
  call = lambda result: types.SimpleNamespace(result=result)
  rollout = types.SimpleNamespace(row_examples=lambda: [first, second, second],
                                  tool_calls=[[call(hit)], [call(hit)], [call(miss)]])
  counts, recall = multiturn.tool_call_stats(rollout)
  assert counts.tolist() == [1, 1, 1] and recall.tolist() == [1.0, 1.0, 0.0]
