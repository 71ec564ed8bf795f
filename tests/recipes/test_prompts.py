"""Prompt rendering: verbatim note templates, each paper's passage numbering, chat templates.

The NOTE_* strings below are copied from the implementation notes' code blocks (../shared/papers), not
from grounding_jax, so they are an independent reference for the templates.
"""

import pytest

from grounding_jax.data.schema import Example, Passage
from grounding_jax.recipes import get_recipe

# Every prompt the recipes render: (recipe, template) by the name the papers' baselines go by.
PROMPTS = {
    "grace": ("grace", "default"), "grace_few_shot_hotpotqa": ("grace", "few_shot_hotpotqa"),
    "grace_few_shot_qasper": ("grace", "few_shot_qasper"), "grace_arena_baseline": ("grace", "arena_baseline"),
    "trust": ("trust_stage1", "default"), "arena": ("arena", "default"), "arena_naive_grpo": ("naive", "default"),
    "arena_sft_direct": ("arena", "direct"),
    "lear": ("lear", "default"), "lear_reader": ("lear", "reader"), "lear_closed_book": ("lear", "closed_book"),
    "lear_cot": ("lear", "cot"), "truthrl": ("truthrl", "default"),
    "truthrl_no_retrieval": ("truthrl", "no_retrieval"),
    "search": ("search", "default"), "search_grounded": ("search_grounded", "default"),
}


def build_messages(name, example, **kw):
  recipe, template = PROMPTS[name]
  return get_recipe(recipe).messages(example, template=template, **kw)


def render_prompt(name, example, tokenizer=None, **kw):
  recipe, template = PROMPTS[name]
  return get_recipe(recipe).render_prompt(example, tokenizer, template=template, **kw)

