"""HotpotQA, 2WikiMultiHopQA and MuSiQue readers on fixtures in their official formats."""

import json
import pathlib

import pytest

from grounding_jax.data.readers import read_dataset, read_hotpotqa, read_musique
from grounding_jax.data.schema import DataError, Passage

FIX = pathlib.Path(__file__).parent / "fixtures"
HOTPOT = FIX / "hotpotqa_dev_distractor_5.json"


def test_hotpotqa_first_dev_record():
  ex = next(read_hotpotqa(HOTPOT))
  assert ex.id == "5a8b57f25542995d1e6f1371"
  assert ex.question == "Were Scott Derrickson and Ed Wood of the same nationality?"
  assert ex.answers == ("yes",)
  # supporting_facts [["Scott Derrickson", 0], ["Ed Wood", 0]]; context order puts "Scott Derrickson"
  # 2nd and "Ed Wood" 5th (after "Ed Wood (film)", "Woodson, Arkansas", "Tyler Bates").
  assert ex.gold_passage_ids == (2, 5)
  assert ex.passages[1].title == "Scott Derrickson" and ex.passages[4].title == "Ed Wood"
  assert ex.evidence == (
      "Scott Derrickson (born July 16, 1966) is an American director, screenwriter and producer.",
      "Edward Davis Wood Jr. (October 10, 1924 – December 10, 1978) was an American filmmaker, actor, "
      "writer, producer, and director.")
  assert ex.answerable is True and len(ex.passages) == 10
  assert ex.meta["type"] == "comparison" and ex.meta["level"] == "hard"


def test_hotpotqa_matches_a_plain_reimplementation():
  raw = json.load(open(HOTPOT, encoding="utf-8"))
  examples = list(read_dataset("hotpotqa", HOTPOT))
  assert [e.id for e in examples] == [r["_id"] for r in raw]
  for ex, r in zip(examples, raw):
    titles = [t for t, _ in r["context"]]
    assert ex.passages == tuple(Passage("".join(s), t, t) for t, s in r["context"])
    assert ex.gold_passage_ids == tuple(sorted({titles.index(t) + 1 for t, _ in r["supporting_facts"]}))
    sents = dict(r["context"])
    assert ex.evidence == tuple(sents[t][i].strip() for t, i in r["supporting_facts"])
  assert len(list(read_hotpotqa(HOTPOT, limit=2))) == 2


def _write(tmp_path, name, records):
  path = tmp_path / name
  path.write_text(json.dumps(records, indent=1), encoding="utf-8")
  return path


def test_hotpotqa_missing_supporting_fact_policies(tmp_path):
  rec = json.load(open(HOTPOT, encoding="utf-8"))[0]
  rec["supporting_facts"].append(["Ed Wood", 9])  # "Ed Wood" has one sentence
  path = _write(tmp_path, "h.json", [rec])
  kept = next(read_hotpotqa(path))
  assert kept.gold_passage_ids == (2, 5) and kept.meta["missing_supporting_facts"] == [["Ed Wood", 9]]
  assert list(read_hotpotqa(path, missing_facts="skip")) == []
  with pytest.raises(DataError, match=r"h.json:2 \(record 0\): field 'supporting_facts'"):
    list(read_hotpotqa(path, missing_facts="raise"))


def test_hotpotqa_malformed_rows_name_line_and_field(tmp_path):
  good = json.load(open(HOTPOT, encoding="utf-8"))[:2]
  bad = json.loads(json.dumps(good))
  bad[1]["context"][3] = ["Tyler Bates", "not a list"]
  path = _write(tmp_path, "bad.json", bad)
  rows = read_hotpotqa(path)
  next(rows)
  line = path.read_text().splitlines().index(" {", 2) + 1  # record 1 starts on this line
  with pytest.raises(DataError, match=rf"bad.json:{line} \(record 1\): field 'context\[3\]\[1\]'"):
    next(rows)
  del bad[1]["question"]
  with pytest.raises(DataError, match=r"\(record 1\): field 'question': missing"):
    list(read_hotpotqa(_write(tmp_path, "b2.json", bad)))


def test_2wikimultihopqa_official_format():
  a, b = read_dataset("2wikimultihopqa", FIX / "2wikimultihopqa_dev_handmade.json")
  assert a.id == "hm2w-0001" and a.answers == ("Lantern Harbour",)
  assert [p.title for p in a.passages] == ["The Glass Orchard", "Harbour Lights (song)", "Lantern Harbour",
                                           "Orchard Street"]
  assert a.gold_passage_ids == (1, 3)
  assert a.evidence == ("Lantern Harbour is a 1949 British thriller film.",
                        "The Glass Orchard is a 1958 drama film directed by Ilse Brandt.")
  assert a.meta["evidences"][0] == ["Lantern Harbour", "publication date", "1949"]
  assert b.gold_passage_ids == (1, 2) and b.evidence == ("It was directed by Colin Mayhew.", "He was born in Bristol.")
  assert b.meta["type"] == "compositional"


def test_2wikimultihopqa_fields_stored_as_json_strings(tmp_path):
  recs = json.load(open(FIX / "2wikimultihopqa_dev_handmade.json", encoding="utf-8"))
  for key in ("context", "supporting_facts", "evidences"):
    recs[1][key] = json.dumps(recs[1][key])
  path = _write(tmp_path, "2wiki_strings.json", recs)
  assert list(read_dataset("2wiki", path)) == list(read_dataset("2wiki", FIX / "2wikimultihopqa_dev_handmade.json"))


