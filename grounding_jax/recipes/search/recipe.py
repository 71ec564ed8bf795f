"""Search-R1 (arXiv:2503.09516): reason in `<think>`, search with `<search> query </search>`, read
the results in `<information>`, answer in `<answer>`; and a grounded variant of its reward.

The prompt is Search-R1's template (Table 1; the authors' data scripts, `make_prefix`): the question
alone, no passages; the policy gets passages only by searching. The rollout stops at `</search>`,
runs the query through the config's tool (search.*, grounding_jax/tools/) and appends the results
(`tool_format`, Search-R1's tags), up to rollout.max_turns searches; it ends at `</answer>` (the
authors cut responses there).

`search` rewards exact match alone (reward.py, §3.4). `search_grounded` adds this project's rule:
an answer pays only when a retrieved passage supports it, `I don't know` pays where nothing
retrieved could (its prompt says so, one sentence more than Search-R1's), wrong and unsupported
answers cost −1 (the table in reward.py and docs/recipes/search.md).

Evaluation: EM and F1 (SQuAD normalisation, fractions as Search-R1 reports them), supported EM
(the grounded variant's headline: a right answer that a retrieved passage states), abstention
(`I don't know`) overall and on unanswerable questions, accuracy on answerable ones. The search
columns (searches per completion, the share of completions that search, gold-passage recall) are
the sampler's, from the calls the rollout made (sampling/multiturn.tool_metrics: `search/…` in
training and evaluation), not re-read from the text here.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

import numpy as np

from grounding_jax import text
from grounding_jax import tools
from grounding_jax.data.schema import Example, Passage
from grounding_jax.recipes import base
from grounding_jax.recipes import reward_fn
from grounding_jax.recipes import gold
from grounding_jax.recipes.search import reward as reward_lib
from grounding_jax.sampling.tools import ToolResult

# Search-R1's instruction (Table 1), as the authors' `make_prefix` writes it ("as your want" sic).
PROMPT = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every "
    "time you get new information. After reasoning, if you find you lack some knowledge, you can "
    "call a search engine by <search> query </search> and it will return the top searched results "
    "between <information> and </information>. You can search as many times as your want. If you "
    "find no further external knowledge needed, you can directly provide the answer inside <answer> "
    "and </answer>, without detailed illustrations. For example, <answer> Beijing </answer>. "
    "{abstain}Question: {question}\n")
# [DECISION] the grounded variant's one added sentence: the policy must know the abstention's words.
ABSTAIN_INSTRUCTION = ("If the search results do not contain the answer, answer <answer> I don't "
                       "know </answer>. ")
ABSTENTION = "I don't know"
GOLD_TOP_K = 3  # Search-R1 retrieves the top 3 passages (§4.1)
_ENTITY_RE = re.compile(r"(?<=\s)[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*")


def _default(ex: Example) -> base.Messages:
  return [{"role": "user", "content": base.fill(PROMPT, abstain="", question=ex.question)}]


def _grounded(ex: Example) -> base.Messages:
  return [{"role": "user", "content": base.fill(PROMPT, abstain=ABSTAIN_INSTRUCTION,
                                                question=ex.question)}]


# ------------------------------------------------------------------------------------------ evaluation

def evaluate(completions: Sequence[str], examples: Sequence[Example]) -> dict[str, Any]:
  """EM / F1 (fractions), supported EM (right, and stated in a retrieved passage), abstention,
  accuracy on answerable and abstention on unanswerable questions; "per_example" holds each column
  per row (subset columns NaN outside their subset). The search columns are the sampler's
  (module docstring)."""
  base.check_aligned(completions, examples)
  answers = [reward_lib.answer(c) or "" for c in completions]
  scores = text.em_f1(answers, [list(e.answers) for e in examples], normalizer="squad", scale=1.0)
  infos = [reward_lib.retrieved(c) for c in completions]
  abstained = np.array([text.is_abstention(a) for a in answers], np.float64)
  answerable = np.array([e.answerable is not False for e in examples])
  supported = [em == 1 and e.answerable is not False and reward_lib.contains_words("\n".join(info), a)
               for em, a, info, e in zip(scores["em_per_example"], answers, infos, examples)]
  per = {"em": scores["em_per_example"], "f1": scores["f1_per_example"],
         "supported_em": np.array(supported, np.float64),
         "correct": scores["em_per_example"], "abstained": abstained,
         "accuracy_answerable": base.subset_column(scores["em_per_example"], answerable),
         "abstain_unanswerable": base.subset_column(abstained, ~answerable)}
  out: dict[str, Any] = {k: base.column_mean(v) for k, v in per.items() if k != "correct"}
  out.update(per_example=per, answers=answers)
  return out


# ------------------------------------------------------------------------------------------ gold traces

def _query(ex: Example) -> str:
  """The question's named entities (capitalised runs after the first word), else the question."""
  rest = ex.question.split(" ", 1)[1] if " " in ex.question else ""
  found = _ENTITY_RE.findall(" " + rest)
  return " ".join(found) or ex.question.rstrip("?").strip()