NOTE_GRACE_SYSTEM = (  # note 000 §2.3, JSON message list, system
    'You are an evidence‑validation assistant. For each query, you are given a question wrapped '
    'inside the <question>...</question> tag, and a series of documents as evidence wrapped inside '
    'the <ref>...</ref> tag. To solve these questions, you must follow this **exact** process '
    'without deviation:\n'
    '\n'
    '### Instructions:\n'
    '\n'
    '1. You need to first figure out if the evidences are relevant and useful to the question. '
    '\n'
    '\n'
    '    - If the evidences are **NOT** relevant, you should recall your knowledge about this '
    'question and wrap the process of recalling inside the token of <llm>...</llm>. \n'
    '\n'
    '    - If the evidences are relevant, you should select the evidence that is most relevant '
    'to the question and wrap the selected texts inside the token of <evidence>...</evidence>. '
    '\n'
    '\n'
    '2. You should then answer the question based on the selected evidence or your knowledge. '
    'The answer should be wrapped inside the token of <answer>...</answer>.'
)
NOTE_GRACE_USER = (  # note 000 §2.3, user
    'Here is the question and the references: \n'
    '<question>{question}</question>\n'
    '<ref>\n'
    '    {ref}\n'
    '</ref>\n'
)
NOTE_ARENA_BLOCK = (  # note 002 §2.4; 'the string ends with </references>\n'
    'A conversation between User and Assistant. The user asks a question and give some references. '
    'The assistant should answer the question based on the references. \n'
    "User's input will always contain:\n"
    '\n'
    '<question>\n'
    '[The question to answer]\n'
    '</question>\n'
    '\n'
    '<references>\n'
    '[References starting with numbers]\n'
    '</references>\n'
    '\n'
    "Assistant's response must contain EXACTLY three sections:\n"
    '\n'
    '<relevance>\n'
    '[List ONLY reference numbers that provide useful information in square brackets, e.g. [1,5]]\n'
    '</relevance>\n'
    '\n'
    '<analysis>\n'
    '[Combine information from relevant references to build the answer. Explicitly mention which '
    'references support each claim]\n'
    '</analysis>\n'
    '\n'
    '<answer>\n'
    '[Answer with ONLY a short phrase or single word. No explanations]\n'
    '</answer>\n'
    '\n'
    '**User**:\n'
    '\n'
    '<question>\n'
    '{question}\n'
    '</question>\n'
    '\n'
    '<references>\n'
    '{references}\n'
    '</references>'
)
NOTE_LEAR_TABLE10 = (  # note 003 §3.2, Table 10
    'You are a highly skilled knowledge reasoner and extractor.\n'
    'Your task is to carefully read the given question and passages to reason how the passages '
    'lead to the answer and extract relevant information that may be used to answer the question. '
    'Follow these steps: 1. In the <reason></reason> tag, perform the following steps. Question '
    'Analysis: Analyze the question to understand the specific information they are seeking. '
    'Identify the key concepts, entities, and relationships involved. Passage Analysis: For each '
    'passage, carefully read and identify sentences or phrases that are useful for answering '
    'the given question. 2. In the <extract></extract> tag, synthesize useful information from '
    'the passages into a coherent narrative. Organize the information logically and concisely. '
    '3. In <answer></answer> tags, give a short answer to the given question, based on the passages, '
    'reasoning information, and extracted knowledge. If none of them work, please answer the '
    'question based on your knowledge. Question: {question} Passages: {passages}'
)
NOTE_TRUTHRL_RETRIEVAL = (  # note 004 §2.3 = PROMPT_RETRIEVAL + '\n' + BOX_FORMAT
    'You are given a Question, References and the time when it was asked in the Pacific Time '
    'Zone (PT), referred to as "Query Time". The query time is formatted as "mm/dd/yyyy, hh:mm:ss '
    'PT". The references may or may not help answer the question. Your task is to answer the '
    'question based on factual information in the references or your own knowledge.\n'
    'Please adhere to the following guidelines when formulating the answer:\n'
    '1. If the question contains a false premise or assumption, answer "invalid question".\n'
    '2. If you are uncertain or don\'t know the answer, answer "I don\'t know".\n'
    '\n'
    'Please reason step by step and then provide the final answer. The reasoning process must '
    'be enclosed within <think> </think> tags. The final answer MUST be put in \\boxed{}. For '
    "example, \\boxed{I don't know}, \\boxed{invalid question}, \\boxed{3 times}, \\boxed{New York}, "
    'etc.'
)
NOTE_TRUST_INSTRUCTION = (  # note 001 §2.2, ASQA/ELI5/ExpertQA
    'Instruction: Write an accurate, engaging, and concise answer for the given question using '
    'only the provided search results (some of which might be irrelevant) and cite them properly. '
    'Use an unbiased and journalistic tone. Always cite for any factual claim. When citing several '
    'search results, use [1][2][3]. Cite at least one document and at most three documents in '
    'each sentence. If multiple documents support the sentence, only cite a minimum sufficient '
    'subset of the documents. If none of the provided documents contain the answer, only respond '
    'with "I apologize, but I couldn\'t find an answer to your question in the search results.". '
    'Do not add further explanation as to why an answer cannot be provided, just state the response '
    'above as-is.'
)
NOTE_TRUST_QAMPARI_INSTRUCTION = (  # note 001 §2.2, QAMPARI
    'Instruction: Provide a list of accurate answers for the given question using only the provided '
    'search results (some of which might be irrelevant) and cite them properly. Always cite one '
    'and only one document for each answer. Separate answers by commas. For questions that have '
    'more than 5 answers, write at least 5 answers. If none of the provided documents contain '
    'the answer, only respond with "I apologize, but I couldn\'t find an answer to your question '
    'in the search results.". Do not add further explanation as to why an answer cannot be provided, '
    'just state the response above as-is.'
)

EX = Example(
    question="Where was Colin Mayhew born?",
    passages=(Passage("Colin Mayhew was an English film director. He was born in Bristol.", "Colin Mayhew", "p1"),
              Passage("Bristol is a city in South West England.", "Bristol", "p2")),
    answers=("Bristol",), gold_passage_ids=(1,), answerable=True,
    meta={"dataset": "asqa", "query_time": "03/10/2024, 23:34:42 PT"})
P1, P2 = (p.text for p in EX.passages)


