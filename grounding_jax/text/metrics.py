"""Text metrics every recipe shares: each paper's answer normaliser, EM / F1, ROUGE-L, refusal tests.

Every recipe and evaluator scores text through these functions so that a metric means one thing
everywhere. They are pure, deterministic and never raise on arbitrary (model-written) strings.

* `normalize_answer`, `exact_match`, `token_f1`: the SQuAD v1.1 evaluation script's semantics.
* `normalize_answer_arena`: punctuation becomes a space (ARENA's evaluator, arXiv:2505.13258; also
  GRACE's answer EM).
* `hotpot_f1`: HotpotQA's official F1 (`hotpot_evaluate_v1.py`): SQuAD's, except that it is 0 when
  the normalised prediction or gold is "yes", "no" or "noanswer" and the two differ.
* `em_f1`: mean EM and F1 over a batch with a named normaliser (`NORMALIZERS`; "hotpot" is SQuAD's
  normalisation with the HotpotQA F1 rule), per-row scores too.
* `rouge_l_f1`: rouge-score 0.1.2 `RougeScorer(["rougeL"], use_stemmer=True)` F-measure, max over
  references (as GRACE's reward, arXiv:2601.04525 §3.2, Eq. 1). Re-implemented for speed with the same tokenizer (cached Porter stems)
  and an exact bit-parallel LCS; tests check equality with rouge-score.
* `is_refusal`, `refusal_score`: Trust-Score's refusal test, fuzzywuzzy 0.18 `partial_ratio` (with
  python-Levenshtein's matcher) of the normalised refusal flag vs the normalised text, > 85
  (Trust-Eval's code; rapidfuzz's optimal-window `partial_ratio` differs).
* `is_abstention`: TruthRL's test, "i dont know" inside the normalised boxed answer, with curly
  apostrophes mapped to "'" first (TruthRL's code, arXiv:2509.25760 §4.1; the mapping is ours).
"""

from __future__ import annotations

import collections
import functools
import re
import string
from typing import Callable, Sequence

import numpy as np
from rapidfuzz import fuzz as rapidfuzz_fuzz
from rapidfuzz.distance import Indel, LCSseq

# Trust-Score: the gold refusal sentence (arXiv:2506.15522 §3.2) and the prefix Trust-Eval matches
# against (its `refusal_flag`; the training reward reads the same flag).
REFUSAL_SENTENCE = "I apologize, but I couldn't find an answer to your question in the search results."
REFUSAL_FLAG = "I apologize, but I couldn't find an answer"
REFUSAL_THRESHOLD = 85.0  # fuzzy score on the 0-100 scale; refusal iff score > 85 (Trust-Eval)

# ------------------------------------------------------------------------------------------------
# SQuAD v1.1 normalisation, EM and F1.

_PUNCT = frozenset(string.punctuation)
_ARTICLES_RE = re.compile(r"\b(a|an|the)\b")


def normalize_answer(s: str) -> str:
  """SQuAD v1.1 normalisation: lowercase, drop ASCII punctuation, drop a/an/the, collapse spaces."""
  s = s.lower()
  s = "".join(ch for ch in s if ch not in _PUNCT)
  s = _ARTICLES_RE.sub(" ", s)
  return " ".join(s.split())


# ARENA replaces punctuation (plus four quote marks) with a SPACE and underscores first ("U.S." ->
# "u s"); its EM reward and metrics use this, not SQuAD's (the authors' `src/evaluate.py`).
_ARENA_PUNCT = frozenset(string.punctuation + "\u2018\u2019\u00b4`")


def normalize_answer_arena(s: str) -> str:
  """ARENA's normalisation (`src/evaluate.py`): `_`→space, lowercase, punctuation→space, articles."""
  s = s.replace("_", " ").lower()
  s = "".join(" " if ch in _ARENA_PUNCT else ch for ch in s)
  s = _ARTICLES_RE.sub(" ", s)
  return " ".join(s.split()).strip()


def exact_match(prediction: str, answers: Sequence[str], *,
                normalizer: Callable[[str], str] = normalize_answer) -> float:
  """1.0 if normalize_answer(prediction) equals that of any answer, else 0.0 (0.0 if no answers)."""
  pred = normalizer(prediction)
  return float(any(pred == normalizer(a) for a in answers))


