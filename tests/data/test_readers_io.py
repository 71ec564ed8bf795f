"""Streaming record iteration (file:line positions, compressed files) and the reader registry."""

import bz2
import json

import pytest

from grounding_jax.data import readers
from grounding_jax.data.readers import jsonio
from grounding_jax.data.schema import DataError, Example


def test_iter_records_json_array_lines_and_big_records(tmp_path, monkeypatch):
  monkeypatch.setattr(jsonio, "_CHUNK_CHARS", 16)  # force many buffer refills mid-record
  records = [{"a": i, "text": "x" * (i * 37), "n": 12345678901234567890} for i in range(6)]
  text = "[\n" + ",\n".join(json.dumps(r, indent=1) for r in records) + "\n]\n"
  path = tmp_path / "a.json"
  path.write_text(text, encoding="utf-8")
  got = list(jsonio.iter_records(path))
  assert [r.value for r in got] == records
  starts = [i + 1 for i, line in enumerate(text.splitlines()) if line == "{"]
  assert [r.source for r in got] == [f"{path}:{n} (record {i})" for i, n in enumerate(starts)]


def test_iter_records_object_jsonl_and_bz2(tmp_path):
  obj = tmp_path / "o.json"
  obj.write_text('{"p1": {"x": 1},\n "p2": {"x": 2}}', encoding="utf-8")
  assert [(r.key, r.value, r.source) for r in jsonio.iter_records(obj)] == [
      ("p1", {"x": 1}, f"{obj}:1 (key 'p1')"), ("p2", {"x": 2}, f"{obj}:2 (key 'p2')")]
  lines = tmp_path / "l.jsonl.bz2"
  lines.write_bytes(bz2.compress(b'{"x": 1}\n\n{"x": 2}\n'))
  assert [(r.value, r.source) for r in jsonio.iter_records(lines)] == [({"x": 1}, f"{lines}:1"), ({"x": 2}, f"{lines}:3")]


def test_iter_records_reports_invalid_json_with_its_line(tmp_path):
  path = tmp_path / "bad.json"
  path.write_text('[{"a": 1},\n{"a": 2}\n{"a": 3}]', encoding="utf-8")
  it = jsonio.iter_records(path)
  assert next(it).value == {"a": 1} and next(it).value == {"a": 2}
  with pytest.raises(DataError, match=rf"{path}:3: field '<file>': expected ',' or ']'"):
    next(it)
  path.write_text('[{"a": 1},\n{"a": }]', encoding="utf-8")
  with pytest.raises(DataError, match=rf"{path}:2: field '<record>': invalid JSON"):
    list(jsonio.iter_records(path))
  with pytest.raises(FileNotFoundError, match="no such file"):
    list(jsonio.iter_records(tmp_path / "missing.json"))


def test_registry_dispatch_and_extension(tmp_path):
  names = readers.available_readers()
  for name in ("hotpotqa", "2wikimultihopqa", "musique", "qasper", "asqa", "qampari", "eli5", "expertqa",
               "nq", "triviaqa", "nq_litm", "crag"):
    assert name in names
  with pytest.raises(ValueError, match="unknown dataset 'squad'"):
    readers.read_dataset("squad", "x.json")

  def read_lines(path, limit=None):
    for i, line in enumerate(open(path, encoding="utf-8")):
      yield Example(question=line.strip(), id=str(i))

  readers.register_reader("lines_test", read_lines)
  try:
    path = tmp_path / "q.txt"
    path.write_text("why?\nhow?\n", encoding="utf-8")
    assert [e.question for e in readers.read_dataset("LINES_TEST", path)] == ["why?", "how?"]
    with pytest.raises(ValueError, match="already registered"):
      readers.register_reader("lines_test", read_lines)
  finally:
    readers._REGISTRY.pop("lines_test")


def test_format_sniffing(tmp_path):
  cases = {
      "a.json": '[{"x": 1},\n{"x": 2}]',                 # array
      "b.json": '{"x": 1}\n{"x": 2}\n',                  # JSONL saved as .json
      "c.json": '{"p1": {"x": 1}, "p2": {"x": 2}}\n',    # one-line object keyed by id (QASPER)
      "d.json": '{\n "p1": {"x": 1}\n}\n',               # pretty-printed object
      "e.txt": '\ufeff[{"x": 1}]',                       # byte-order mark
  }
  expected = {"a.json": False, "b.json": True, "c.json": False, "d.json": False, "e.txt": False}
  for name, text in cases.items():
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    assert jsonio.is_jsonl(path) is expected[name], name
  assert [r.value for r in jsonio.iter_records(tmp_path / "b.json")] == [{"x": 1}, {"x": 2}]
  assert [r.value for r in jsonio.iter_records(tmp_path / "e.txt")] == [{"x": 1}]


def test_iter_records_names_the_line_and_column_of_a_non_utf8_byte(tmp_path, monkeypatch):
  monkeypatch.setattr(jsonio, "_CHUNK_CHARS", 16)  # the bad byte lands far past the first buffer
  rows = ['{"q": "naïve"}'] * 30
  bad = '{"q": "caf\xe9"}'.encode("latin-1")
  for name, head, tail in (("a.jsonl", "\n".join(rows) + "\n", b"\n"),
                           ("b.json", "[" + ",\n".join(rows) + ",\n", b"]")):
    path = tmp_path / name
    path.write_bytes(head.encode("utf-8") + bad + tail)
    with pytest.raises(DataError, match=rf"{name}:31:11: .*not UTF-8 \(byte 0xe9"):
      list(jsonio.iter_records(path))


@pytest.mark.parametrize("jsonl", [True, False, None])
def test_iter_records_on_an_empty_file(tmp_path, jsonl):
  path = tmp_path / "empty.json"
  path.write_text("\n")
  with pytest.raises(DataError, match=r"empty\.json: .*the file is empty"):
    list(jsonio.iter_records(path, jsonl=jsonl))
  path.write_text("[]")  # an empty array is a valid document with no records
  if jsonl is not True:
    assert list(jsonio.iter_records(path, jsonl=jsonl)) == []
