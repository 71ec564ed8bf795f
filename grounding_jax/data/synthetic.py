"""A seeded synthetic grounded-QA benchmark: a tiny invented world written as short passages.

The world has countries (each with a capital), people (each living in a country) and companies (each
founded by a person). Every entity has one passage: its one fact sentence plus a trait sentence that
answers nothing. Questions are single-hop ("What is the capital of Veltria?") or two-hop ("What is the
capital of the country where Mara Quell lives?"). Names are invented syllable strings, so a pretrained
model cannot answer from memory: the answer is in the context or it is nowhere.

Answerable contexts hold every gold passage plus distractors; unanswerable contexts drop every gold
passage and backfill with distractors that mention the same entities (the question's subject, the
bridge, the answer), so the model must read rather than match names (`unanswerable="mentions"`, the
default). `unanswerable="unrelated"` backfills instead with passages that name none of the question's
entities — the easier case of retrieval that found nothing relevant: whether the question's subject is
named at all tells the two kinds apart. Facts are one short sentence so a 135M-parameter model can
learn to copy the answer.

For a policy that searches a corpus instead of reading a given context (the search recipes), a
question is unanswerable only if the corpus lacks its fact: `withheld_entities(world, share)` picks
the entities whose fact passages the corpus leaves out (grounding_jax/tools/corpus.py), and
`generate_examples(..., withheld_share=share)` draws answerable questions among those whose facts
are all kept and unanswerable ones among those that need a withheld fact.

Usage:
  examples = generate_examples(200, seed=0, answerable_ratio=0.5)
"""

from __future__ import annotations

import dataclasses
import random
from typing import Sequence

from grounding_jax.data.schema import Example, Passage

_ONSETS = ("b", "d", "f", "g", "k", "l", "m", "n", "p", "r", "s", "t", "v", "z", "br", "dr", "gr",
           "kr", "st", "th", "tr", "sh", "ch")
_VOWELS = ("a", "e", "i", "o", "u", "ai", "ei", "ou")
_CODAS = ("", "", "n", "r", "s", "l", "k", "m", "sk", "nd", "rt")

_COUNTRY_TRAITS = ("salt mines", "wool trade", "mild winters", "old bridges", "tall forests",
                   "glass workshops", "river ferries", "mountain roads", "spice markets", "stone towers")
_JOBS = ("baker", "pilot", "teacher", "painter", "surveyor", "tailor", "chemist", "sailor", "farmer",
         "librarian")
_PRODUCTS = ("bicycles", "lamps", "ropes", "clocks", "boots", "kettles", "maps", "paper", "tiles",
             "radios")

QUESTION_TYPES = ("capital", "lives_in", "founder", "capital_of_home", "home_of_founder")
UNANSWERABLE_CONTEXTS = ("mentions", "unrelated")


@dataclasses.dataclass(frozen=True)
class World:
  """The invented facts. Every mapping is a function, so each question has exactly one answer."""
  capital: dict[str, str]  # country -> city
  lives_in: dict[str, str]  # person -> country
  founder: dict[str, str]  # company -> person
  passages: dict[str, Passage]  # entity -> its fact passage; "<entity> (mention)" -> a red herring
  fact_sentence: dict[str, str]  # entity -> the sentence in its passage that states its fact


def _name(rng: random.Random, syllables: int) -> str:
  parts = [rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(syllables)]
  return ("".join(parts) + rng.choice(_CODAS)).capitalize()


def _unique_names(rng: random.Random, n: int, make, taken: set[str]) -> list[str]:
  names = []
  while len(names) < n:
    name = make()
    # Whole names and their words must be distinct so substring tests ("mentions") are exact.
    if name in taken or any(w in taken for w in name.split()):
      continue
    taken.add(name)
    taken.update(name.split())
    names.append(name)
  return names