def _f1_tokens(pred_tokens: list[str], gold_tokens: list[str]) -> float:
  common = collections.Counter(pred_tokens) & collections.Counter(gold_tokens)
  num_same = sum(common.values())
  if num_same == 0:  # SQuAD v1.1: also 0 when both sides are empty
    return 0.0
  precision = num_same / len(pred_tokens)
  recall = num_same / len(gold_tokens)
  return 2 * precision * recall / (precision + recall)


def token_f1(prediction: str, answers: Sequence[str], *,
             normalizer: Callable[[str], str] = normalize_answer) -> float:
  """SQuAD v1.1 unigram F1 on normalised tokens, max over answers; in [0, 1] (0.0 if no answers).

  `normalizer` swaps the normalisation (e.g. normalize_answer_arena for ARENA's F1).
  """
  pred_tokens = normalizer(prediction).split()
  return max((_f1_tokens(pred_tokens, normalizer(a).split()) for a in answers), default=0.0)


# HotpotQA's evaluation script scores F1 0 when either side is one of these (after normalisation)
# and the two differ: a yes/no answer is right or wrong, never half right.
_HOTPOT_CLOSED_ANSWERS = frozenset({"yes", "no", "noanswer"})


def hotpot_f1(prediction: str, answers: Sequence[str]) -> float:
  """HotpotQA's official answer F1 (hotpot_evaluate_v1.py `f1_score`), max over answers; in [0, 1].

  SQuAD's normalisation and unigram F1, except 0 when the normalised prediction or answer is "yes",
  "no" or "noanswer" and they differ ("yes, it is" vs "yes" scores 0, not SQuAD's 0.5).
  """
  pred = normalize_answer(prediction)
  best = 0.0
  for a in answers:
    gold = normalize_answer(a)
    if pred != gold and (pred in _HOTPOT_CLOSED_ANSWERS or gold in _HOTPOT_CLOSED_ANSWERS):
      continue
    best = max(best, _f1_tokens(pred.split(), gold.split()))
  return best


def em_f1(predictions: Sequence[str], golds: Sequence[Sequence[str]], *, normalizer: str = "squad",
          scale: float = 100.0) -> dict[str, object]:
  """Mean exact match and unigram F1 (max over each row's aliases), × `scale`.

  normalizer: a key of NORMALIZERS — "squad" (SQuAD v1.1), "punct_to_space" (`_` and punctuation
  become spaces: ARENA's, also GRACE's answer EM), "squad_quotes" (SQuAD's after curly apostrophes
  become "'": TruthRL's), or "hotpot" (HotpotQA's official script: SQuAD's
  EM, and F1 with its yes / no / noanswer rule, `hotpot_f1`). A missing answer should be passed as ""
  (scores 0). Also returns per-row arrays "em_per_example" and "f1_per_example" in [0, 1].
  """
  if normalizer not in NORMALIZERS:
    raise ValueError(f"normalizer={normalizer!r}; choose one of {sorted(NORMALIZERS)}.")
  if len(predictions) != len(golds):
    raise ValueError(f"{len(predictions)} predictions for {len(golds)} gold lists.")
  norm = NORMALIZERS[normalizer]
  em = np.zeros(len(predictions))
  f1 = np.zeros(len(predictions))
  for i, (p, g) in enumerate(zip(predictions, golds)):
    if isinstance(g, str):
      raise TypeError(f"golds[{i}] is a str; pass a list of aliases, e.g. [{g!r}].")
    p = p if isinstance(p, str) else ""
    em[i] = exact_match(p, g, normalizer=norm)
    f1[i] = hotpot_f1(p, g) if normalizer == "hotpot" else token_f1(p, g, normalizer=norm)
  n = max(len(em), 1)
  return {"em": scale * em.sum() / n, "f1": scale * f1.sum() / n,
          "em_per_example": em, "f1_per_example": f1}


# ------------------------------------------------------------------------------------------------
# ROUGE-L (rouge-score 0.1.2 compatible).

_NON_ALNUM_RE = re.compile(r"[^a-z0-9]+")
_VALID_TOKEN_RE = re.compile(r"^[a-z0-9]+$")