def test_grace_system_and_user_verbatim():
  system, user = build_messages("grace", EX)
  assert system == {"role": "system", "content": NOTE_GRACE_SYSTEM}
  assert "evidence\u2011validation" in system["content"]  # the non-breaking hyphen survives
  # Unnumbered "title\ntext" chunks joined by blank lines (GRACE code default, note 000 §2.4, §9.23).
  ref = f"Colin Mayhew\n{P1}\n\nBristol\n{P2}"
  assert user["content"] == NOTE_GRACE_USER.replace("{question}", EX.question).replace("{ref}", ref)
  assert render_prompt("grace", EX) == user["content"]
  numbered = render_prompt("grace", EX, numbered=True, include_titles=False)
  assert f"<ref>\n    1.{P1}\n\n2.{P2}\n</ref>\n" in numbered


def test_arena_verbatim_with_numbered_untitled_references():
  expected = (NOTE_ARENA_BLOCK + "\n").replace("{question}", EX.question).replace(
      "{references}", f"1. {P1}\n2. {P2}")
  assert render_prompt("arena", EX) == expected
  assert build_messages("arena", EX)[0]["role"] == "user" and len(build_messages("arena", EX)) == 1
  one = Example(question="q", passages=(Passage("only one"),))
  assert "<references>\nonly one\n</references>\n" in render_prompt("arena", one)  # a lone passage: no number


def test_trust_zero_shot_refusal_prompt():
  suffix = ("First think step by step inside <think> </think> tags, then give only the final answer (with "
            "citations) or the refusal sentence inside <answer> </answer> tags.")
  expected = (f"{NOTE_TRUST_INSTRUCTION} {suffix}\n\nQuestion: {EX.question}\n\n"
              f"Document [1](Title: Colin Mayhew): {P1}\nDocument [2](Title: Bristol): {P2}\n\nAnswer:")
  assert render_prompt("trust", EX) == expected
  plain = render_prompt("trust", EX, format_instruction=None, dataset="qampari", ndoc=1)
  assert plain == (f"{NOTE_TRUST_QAMPARI_INSTRUCTION}\n\nQuestion: {EX.question}\n\n"
                   f"Document [1](Title: Colin Mayhew): {P1}\n\nAnswer:")
  # One demo (ALCE make_demo: the demo answer follows "Answer:" directly, then demo_sep "\n\n\n").
  demo = Example(question="Who?", passages=(Passage("A text.", "A"),))
  with_demo = render_prompt("trust", EX, format_instruction=None, demos=[(demo, "A [1].")])
  assert with_demo.startswith(f"{NOTE_TRUST_INSTRUCTION}\n\nQuestion: Who?\n\nDocument [1](Title: A): A text.\n"
                              f"\nAnswer:A [1].\n\n\n{NOTE_TRUST_INSTRUCTION}\n\nQuestion: {EX.question}")


def test_lear_prompts_verbatim():
  passages = f"Passage 1: Colin Mayhew\n{P1}\nPassage 2: Bristol\n{P2}"
  assert render_prompt("lear", EX) == NOTE_LEAR_TABLE10.replace("{question}", EX.question).replace(
      "{passages}", passages)
  reader = render_prompt("lear_reader", EX, document="Mayhew was born in Bristol.")
  assert reader == ("You are a helpful assistant. Your task is:\n1. Read the given question and use the documents "
                    "provided to answer the question. 2. If the documents don\u2019t work, please answer the question "
                    "based on your own knowledge. Question: Where was Colin Mayhew born? Document: Mayhew was born "
                    "in Bristol. Answer:")
  assert render_prompt("lear_closed_book", EX).endswith("Question: Where was Colin Mayhew born? Answer:")
  assert render_prompt("lear_cot", EX).endswith(f"Document: {passages} Let\u2019s think step by step.")
  assert get_recipe("lear").stop == ("</extract>",)


# Search-R1's instruction (arXiv:2503.09516 Table 1, the authors' make_prefix), typed from the paper.
NOTE_SEARCH_R1 = (
    "Answer the given question. You must conduct reasoning inside <think> and </think> first every time "
    "you get new information. After reasoning, if you find you lack some knowledge, you can call a search "
    "engine by <search> query </search> and it will return the top searched results between <information> "
    "and </information>. You can search as many times as your want. If you find no further external "
    "knowledge needed, you can directly provide the answer inside <answer> and </answer>, without detailed "
    "illustrations. For example, <answer> Beijing </answer>. Question: ")


