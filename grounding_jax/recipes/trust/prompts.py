"""Ground-GRPO's prompt: Trust-Score's refusal prompt, 0-shot, with a think/answer format instruction.

The strings are Trust-Eval's, character for character (the paper, arXiv:2506.15522, prints none); documents are
"Document [i](Title: T): text" lines, 1-indexed, so `[i]` citations refer to them. Placeholders are
filled with `base.fill` (one pass; the texts hold literal brackets).
"""

from __future__ import annotations

from typing import Sequence

from grounding_jax.data.schema import Example, Passage
from grounding_jax.recipes import base

DEMO_PROMPT = "{INST}\n\nQuestion: {Q}\n\n{D}\nAnswer: {A}"
DOC_PROMPT = "Document [{ID}](Title: {T}): {P}\n"
DEMO_SEP = "\n\n\n"
# trust_eval/docs/prompts/{asqa,eli5,expertqa}_refusal.json (identical text)
INSTRUCTION_LONG_FORM = (
    "Instruction: Write an accurate, engaging, and concise answer for the given question using only the "
    "provided search results (some of which might be irrelevant) and cite them properly. Use an unbiased "
    "and journalistic tone. Always cite for any factual claim. When citing several search results, use "
    "[1][2][3]. Cite at least one document and at most three documents in each sentence. If multiple "
    "documents support the sentence, only cite a minimum sufficient subset of the documents. If none of "
    "the provided documents contain the answer, only respond with \"I apologize, but I couldn't find an "
    "answer to your question in the search results.\". Do not add further explanation as to why an answer "
    "cannot be provided, just state the response above as-is."
)
# trust_eval/docs/prompts/qampari_refusal.json
INSTRUCTION_QAMPARI = (
    "Instruction: Provide a list of accurate answers for the given question using only the provided "
    "search results (some of which might be irrelevant) and cite them properly. Always cite one and only "
    "one document for each answer. Separate answers by commas. For questions that have more than 5 "
    "answers, write at least 5 answers. If none of the provided documents contain the answer, only "
    "respond with \"I apologize, but I couldn't find an answer to your question in the search results.\". "
    "Do not add further explanation as to why an answer cannot be provided, just state the response above "
    "as-is."
)
# [DECISION] The paper prints no prompt and never says how <think>/<answer> is requested; this is the
# our suffix (not the paper's wording), appended to the instruction by default.
THINK_ANSWER_FORMAT = (
    "First think step by step inside <think> </think> tags, then give only the final answer (with "
    "citations) or the refusal sentence inside <answer> </answer> tags."
)


def documents(passages: Sequence[Passage]) -> str:
  """Trust-Score `{D}`: "Document [i](Title: T): text\\n" per passage, 1-indexed, concatenated."""
  return "".join(base.fill(DOC_PROMPT, ID=str(i + 1), T=p.title, P=p.text)
                 for i, p in enumerate(passages))


def _block(ex: Example, instruction: str, answer: str | None) -> str:
  # ALCE/Trust-Eval make_demo: "{A}" is dropped and the block right-stripped; a demo's answer then
  # follows "Answer:" directly (no space). With no documents the "{D}\n" line is removed.
  template = DEMO_PROMPT if ex.passages else DEMO_PROMPT.replace("{D}\n", "")
  block = base.fill(template, INST=instruction, Q=ex.question, D=documents(ex.passages), A="")
  return block.rstrip() + ("" if answer is None else answer)


def messages(ex: Example, *, dataset: str | None = None, ndoc: int | None = None,
             format_instruction: str | None = THINK_ANSWER_FORMAT,
             demos: Sequence[tuple[Example, str]] = ()) -> base.Messages:
  """One user turn: [demos +] the instruction, question and documents. `dataset` (default
  meta["dataset"], else "asqa") picks QAMPARI's list instruction; `ndoc` keeps the first n documents."""
  dataset = dataset or ex.meta.get("dataset", "asqa")
  instruction = INSTRUCTION_QAMPARI if dataset == "qampari" else INSTRUCTION_LONG_FORM
  if format_instruction:
    instruction = f"{instruction} {format_instruction}"
  if ndoc is not None:
    ex = base.with_passages(ex, ex.passages[:ndoc])
  head = "".join(_block(base.with_passages(d, d.passages[:ndoc] if ndoc is not None else d.passages),
                        instruction, answer) + DEMO_SEP for d, answer in demos)
  return [{"role": "user", "content": head + _block(ex, instruction, None)}]