@functools.lru_cache(maxsize=1)
def _stemmer():
  # rouge-score's stemmer: nltk Porter, NLTK_EXTENSIONS mode. Imported lazily: `import nltk` costs
  # ~2 s, paid only by processes that compute ROUGE.
  from nltk.stem import porter  # pylint: disable=g-import-not-at-top
  return porter.PorterStemmer()


@functools.lru_cache(maxsize=1 << 18)
def _stem(word: str) -> str | None:
  """rouge-score: stem words longer than 3 chars, then keep only [a-z0-9]+ tokens (None = drop)."""
  if len(word) > 3:
    word = _stemmer().stem(word)
  return word if _VALID_TOKEN_RE.match(word) else None


def rouge_tokenize(text: str) -> list[str]:
  """rouge-score's tokenizer with use_stemmer=True: lowercase, [^a-z0-9]+→space, split, stem."""
  words = _NON_ALNUM_RE.sub(" ", text.lower()).split()
  return [t for t in map(_stem, words) if t is not None]


def _lcs_f1(pred_tokens: Sequence[str], ref_tokens: Sequence[str]) -> float:
  if not pred_tokens or not ref_tokens:
    return 0.0
  lcs = LCSseq.similarity(pred_tokens, ref_tokens)  # exact LCS length (bit-parallel)
  if lcs == 0:
    return 0.0
  precision = lcs / len(pred_tokens)
  recall = lcs / len(ref_tokens)
  return 2 * precision * recall / (precision + recall)


def rouge_l_f1(prediction: str, references: Sequence[str]) -> float:
  """ROUGE-L F1 (rouge-score, stemming on), max over references; in [0, 1]; 0.0 if either is empty."""
  pred_tokens = rouge_tokenize(prediction)
  if not pred_tokens:
    return 0.0
  return max((_lcs_f1(pred_tokens, rouge_tokenize(r)) for r in references), default=0.0)


# ------------------------------------------------------------------------------------------------
# Trust-Score refusal test: fuzzywuzzy 0.18.0 `fuzz.partial_ratio` with python-Levenshtein.


def _levenshtein_keep_runs(s1: str, s2: str) -> list[tuple[int, int, int]]:
  """Matching blocks of python-Levenshtein's `editops(s1, s2)` (C `lev_editops_find` + backtrack).

  Strips the common prefix/suffix, fills the unit-cost Levenshtein matrix of the middles (numpy,
  row by row), then walks back with the C code's preferences (keep going in the same insert/delete
  direction, then keep, then replace, then insert, then delete). Returns maximal runs of kept
  characters as (i, j, size), plus the dummy (len1, len2, 0) block, as `matching_blocks` does.
  """
  n1, n2 = len(s1), len(s2)
  pre = 0
  while pre < n1 and pre < n2 and s1[pre] == s2[pre]:
    pre += 1
  suf = 0
  while suf < n1 - pre and suf < n2 - pre and s1[n1 - 1 - suf] == s2[n2 - 1 - suf]:
    suf += 1
  a, b = s1[pre:n1 - suf], s2[pre:n2 - suf]
  la, lb = len(a), len(b)
  # matrix[i, j] = edit distance between a[:i] and b[:j].
  matrix = np.empty((la + 1, lb + 1), dtype=np.int64)
  matrix[0] = np.arange(lb + 1)
  b_codes = np.fromiter(map(ord, b), dtype=np.int64, count=lb)
  cols = np.arange(lb + 1)
  for i in range(1, la + 1):
    prev = matrix[i - 1]
    cand = np.empty(lb + 1, dtype=np.int64)
    cand[0] = i
    cand[1:] = np.minimum(prev[1:] + 1, prev[:-1] + (b_codes != ord(a[i - 1])))
    # Left-to-right insertions: row[j] = min_k<=j cand[k] + (j - k).
    matrix[i] = np.minimum.accumulate(cand - cols) + cols
  m = matrix.tolist()
  kept = []  # (i, j) pairs, 0-based in a/b, collected backwards
  i, j, direction = la, lb, 0
  while i or j:
    p = m[i][j]
    if direction < 0 and j and p == m[i][j - 1] + 1:
      j -= 1
      continue
    if direction > 0 and i and p == m[i - 1][j] + 1:
      i -= 1
      continue
    if i and j and p == m[i - 1][j - 1] and a[i - 1] == b[j - 1]:
      i, j, direction = i - 1, j - 1, 0
      kept.append((i, j))
      continue
    if i and j and p == m[i - 1][j - 1] + 1:
      i, j, direction = i - 1, j - 1, 0
      continue
    if j and p == m[i][j - 1] + 1:  # the C code asserts direction == 0 here; never reached otherwise
      j, direction = j - 1, -1
      continue
    i, direction = i - 1, 1
  kept.reverse()
  pairs = [(k, k) for k in range(pre)] + [(x + pre, y + pre) for x, y in kept]
  pairs += [(n1 - suf + k, n2 - suf + k) for k in range(suf)]
  blocks = []
  for x, y in pairs:
    if blocks and blocks[-1][0] + blocks[-1][2] == x and blocks[-1][1] + blocks[-1][2] == y:
      blocks[-1][2] += 1
    else:
      blocks.append([x, y, 1])
  return [tuple(blk) for blk in blocks] + [(n1, n2, 0)]