def build_world(seed: int = 0, num_countries: int = 12) -> World:
  """Builds the seeded world: `num_countries` countries, 2× people, 1× companies."""
  if num_countries < 3:
    raise ValueError(f"num_countries={num_countries}: need at least 3 so distractors exist.")
  rng = random.Random(f"synthetic-world-{seed}")
  taken: set[str] = set()
  countries = _unique_names(rng, num_countries, lambda: _name(rng, 2) + "ia", taken)
  cities = _unique_names(rng, num_countries, lambda: _name(rng, 1), taken)
  people = _unique_names(rng, 2 * num_countries, lambda: f"{_name(rng, 2)} {_name(rng, 2)}", taken)
  companies = _unique_names(rng, num_countries, lambda: _name(rng, 2) + "ex", taken)

  capital = dict(zip(countries, cities))
  lives_in = {p: rng.choice(countries) for p in people}
  founder = dict(zip(companies, rng.sample(people, len(companies))))

  passages, fact_sentence = {}, {}

  def add(entity: str, fact: str, trait: str) -> None:
    sentences = [fact, trait]
    rng.shuffle(sentences)  # the fact is not always first, so position is no shortcut
    fact_sentence[entity] = fact
    passages[entity] = Passage(text=" ".join(sentences), title=entity, id=f"w{seed}-{len(passages)}")

  for c in countries:
    add(c, f"The capital of {c} is {capital[c]}.", f"{c} is known for its {rng.choice(_COUNTRY_TRAITS)}.")
  for p in people:
    add(p, f"{p} lives in {lives_in[p]}.", f"{p} works as a {rng.choice(_JOBS)}.")
  for m in companies:
    add(m, f"{m} was founded by {founder[m]}.", f"{m} makes {rng.choice(_PRODUCTS)}.")
  # Red herrings: each entity is also named in a passage that relates it to another entity without
  # stating any asked fact, so gold-free contexts still mention the question's entities.
  mentions = [(c, f"{c} signed a trade treaty with {rng.choice([o for o in countries if o != c])}.")
              for c in countries]
  mentions += [(p, f"{p} once visited {rng.choice(countries)}.") for p in people]
  mentions += [(m, f"{m} opened a shop in {rng.choice(countries)}.") for m in companies]
  for entity, sentence in mentions:
    passages[f"{entity} (mention)"] = Passage(text=sentence, title=entity, id=f"w{seed}-{len(passages)}")
  return World(capital, lives_in, founder, passages, fact_sentence)


def withheld_entities(world: World, share: float) -> frozenset[str]:
  """The entities whose fact passages a search corpus leaves out: round(share × n) of each kind
  (countries, people, companies), drawn with a seed fixed by the world itself, so the corpus
  builder and the example generator agree without passing the set around."""
  if not 0.0 <= share < 1.0:
    raise ValueError(f"withheld_share={share}: must be in [0, 1) (1 would leave no answerable fact).")
  if share == 0.0:
    return frozenset()
  rng = random.Random(f"synthetic-withheld-{share}-{min(world.capital)}")
  out: set[str] = set()
  for kind in (world.capital, world.lives_in, world.founder):
    names = sorted(kind)
    out.update(rng.sample(names, round(share * len(names))))
  return frozenset(out)


def _question(world: World, qtype: str, rng: random.Random):
  """Returns (question, answers, gold entities in hop order, entities the question involves)."""
  if qtype == "capital":
    c = rng.choice(sorted(world.capital))
    city = world.capital[c]
    return f"What is the capital of {c}?", (city, f"{city} City"), (c,), (c, city)
  if qtype == "lives_in":
    p = rng.choice(sorted(world.lives_in))
    c = world.lives_in[p]
    return f"In which country does {p} live?", (c, f"the Republic of {c}"), (p,), (p, c)
  if qtype == "founder":
    m = rng.choice(sorted(world.founder))
    p = world.founder[m]
    return f"Who founded {m}?", (p, p.split()[-1]), (m,), (m, p)
  if qtype == "capital_of_home":
    p = rng.choice(sorted(world.lives_in))
    c = world.lives_in[p]
    city = world.capital[c]
    return (f"What is the capital of the country where {p} lives?", (city, f"{city} City"), (p, c),
            (p, c, city))
  if qtype == "home_of_founder":
    m = rng.choice(sorted(world.founder))
    p = world.founder[m]
    c = world.lives_in[p]
    return (f"In which country does the founder of {m} live?", (c, f"the Republic of {c}"), (m, p),
            (m, p, c))
  raise ValueError(f"question type {qtype!r} unknown; choose from {QUESTION_TYPES}.")