def _results(ex: Example, first: Sequence[Passage]) -> ToolResult:
  """What a top-3 search returns, approximated from the example's own passages: `first`, then the
  context's passages with the same titles (the world's mentions of the entity), then the rest."""
  titles = {p.title for p in first}
  rest = [p for p in ex.passages if p not in first]
  ordered = [*first, *[p for p in rest if p.title in titles], *[p for p in rest if p.title not in titles]]
  top = ordered[:GOLD_TOP_K]
  return ToolResult(text=tools.format_passages(top), doc_ids=tuple(p.id for p in top))


def _support(ex: Example) -> list:
  """The gold passages' (ids, sentence) pairs in hop order; none where the corpus lacks the fact."""
  return gold.gold_support(ex) if gold.has_answer_in_context(ex) else []


def _search_turn(think: str, query: str, result: ToolResult) -> str:
  fmt = reward_lib.TOOL_FORMAT
  return f"<think>{think}</think>\n{fmt.call_open} {query} {fmt.call_close}{fmt.wrap(result)}"


def gold_trace(recipe: str, ex: Example) -> str:
  """A gold search trace: per gold passage (hop order), a think naming what is missing, a search
  naming the entity (the question's for the first hop, the passage's title after), the results as
  the tool inserts them; then a think quoting the evidence and `<answer> gold </answer>`. Without
  gold passages (the corpus lacks the fact): one search for the question's entities, then
  `<answer> I don't know </answer>`."""
  support = _support(ex)
  if not support:
    query = _query(ex)
    turn = _search_turn(f"I need to find information about {query}.", query,
                        _results(ex, [p for p in ex.passages if p.title and p.title in query][:1]))
    return (turn + "<think>None of the results states the answer.</think>\n"
            f"<answer> {ABSTENTION} </answer>")
  answer_ = gold.gold_answer(recipe, ex)
  turns, seen = [], set()
  for hop, (ids, _) in enumerate(support):
    passage = ex.passages[ids[0] - 1] if ids else None
    if passage is None or passage.id in seen:
      continue
    seen.add(passage.id)
    query = _query(ex) if hop == 0 else (passage.title or _query(ex))
    think = (f"I need to find information about {query}." if hop == 0 else
             f"Now I need to find information about {query}.")
    turns.append(_search_turn(think, query, _results(ex, [passage])))
  facts = " ".join(s for _, s in support)
  return "".join(turns) + f"<think>{facts} So the answer is {answer_}.</think>\n<answer> {answer_} </answer>"


def direct_trace(recipe: str, ex: Example) -> str:
  """An answer from what the model knows, no search: a think, then the gold answer, or `I don't
  know` where the corpus lacks it (as gold_trace). On a world the model is then evaluated on (SFT
  rows drawn from another world: learning_check --sft_world_offset) such an answer is a guess."""
  if not _support(ex):
    return f"<think>I do not know this.</think>\n<answer> {ABSTENTION} </answer>"
  answer_ = gold.gold_answer(recipe, ex)
  return f"<think>I know this: the answer is {answer_}.</think>\n<answer> {answer_} </answer>"


# ------------------------------------------------------------------------------------------ recipes

class Search(base.Recipe):
  name = "search"
  paper = "Search-R1 (arXiv:2503.09516)"
  templates = {"default": _default}
  stop = ("</answer>",)
  tool_format = reward_lib.TOOL_FORMAT  # the sampler stops at its call_close and inserts results
  eval_decoding = base.Decoding(temperature=0.0, max_new_tokens=512)  # greedy evaluation
  headline_metric = "em"
  # The search columns follow in evaluation reports: the sampler's search/… (eval/report.py).
  metric_columns = ("em", "f1", "supported_em", "accuracy_answerable", "abstain_unanswerable",
                    "abstained")
  abstention = "<answer> I don't know </answer> (text.is_abstention)"

  def parse(self, completion: str) -> dict[str, Any]:
    return {"answer": reward_lib.answer(completion), "information": reward_lib.retrieved(completion)}

  def answer(self, completion: str) -> str:
    return reward_lib.answer(completion) or ""

  def reward(self, **options: Any) -> reward_fn.RewardFn:
    return reward_lib.SearchR1Reward(**options)

  def evaluate(self, completions, examples, **kwargs) -> dict[str, Any]:
    return evaluate(completions, examples, **kwargs)

  def gold_completion(self, example: Example, *, style: str = "default") -> str:
    """style "default": a gold search trace (`gold_trace`) for SFT warm-up: Search-R1 trains from
    the base or instruct model with RL alone (§4.1) and states no SFT target [DECISION]. Where the
    corpus lacks the answer the trace says `I don't know` (an answer EM scores 0), not a made-up
    answer. style "direct": `direct_trace`, an answer without searching — mixed into a warm-up
    (SFT data.target "default:0.25,direct:0.75") it leaves a policy that seldom searches, the
    instruct models Search-R1 starts from, so RL has the searching to learn."""
    self._check_style(style, ("default", "direct"))
    return direct_trace(self.name, example) if style == "direct" else gold_trace(self.name, example)


class GroundedSearch(Search):
  name = "search_grounded"
  paper = "Search-R1 (arXiv:2503.09516) with this project's grounded reward"
  templates = {"default": _grounded}
  headline_metric = "supported_em"  # what its reward pays: a right answer the search supports
  abstention_component = "abstain"

  def reward(self, **options: Any) -> reward_fn.RewardFn:
    return reward_lib.GroundedSearchReward(**options)


RECIPES = {"search": Search(), "search_grounded": GroundedSearch()}
