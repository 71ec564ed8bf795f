"""Streaming JSON / JSONL reading with file:line positions, and typed field access for readers.

Official dataset files come as a JSON array (HotpotQA, 2Wiki, ALCE, DPR results), a JSON object keyed
by id (QASPER), or JSONL (MuSiQue, CRAG), optionally compressed. `iter_records` yields one record at a
time from any of these with the line it starts on, so a reader can name "file:line" in its errors
without holding a multi-GB file's parsed tree in memory. `jsonl_rows` is the JSONL line loop under it,
which data/jsonl.py (Examples) and tools/corpus.py (passages) read through as well.
"""

from __future__ import annotations

import bz2
import contextlib
import dataclasses
import gzip
import io
import json
import os
from typing import IO, Any, Iterator

from grounding_jax.data.schema import DataError

_CHUNK_CHARS = 1 << 20
_WHITESPACE = " \t\r\n"


def open_text(path: str | os.PathLike) -> IO[str]:
  """Opens a UTF-8 text file (a leading byte-order mark is dropped), decompressing `.bz2` and `.gz`."""
  p = os.fspath(path)
  if not os.path.exists(p):
    raise FileNotFoundError(f"{p}: no such file; check the path passed to the reader")
  if p.endswith(".bz2"):
    return bz2.open(p, "rt", encoding="utf-8-sig")
  if p.endswith(".gz"):
    return gzip.open(p, "rt", encoding="utf-8-sig")
  return io.open(p, "r", encoding="utf-8-sig")  # -sig: tolerate a byte-order mark


def _open_bytes(path: str) -> IO[bytes]:
  if path.endswith(".bz2"):
    return bz2.open(path, "rb")
  if path.endswith(".gz"):
    return gzip.open(path, "rb")
  return open(path, "rb")


def locate_utf8_error(path: str | os.PathLike) -> DataError | None:
  """A DataError naming file:line:column (and the byte) of the first bytes in `path` that are not
  UTF-8, or None if it decodes. Re-reads the file line by line: call it only after a decode error
  (a text stream's UnicodeDecodeError counts bytes from its read buffer, not from the file)."""
  p = os.fspath(path)
  with _open_bytes(p) as f:
    for line_no, line in enumerate(f, start=1):
      try:
        line.decode("utf-8-sig" if line_no == 1 else "utf-8")
      except UnicodeDecodeError as e:
        column = len(line[:e.start].decode("utf-8", errors="replace")) + 1
        return DataError(
            f"{p}:{line_no}:{column}: field '<file>': not UTF-8 (byte 0x{line[e.start]:02x}: "
            f"{e.reason}); the file must be UTF-8 — re-encode it, e.g. "
            f"`iconv -f latin1 -t utf-8 {os.path.basename(p)} > utf8_{os.path.basename(p)}` if it is Latin-1")
  return None


@contextlib.contextmanager
def utf8_errors_located(path: str | os.PathLike) -> Iterator[None]:
  """Turns a UnicodeDecodeError raised while reading `path` into a DataError naming file:line:column."""
  try:
    yield
  except UnicodeDecodeError as e:
    located = locate_utf8_error(path)
    raise (located or DataError(f"{path}: field '<file>': not UTF-8 ({e})")) from e


def empty_file_error(path: str | os.PathLike) -> DataError:
  return DataError(f"{path}: field '<file>': the file is empty (no records, or only blank lines); "
                   "check the path, or rebuild it (launch/build_data.py)")


@dataclasses.dataclass(frozen=True)
class Record:
  """One top-level record: its value, where it starts, and its key (array index or object key)."""
  value: Any
  source: str  # "path:line (record i)" — used as the prefix of every error about this record
  key: Any


def is_jsonl(path: str | os.PathLike) -> bool:
  """True for .jsonl(.bz2/.gz) files, and for any other file whose first line is a whole JSON object
  followed by more lines (e.g. a JSONL file saved as .json); a JSON array or a multi-line object is not."""
  p = os.fspath(path)
  for suffix in (".bz2", ".gz"):
    if p.endswith(suffix):
      p = p[: -len(suffix)]
  if p.endswith(".jsonl"):
    return True
  with open_text(path) as f, utf8_errors_located(path):
    first = f.readline()
    while first and not first.strip():
      first = f.readline()
    if not first.lstrip().startswith("{"):
      return False
    try:
      json.loads(first)
    except json.JSONDecodeError:
      return False  # a pretty-printed object spans lines
    return any(line.strip() for line in iter(f.readline, ""))


def jsonl_rows(path: str | os.PathLike, *, limit: int | None = None) -> Iterator[tuple[int, Any]]:
  """(line number, parsed value) of each non-blank line of a JSONL file (plain, .bz2 or .gz), in
  order: the one JSONL row loop that the Example, dataset and corpus readers share. An empty file
  yields nothing; each caller says what that means for it.

  Args:
    path: the file.
    limit: stop after this many rows, before reading the next line (None: all).

  Raises:
    DataError: a line that is not JSON (file:line), or bytes that are not UTF-8 (file:line:column).
  """
  n = 0
  with open_text(path) as f, utf8_errors_located(path):
    for line_no, line in enumerate(f, start=1):
      if limit is not None and n >= limit:
        return
      if not line.strip():
        continue
      try:
        value = json.loads(line)
      except json.JSONDecodeError as e:
        where = f"{path}:{line_no}"
        raise DataError(f"{where}: field '<row>': invalid JSON ({e.msg} at column {e.colno})\n"
                        f"{where}: not JSON: {line.strip()[:80]!r}; each line must be one JSON object"
                        ) from e
      yield line_no, value
      n += 1