def test_search_r1_template_verbatim_without_passages():
  assert render_prompt("search", EX) == NOTE_SEARCH_R1 + EX.question + "\n"
  grounded = render_prompt("search_grounded", EX)
  assert grounded == NOTE_SEARCH_R1.replace(
      "Question: ", "If the search results do not contain the answer, answer <answer> I don't know "
      "</answer>. Question: ") + EX.question + "\n"
  assert "Bristol" not in grounded  # passages come only through the search tool
  assert get_recipe("search").stop == ("</answer>",)
  assert get_recipe("search").tool_format.call_close == "</search>"


def test_truthrl_exact_assembly():
  refs = f"<DOC>\nDocument [1]: {P1}\n</DOC>\n<DOC>\nDocument [2]: {P2}\n</DOC>"
  expected = (NOTE_TRUTHRL_RETRIEVAL + "\n### Question\nWhere was Colin Mayhew born?\n"
              "### Query Time\n03/10/2024, 23:34:42 PT\n### References\n" + refs)
  assert render_prompt("truthrl", EX) == expected
  # Reference character budget: the second block would pass it, so only the first is kept.
  first_len = len(f"<DOC>\nDocument [1]: {P1}\n</DOC>")
  assert render_prompt("truthrl", EX, char_budget=first_len + 5).endswith(f"{P1}\n</DOC>")
  # No query time known: the section is left out; no retrieval: no references and the other task text.
  bare = Example(question="q?", passages=EX.passages)
  assert "### Query Time" not in render_prompt("truthrl", bare)
  closed = render_prompt("truthrl_no_retrieval", EX)
  assert "### References" not in closed and "based on factual information in your own knowledge." in closed
  assert closed.endswith("### Question\nWhere was Colin Mayhew born?\n### Query Time\n03/10/2024, 23:34:42 PT\n")


def test_arena_sft_direct_prompt():
  # ARENA's SFT-direct (note 002 §8): the question, then every retrieved paragraph in order, then a
  # short-answer instruction (its wording is ours: the paper gives none, §9 item 17).
  prompt = render_prompt("arena_sft_direct", EX)
  refs = "\n".join(f"{i + 1}. {p.text}" for i, p in enumerate(EX.passages))
  assert prompt.startswith(f"{EX.question}\n\n{refs}\n\nAnswer the question based on the references.")
  assert "<relevance>" not in prompt and prompt.endswith("single word. No explanations.")


def test_every_recipe_renders_and_unknowns_fail():
  for name in PROMPTS:
    assert EX.question in render_prompt(name, EX)
  with pytest.raises(ValueError, match="unknown recipe 'graze'"):
    get_recipe("graze")
  with pytest.raises(ValueError, match="recipe 'grace' has no prompt template 'nope'"):
    get_recipe("grace").render_prompt(EX, template="nope")
  with pytest.raises(TypeError, match="recipe 'arena' template 'default'"):
    render_prompt("arena", EX, numbered=True)


# ------------------------------------------------------------------------------ chat templates

# A ChatML template with Qwen3's thinking switch: enable_thinking=False pre-fills an empty think block.
_CHATML = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}"
    "{% endif %}")


@pytest.fixture(scope="module")
def tiny_tokenizer():
  import tokenizers
  import transformers
  vocab = {"[UNK]": 0, "<|im_start|>": 1, "<|im_end|>": 2}
  tok = tokenizers.Tokenizer(tokenizers.models.WordLevel(vocab, unk_token="[UNK]"))
  tok.pre_tokenizer = tokenizers.pre_tokenizers.Whitespace()
  return transformers.PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", eos_token="<|im_end|>",
                                              chat_template=_CHATML)