def _distractors(world: World, gold: Sequence[str], involved: Sequence[str], n: int,
                 rng: random.Random, related_first: bool = True) -> list[Passage]:
  """`n` non-gold passages: those naming the question's subject (`involved[0]`) first, then those
  naming any other involved entity, then random ones; shuffled within each tier. Without
  `related_first`, only passages that name no involved entity."""
  others = [e for e in sorted(world.passages) if e not in gold]
  subject = [e for e in others if involved[0] in world.passages[e].text]
  related = [e for e in others if e not in subject
             and any(name in world.passages[e].text for name in involved[1:])]
  rest = [e for e in others if e not in subject and e not in related]
  for tier in (subject, related, rest):
    rng.shuffle(tier)
  chosen = (subject + related + rest) if related_first else rest
  if len(chosen) < n:
    raise ValueError(f"synthetic world: only {len(chosen)} passages name none of {list(involved)}; "
                     f"need {n} (fewer num_passages, or a larger world: num_countries)")
  return [world.passages[e] for e in chosen[:n]]


def _draw(world: World, two_hop: bool, rng: random.Random, withheld: frozenset[str],
          answerable: bool):
  """(question type, question, answers, gold, involved); with `withheld`, redrawn until the question's
  gold facts are all kept (answerable) or one is withheld (unanswerable). Without it, one draw, so the
  default stream is the one generate_examples always had."""
  for _ in range(1000):
    qtype = rng.choice(QUESTION_TYPES[3:] if two_hop else QUESTION_TYPES[:3])
    drawn = _question(world, qtype, rng)
    if not withheld or bool(withheld.isdisjoint(drawn[2])) == answerable:
      return (qtype, *drawn)
  raise ValueError(f"synthetic world: no {'two' if two_hop else 'one'}-hop question is "
                   f"{'answerable' if answerable else 'unanswerable'} with {len(withheld)} facts "
                   "withheld; change withheld_share")


def _evidence(sentences: list[str], join: bool) -> tuple[str, ...]:
  return (" ".join(sentences),) if join else tuple(sentences)


def generate_examples(num_examples: int, *, seed: int = 0, answerable_ratio: float = 0.5,
                      two_hop_ratio: float = 0.3, num_passages: int = 5, num_countries: int = 12,
                      world: World | None = None, join_evidence: bool = False,
                      unanswerable: str = "mentions", withheld_share: float = 0.0) -> list[Example]:
  """Generates grounded-QA `Example`s from a seeded world.

  Args:
    num_examples: how many examples.
    seed: fixes the world (unless `world` is given), the questions, contexts and their order.
    answerable_ratio: exactly round(num_examples × ratio) examples are answerable.
    two_hop_ratio: exactly round(num_examples × ratio) questions are two-hop.
    num_passages: context size k (≥ 2, so two-hop gold fits).
    num_countries: world size (people = 2×, companies = 1×).
    world: reuse a world (e.g. train and eval sets over the same facts with different seeds).
    join_evidence: store a two-hop question's evidence sentences as ONE reference string, as GRACE
      does for HotpotQA (ROUGE against the joined pair rewards quoting both hops).
    unanswerable: what fills an unanswerable context (UNANSWERABLE_CONTEXTS): "mentions", passages
      naming the question's entities (the module doc), or "unrelated", passages naming none of them.
    withheld_share: > 0 for a search corpus without the facts of `withheld_entities(world, share)`:
      answerable questions are drawn among those whose gold facts are all kept, unanswerable ones
      among those needing a withheld fact (0, the default, draws any question for either).

  Returns:
    Examples with `answers` (answer + one alias), and for answerable ones the gold `evidence`
    sentences and 1-indexed `gold_passage_ids`; `meta` holds `hops`, `question_type` and the per-passage
    `answers_found` ([1] for a passage stating the final-hop fact, else [0], as ALCE-style data does).
  """
  if not 0.0 <= answerable_ratio <= 1.0:
    raise ValueError(f"answerable_ratio={answerable_ratio}: must be in [0, 1].")
  if not 0.0 <= two_hop_ratio <= 1.0:
    raise ValueError(f"two_hop_ratio={two_hop_ratio}: must be in [0, 1].")
  if num_passages < 2:
    raise ValueError(f"num_passages={num_passages}: need at least 2 so two-hop gold fits.")
  if unanswerable not in UNANSWERABLE_CONTEXTS:
    raise ValueError(f"unanswerable={unanswerable!r}: expected one of {UNANSWERABLE_CONTEXTS}.")
  world = world if world is not None else build_world(seed, num_countries)
  withheld = withheld_entities(world, withheld_share)
  rng = random.Random(f"synthetic-examples-{seed}")
  n_ans = round(num_examples * answerable_ratio)
  n_two = round(num_examples * two_hop_ratio)
  answerable = [True] * n_ans + [False] * (num_examples - n_ans)
  two_hop = [True] * n_two + [False] * (num_examples - n_two)
  rng.shuffle(answerable)
  rng.shuffle(two_hop)

  examples = []
  for i in range(num_examples):
    qtype, question, answers, gold, involved = _draw(world, two_hop[i], rng, withheld, answerable[i])
    if answerable[i]:
      context = [world.passages[e] for e in gold]
      context += _distractors(world, gold, involved, num_passages - len(context), rng)
    else:
      context = _distractors(world, gold, involved, num_passages, rng,
                             related_first=unanswerable == "mentions")
    rng.shuffle(context)
    gold_ids = {world.passages[e].id for e in gold}
    final_id = world.passages[gold[-1]].id
    gold_passage_ids = tuple(j + 1 for j, p in enumerate(context) if p.id in gold_ids)
    examples.append(Example(
        question=question,
        passages=tuple(context),
        answers=answers,
        evidence=(_evidence([world.fact_sentence[e] for e in gold], join_evidence)
                  if answerable[i] else ()),
        gold_passage_ids=gold_passage_ids,
        answerable=answerable[i],
        id=f"synthetic-{seed}-{i}",
        meta={"hops": len(gold), "question_type": qtype,
              "answers_found": [[int(p.id == final_id)] for p in context]},
    ))
  return examples