def partial_ratio(s1: str, s2: str) -> int:
  """fuzzywuzzy 0.18.0 `fuzz.partial_ratio(s1, s2)` (python-Levenshtein backend), an int in 0..100.

  For each matching block of the shorter string against the longer, scores the window of the longer
  string of the shorter's length starting at (block.b - block.a), clamped at 0, with Levenshtein's
  `ratio` (= 2·LCS / total length); 100 if any window's ratio > 0.995, else round(100·max).
  """
  if s1 == s2:
    return 100
  if not s1 or not s2:
    return 0
  shorter, longer = (s1, s2) if len(s1) <= len(s2) else (s2, s1)
  scores = []
  for blk_a, blk_b, _ in _levenshtein_keep_runs(shorter, longer):
    start = max(blk_b - blk_a, 0)
    r = Indel.normalized_similarity(shorter, longer[start:start + len(shorter)])
    if r > 0.995:
      return 100
    scores.append(r)
  return int(round(100 * max(scores)))


def refusal_score(text: str, reference: str = REFUSAL_FLAG) -> float:
  """Ground-GRPO's r_score in [0, 1]: partial_ratio(norm(reference), norm(text)) / 100."""
  return partial_ratio(normalize_answer(reference), normalize_answer(text)) / 100.0


def is_refusal(text: str, *, reference: str = REFUSAL_FLAG,
               threshold: float = REFUSAL_THRESHOLD) -> bool:
  """Trust-Score refusal test: fuzzy partial_ratio of the refusal flag vs `text` > 85.

  Apply it to the answer only (the `<answer>` span, or the text after `</think>`): a refusal-like
  phrase inside reasoning would otherwise count (arXiv:2506.15522 App. A reads the answer). Note that a partial
  refusal ("X [1]. I apologize, but I couldn't find an answer to ...") also counts, as in Trust-Eval.
  """
  ref, hyp = normalize_answer(reference), normalize_answer(text)
  # Fast exit: rapidfuzz's partial_ratio takes the best window over all alignments, an upper bound
  # of fuzzywuzzy's (which scores a subset of those windows), so a low bound decides "no" exactly.
  if ref != hyp and rapidfuzz_fuzz.partial_ratio(ref, hyp) < threshold - 1e-6:
    return False
  return partial_ratio(ref, hyp) > threshold


# ------------------------------------------------------------------------------------------------
# TruthRL abstention test.

_CURLY_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u00b4": "'", "`": "'"})


def normalize_answer_truthrl(s: str) -> str:
  """SQuAD normalisation after mapping ’ ‘ ´ ` to ' (TruthRL's abstention test; the mapping is ours)."""
  return normalize_answer(s.translate(_CURLY_QUOTES))


def is_abstention(boxed_answer: str) -> bool:
  """TruthRL: does the `\\boxed{}` content abstain? ("i dont know" substring after normalisation)."""
  return "i dont know" in normalize_answer_truthrl(boxed_answer)


# The answer normalisers by the name configs and evaluators use (em_f1's `normalizer`); the names say
# what each does, not whose paper uses it. "hotpot" normalises as SQuAD; em_f1 then scores F1 with hotpot_f1.
NORMALIZERS: dict[str, Callable[[str], str]] = {
    "squad": normalize_answer, "punct_to_space": normalize_answer_arena,
    "squad_quotes": normalize_answer_truthrl,
    "hotpot": normalize_answer}