def test_chat_template_wrapping_and_thinking_switch(tiny_tokenizer):
  user = render_prompt("grace", EX)
  head = f"<|im_start|>system\n{NOTE_GRACE_SYSTEM}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n"
  assert render_prompt("grace", EX, tiny_tokenizer) == head + "<|im_start|>assistant\n"
  assert render_prompt("grace", EX, tiny_tokenizer, enable_thinking=True) == head + "<|im_start|>assistant\n"
  assert render_prompt("grace", EX, tiny_tokenizer, enable_thinking=False) == (
      head + "<|im_start|>assistant\n<think>\n\n</think>\n\n")
  arena = render_prompt("arena", EX, tiny_tokenizer)
  assert arena == f"<|im_start|>user\n{render_prompt('arena', EX)}<|im_end|>\n<|im_start|>assistant\n"


def test_tokenizer_without_chat_template_is_an_error(tiny_tokenizer):
  import copy
  bare = copy.deepcopy(tiny_tokenizer)
  bare.chat_template = None
  with pytest.raises(ValueError, match="no chat template"):
    render_prompt("arena", EX, bare)


def test_smollm2_chat_template(smollm2_dir):
  from grounding_jax.models import load_tokenizer
  tok = load_tokenizer(smollm2_dir)
  user = render_prompt("truthrl", EX)
  # SmolLM2's template adds its default system turn when none is given.
  assert render_prompt("truthrl", EX, tok) == (
      "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
      f"<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n")
  assert render_prompt("grace", EX, tok).startswith(f"<|im_start|>system\n{NOTE_GRACE_SYSTEM}<|im_end|>\n")


def test_grace_baselines_keep_the_demos_and_fill_the_last_turn():
  # Spot checks against note 000 Appendix A (full lists were compared when the module was written).
  msgs = build_messages("grace_few_shot_hotpotqa", EX)
  assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user", "assistant", "user", "assistant", "user"]
  assert [msgs[i]["content"] for i in (2, 4, 6)] == ["Tyne and Irthing", "21 July 1981", "I don't know."]
  assert msgs[1]["content"].startswith("**Question:**\nUpper Denton is situated on the line of the Roman road")
  assert msgs[-1]["content"] == f"**Question:**\n{EX.question}\n\n**Context:**\nColin Mayhew\n{P1}\n\nBristol\n{P2}\n"
  assert msgs[0]["content"].endswith(
      '3.  If the context does not contain enough information to answer the question, you must state: "Based on '
      'the provided context, I cannot answer this question."\n4.  Keep your answer concise and to the point.')
  qasper = build_messages("grace_few_shot_qasper", EX)
  assert qasper[2]["content"] == "Yes." and qasper[6]["content"] == "I don't know."
  assert "BERT$_\\textrm {{\\scriptsize LARGE}}$" in qasper[3]["content"]
  arena = build_messages("grace_arena_baseline", EX)
  assert arena[0]["content"].startswith("A conversation between User and Assistant.")
  assert ('otherwise, the assistant should output "The provided evidence is not enough to answer the question." '
          'only.') in arena[0]["content"]
  assert arena[1]["content"] == (f"<question>\n{EX.question}\n</question>\n\n<references>\n1.Colin Mayhew\n{P1}\n\n"
                                 f"2.Bristol\n{P2}\n</references>")
  # The templates themselves are never modified by rendering.
  assert build_messages("grace_few_shot_hotpotqa", EX)[-1]["content"] == msgs[-1]["content"]


def test_placeholders_inside_passages_are_left_alone():
  tricky = Example(question="What is {ref} in $\\mathcal{A}$?", passages=(Passage("Let {question} be \\mathcal{A}.", "T"),))
  assert "What is {ref} in $\\mathcal{A}$?" in render_prompt("grace", tricky)
  assert "Let {question} be \\mathcal{A}." in render_prompt("grace", tricky)
  trust = render_prompt("trust", tricky, format_instruction=None)
  assert trust.endswith("Question: What is {ref} in $\\mathcal{A}$?\n\nDocument [1](Title: T): Let {question} be "
                        "\\mathcal{A}.\n\nAnswer:")
  assert render_prompt("trust", Example(question="q?"), format_instruction=None).endswith("Question: q?\n\nAnswer:")
