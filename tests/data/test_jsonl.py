"""Example ⇄ JSONL round trip, and file:line errors on bad lines."""

import bz2

import pytest

from grounding_jax.data.jsonl import read_examples, read_examples_with_prompts, write_examples
from grounding_jax.data.schema import DataError, Example, Passage

EXAMPLES = [
    Example(question="Qui a écrit « L’Étranger » ?", passages=(Passage("Camus a écrit L’Étranger.", "Camus", "c1"),
                                                             Passage("Texte\nsur deux lignes\t!", "", "")),
            answers=("Albert Camus", "Camus"), evidence=("Camus a écrit L’Étranger.",), gold_passage_ids=(1,),
            answerable=True, id="fr-1", meta={"dataset": "handmade", "answers_found": [[1], [0]], "x": None}),
    Example(question="Unanswerable?", passages=(Passage("nothing"),), answerable=False, id="u"),
    Example(question="No context, unknown answerability", answers=("\\boxed{42}",)),
]


def test_round_trip_is_exact(tmp_path):
  path = tmp_path / "train.jsonl"
  assert write_examples(path, EXAMPLES) == 3
  assert list(read_examples(path)) == EXAMPLES
  assert list(read_examples(path, limit=2)) == EXAMPLES[:2]
  # Non-ASCII is written as is (readable files), one object per line.
  lines = path.read_text(encoding="utf-8").splitlines()
  assert len(lines) == 3 and "L’Étranger" in lines[0]


def test_prompts_stored_alongside(tmp_path):
  path = tmp_path / "eval.jsonl"
  write_examples(path, EXAMPLES[:2], prompts=["p0", "p1"])
  assert list(read_examples_with_prompts(path)) == [(EXAMPLES[0], "p0"), (EXAMPLES[1], "p1")]
  assert list(read_examples(path)) == EXAMPLES[:2]


def test_reads_bz2(tmp_path):
  plain = tmp_path / "a.jsonl"
  write_examples(plain, EXAMPLES)
  packed = tmp_path / "a.jsonl.bz2"
  packed.write_bytes(bz2.compress(plain.read_bytes()))
  assert list(read_examples(packed)) == EXAMPLES


def test_bad_lines_name_file_line_and_field(tmp_path):
  path = tmp_path / "bad.jsonl"
  write_examples(path, EXAMPLES[:1])
  with open(path, "a", encoding="utf-8") as f:
    f.write("\n")  # blank lines are skipped but still counted
    f.write('{"question": "q", "passages": [{"text": "a"}], "gold_passage_ids": [2]}\n')
  rows = read_examples(path)
  assert next(rows) == EXAMPLES[0]
  with pytest.raises(DataError, match=rf"{path}:3: field 'gold_passage_ids\[0\]': 2 is outside 1..1"):
    next(rows)
  path.write_text('{"question": "q"}\n{"question": \n', encoding="utf-8")
  with pytest.raises(DataError, match=rf"{path}:2: field '<row>': invalid JSON"):
    list(read_examples(path))


def test_non_json_meta_is_reported(tmp_path):
  with pytest.raises(DataError, match=r"example 0 \(id='s'\): field 'meta'"):
    write_examples(tmp_path / "x.jsonl", [Example(question="q", id="s", meta={"s": {1, 2}})])


def test_every_reader_output_round_trips(tmp_path):
  import pathlib
  from grounding_jax.data.readers import read_dataset
  fix = pathlib.Path(__file__).parent / "fixtures"
  for name, file in [("hotpotqa", "hotpotqa_dev_distractor_5.json"), ("2wiki", "2wikimultihopqa_dev_handmade.json"),
                     ("musique", "musique_ans_train_3.jsonl"), ("qasper", "qasper_full_handmade.json"),
                     ("asqa", "trust_asqa_eval_calibrated_handmade.json"), ("nq", "dpr_nq_dev_handmade.json"),
                     ("nq_litm", "nq_open_oracle_litm_5.jsonl"), ("crag", "crag_dev_2_cut.jsonl.bz2")]:
    examples = list(read_dataset(name, fix / file))
    write_examples(tmp_path / f"{name}.jsonl", examples)
    assert list(read_examples(tmp_path / f"{name}.jsonl")) == examples, name


def _latin1_file(path, bad_line):
  """Rows of UTF-8 text where row `bad_line` (1-based) holds a Latin-1 "é" after 17 characters."""
  good = '{"question": "Où est le café ?", "answers": ["Paris"]}'.encode("utf-8")
  rows = [good] * 5
  rows[bad_line - 1] = '{"question": "café au lait"}'.encode("latin-1")
  path.write_bytes(b"\n".join(rows) + b"\n")
  return path


@pytest.mark.parametrize("suffix", ["", ".bz2"])
def test_a_non_utf8_byte_names_file_line_and_column(tmp_path, suffix):
  path = _latin1_file(tmp_path / "d.jsonl", bad_line=4)
  if suffix:
    path = tmp_path / "d.jsonl.bz2"
    path.write_bytes(bz2.compress((tmp_path / "d.jsonl").read_bytes()))
  with pytest.raises(DataError, match=rf"d\.jsonl{suffix}:4:18: .*not UTF-8 \(byte 0xe9.*iconv"):
    list(read_examples(path))


def test_an_empty_file_is_an_error_naming_it(tmp_path):
  for text in ("", "\n  \n"):
    (tmp_path / "e.jsonl").write_text(text)
    with pytest.raises(DataError, match=r"e\.jsonl: .*the file is empty"):
      list(read_examples(tmp_path / "e.jsonl"))
  assert list(read_examples(tmp_path / "e.jsonl", limit=0)) == []