def iter_records(path: str | os.PathLike, *, jsonl: bool | None = None) -> Iterator[Record]:
  """Yields the records of a JSONL file, or the items of a top-level JSON array / object, in order.

  Args:
    path: the file (plain, .bz2 or .gz).
    jsonl: force JSONL (True) or a single JSON document (False); None decides by `is_jsonl`.

  Raises:
    DataError: on invalid JSON or bytes that are not UTF-8 (naming file:line), or an empty file.
  """
  if jsonl is None:
    jsonl = is_jsonl(path)
  if jsonl:
    index = 0
    for line_no, value in jsonl_rows(path):
      yield Record(value, f"{path}:{line_no}", index)
      index += 1
    if index == 0:
      raise empty_file_error(path)
    return
  with utf8_errors_located(path):
    yield from _iter_document_items(path)


class _Buffer:
  """A growing window over a text stream that tracks the line number of its start."""

  def __init__(self, f: IO[str]):
    self.f, self.text, self.pos, self.eof = f, "", 0, False
    self.line, self.line_pos = 1, 0  # `line` is the line number at text[line_pos]

  def fill(self, min_chars: int = 1) -> bool:
    """Makes at least `min_chars` characters available after pos, if the stream has them."""
    while len(self.text) - self.pos < min_chars and not self.eof:
      chunk = self.f.read(max(_CHUNK_CHARS, min_chars))
      if not chunk:
        self.eof = True
        break
      # Drop consumed text so the buffer stays near one chunk for large files.
      self.current_line()
      self.text, self.pos, self.line_pos = self.text[self.pos:] + chunk, 0, 0
    return len(self.text) - self.pos >= min_chars

  def skip_ws(self) -> None:
    while True:
      while self.pos < len(self.text) and self.text[self.pos] in _WHITESPACE:
        self.pos += 1
      if self.pos < len(self.text) or not self.fill():
        return

  def peek(self) -> str:
    self.skip_ws()
    return self.text[self.pos] if self.fill() else ""

  def current_line(self) -> int:
    # Count only the newlines consumed since the last call, so a file is scanned once overall.
    self.line += self.text.count("\n", self.line_pos, self.pos)
    self.line_pos = self.pos
    return self.line

  def decode(self, decoder: json.JSONDecoder, path: Any) -> Any:
    """Decodes one JSON value at pos, reading more of the file until it is complete."""
    want = _CHUNK_CHARS
    while True:
      try:
        value, end = decoder.raw_decode(self.text, self.pos)
        if end == len(self.text) and not self.eof:  # a number may continue past the buffer end
          raise json.JSONDecodeError("truncated", self.text, end)
        self.pos = end
        return value
      except json.JSONDecodeError as e:
        if self.eof:
          line = self.current_line() + self.text.count("\n", self.pos, e.pos)
          raise DataError(f"{path}:{line}: field '<record>': invalid JSON ({e.msg})") from e
        self.fill(len(self.text) - self.pos + want)
        want *= 2


def _iter_document_items(path: str | os.PathLike) -> Iterator[Record]:
  decoder = json.JSONDecoder()
  with open_text(path) as f:
    buf = _Buffer(f)
    opener = buf.peek()
    if not opener:
      raise empty_file_error(path)
    if opener not in "[{":
      raise DataError(f"{path}:{buf.current_line()}: field '<file>': expected a JSON array or object, "
                      f"found {opener!r}; is this a JSONL file? pass jsonl=True")
    closer = "]" if opener == "[" else "}"
    buf.pos += 1
    index = 0
    while True:
      c = buf.peek()
      if c == closer:
        return
      if index > 0:
        if c != ",":
          raise DataError(f"{path}:{buf.current_line()}: field '<file>': expected ',' or {closer!r} "
                          f"between records, found {c!r}")
        buf.pos += 1
        buf.peek()
      line = buf.current_line()
      key: Any = index
      if opener == "{":
        key = buf.decode(decoder, path)
        if buf.peek() != ":":
          raise DataError(f"{path}:{buf.current_line()}: field '<file>': expected ':' after key {key!r}")
        buf.pos += 1
        buf.peek()
      value = buf.decode(decoder, path)
      label = f"record {index}" if opener == "[" else f"key {key!r}"
      yield Record(value, f"{path}:{line} ({label})", key)
      index += 1


# ---------------------------------------------------------------- typed field access for readers


def field(row: Any, name: str, types: type | tuple[type, ...], source: str, *, required: bool = True,
          default: Any = None, path: str = "") -> Any:
  """Returns `row[name]`, checking its type; raises DataError naming source and the field path."""
  label = f"{path}.{name}" if path else name
  if not isinstance(row, dict):
    raise DataError(f"{source}: field '{path or '<row>'}': expected a JSON object, got {type(row).__name__}")
  if name not in row or row[name] is None:
    if required:
      raise DataError(f"{source}: field '{label}': missing (this reader expects the official format)")
    return default
  value = row[name]
  if isinstance(value, bool) and bool not in (types if isinstance(types, tuple) else (types,)):
    raise DataError(f"{source}: field '{label}': expected {_names(types)}, got bool")
  if not isinstance(value, types):
    raise DataError(f"{source}: field '{label}': expected {_names(types)}, got {type(value).__name__} "
                    f"{value!r:.60}")
  return value


def str_list(value: Any, label: str, source: str) -> list[str]:
  """Checks that `value` is a list of strings."""
  if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
    raise DataError(f"{source}: field '{label}': expected a list of strings, got {value!r:.80}")
  return value


def _names(types: type | tuple[type, ...]) -> str:
  types = types if isinstance(types, tuple) else (types,)
  return " or ".join(t.__name__ for t in types)