def test_musique_answerable_supporting_paragraphs():
  raw = [json.loads(line) for line in open(FIX / "musique_ans_train_3.jsonl", encoding="utf-8")]
  examples = list(read_musique(FIX / "musique_ans_train_3.jsonl"))
  assert len(examples) == 3
  ex = examples[0]
  assert ex.id == "2hop__150763_14904"
  assert ex.answers == ("G. Stanley Hall", "Stanley Hall")
  assert ex.answerable is True and len(ex.passages) == 20
  assert ex.gold_passage_ids == (7, 11)
  assert ex.passages[6].title == raw[0]["paragraphs"][6]["title"]
  assert ex.evidence == (  # each hop's sentence naming its answer (paragraphs 7 and 11)
      "The Journal of Psychotherapy Integration is a peer-reviewed academic journal published by the "
      "American Psychological Association on behalf of the Society for the Exploration of "
      "Psychotherapy Integration.",
      "The formal study of adolescent psychology began with the publication of G. Stanley Hall's "
      "\"Adolescence in 1904.\"")
  for ex, r in zip(examples, raw):
    # is_supporting agrees with question_decomposition's (0-based) paragraph_support_idx.
    assert set(ex.gold_passage_ids) == {d["paragraph_support_idx"] + 1 for d in r["question_decomposition"]}


def _jsonl(tmp_path, rows):
  path = tmp_path / "m.jsonl"
  path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
  return path


def _musique_row(**changes):
  """A hand-made MuSiQue-Ans row: 2 hops, their supporting paragraphs at idx 1 and 3 (of 4)."""
  paragraphs = [
      "Lake Vostok is a lake in Antarctica. It lies under the ice sheet.",
      "The Orrin Quarterly is a journal. It is published by the Veld Society of Surveyors. Its "
      "editor is in Lund.",
      "The Veld Society was founded in Cape Town. Its archive is in Durban.",
      "The Veld Society of Surveyors was founded in 1921. Mara Quill was the first president of "
      "the Veld Society of Surveyors. Quill's brother Tom Quill was its treasurer.",
  ]
  row = {"id": "2hop__1_2", "question": "Who was the first president of the society that publishes "
         "the Orrin Quarterly?", "answer": "Mara Quill", "answer_aliases": ["M. Quill"],
         "answerable": True,
         "paragraphs": [{"idx": i, "title": f"T{i}", "paragraph_text": t, "is_supporting": i in (1, 3)}
                        for i, t in enumerate(paragraphs)],
         "question_decomposition": [
             {"id": 1, "question": "Orrin Quarterly >> publisher", "answer": "Veld Society of Surveyors",
              "paragraph_support_idx": 1},
             {"id": 2, "question": "Who was the first president of #1 ?", "answer": "Mara Quill",
              "paragraph_support_idx": 3}]}
  row.update(changes)
  return row


def test_musique_evidence_is_each_hops_answer_sentence(tmp_path):
  row = _musique_row()
  [ex] = read_musique(_jsonl(tmp_path, [row]))
  assert ex.gold_passage_ids == (2, 4)
  # Hop 1: the one sentence naming the society; hop 2: both sentences 2 and 3 of its paragraph name
  # "Quill", but only sentence 2 holds "Mara Quill" whole, and it matches the question
  # ("first president" of "#1", resolved to the society).
  assert ex.evidence == ("It is published by the Veld Society of Surveyors.",
                         "Mara Quill was the first president of the Veld Society of Surveyors.")
  assert all(e in ex.passages[i - 1].text for e, i in zip(ex.evidence, ex.gold_passage_ids))

  # A paraphrased hop answer: no sentence holds it, so the closest sentence to the question.
  hops = [dict(row["question_decomposition"][0]), dict(row["question_decomposition"][1], answer="Quill M.")]
  [ex] = read_musique(_jsonl(tmp_path, [_musique_row(question_decomposition=hops)]))
  assert ex.evidence[1] == "Mara Quill was the first president of the Veld Society of Surveyors."


def test_musique_evidence_falls_back_to_whole_supporting_paragraphs(tmp_path):
  row = _musique_row()
  whole = (row["paragraphs"][1]["paragraph_text"], row["paragraphs"][3]["paragraph_text"])
  [ex] = read_musique(_jsonl(tmp_path, [_musique_row(question_decomposition=None)]))
  assert ex.evidence == whole  # no decomposition: the supporting paragraphs, as ARENA's data code
  # A hop naming a paragraph that is not supporting (MuSiQue-Full's twins) gives nothing; the
  # supporting paragraph no hop names gives its whole text.
  hops = [dict(row["question_decomposition"][0], paragraph_support_idx=0),
          row["question_decomposition"][1]]
  [ex] = read_musique(_jsonl(tmp_path, [_musique_row(question_decomposition=hops)]))
  assert ex.evidence == ("Mara Quill was the first president of the Veld Society of Surveyors.",
                         whole[0])
  bad = [dict(row["question_decomposition"][0], answer=7), row["question_decomposition"][1]]
  with pytest.raises(DataError, match=r"m.jsonl:1: field 'question_decomposition\[0\].answer': expected str"):
    list(read_musique(_jsonl(tmp_path, [_musique_row(question_decomposition=bad)])))


def test_musique_malformed_line(tmp_path):
  lines = open(FIX / "musique_ans_train_3.jsonl", encoding="utf-8").read().splitlines()
  row = json.loads(lines[1])
  row["paragraphs"][4]["is_supporting"] = "yes"
  path = tmp_path / "m.jsonl"
  path.write_text("\n".join([lines[0], json.dumps(row), lines[2]]) + "\n", encoding="utf-8")
  with pytest.raises(DataError, match=r"m.jsonl:2: field 'paragraphs\[4\].is_supporting': expected bool"):
    list(read_musique(path))