def held_out_examples(num_examples: int, *, train: Sequence[Example], world: World, seed: int = 0,
                      answerable_ratio: float = 0.5, two_hop_ratio: float = 0.3, num_passages: int = 5,
                      join_evidence: bool = False, unanswerable: str = "mentions",
                      withheld_share: float = 0.0) -> list[Example]:
  """Evaluation examples over `world` whose questions never occur in `train` (`withheld_share`: as
  `generate_examples`, the training run's).

  A run trains on `generate_examples(n, seed=s)`; its held-out split asks the same world's OTHER
  questions: candidates come from a separate seeded stream, and any whose question text (the fact it
  asks for) is in `train` is dropped, as is a repeat of an earlier (question, answerability) pair.
  Exactly round(num_examples × answerable_ratio) are answerable; ids are
  "synthetic-heldout-{seed}-{i}", distinct from every training id.

  Raises:
    ValueError: the world has too few questions left beside `train` (use a smaller split, or a
      larger world: num_countries).
  """
  seen = {ex.question for ex in train}
  n_ans = round(num_examples * answerable_ratio)
  want = {True: n_ans, False: num_examples - n_ans}
  kept: dict[bool, list[Example]] = {True: [], False: []}
  pairs: set[tuple[str, bool]] = set()
  # Separate streams per round; the world is fixed, so only the questions and contexts change.
  for round_ in range(8):
    pool = generate_examples(max(4 * num_examples, 64), seed=1_000_003 * (seed + 1) + round_,
                             world=world, answerable_ratio=answerable_ratio,
                             two_hop_ratio=two_hop_ratio, num_passages=num_passages,
                             join_evidence=join_evidence, unanswerable=unanswerable,
                             withheld_share=withheld_share)
    for ex in pool:
      key = (ex.question, bool(ex.answerable))
      if ex.question in seen or key in pairs or len(kept[key[1]]) >= want[key[1]]:
        continue
      pairs.add(key)
      kept[key[1]].append(ex)
    if all(len(kept[a]) == want[a] for a in want):
      break
  else:
    raise ValueError(f"held-out split: only {len(kept[True])} answerable / {len(kept[False])} "
                     f"unanswerable questions of this world are not in the {len(seen)} distinct "
                     f"training questions; asked for {want[True]} / {want[False]}. Ask for fewer "
                     "(evals.num_examples) or build a larger world.")
  # Interleave back into one seeded order, then number them.
  rows = kept[True] + kept[False]
  random.Random(f"synthetic-heldout-{seed}").shuffle(rows)
  return [dataclasses.replace(ex, id=f"synthetic-heldout-{seed}-{i}") for i, ex in enumerate(rows)]
