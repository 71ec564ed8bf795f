"""Judges: NLI entailment and answer correctness, batched, behind two small protocols.

  base         NLIJudge / CorrectnessJudge protocols, input checks, a bounded cache, ExactMatchJudge,
               LexicalNLIJudge (word recall: a model-free entailment stand-in), TokenF1Judge (token
               F1 above a threshold: a model-free correctness stand-in)
  llm          LLM judges (the papers' prompts) on any backend: our sampler (SamplerBackend), or
  openai_api   a vLLM / OpenAI-compatible server (OpenAIBackend: concurrent, timeouts, retries, cache)
  nli          transformers NLI models from a local folder: classifiers and TRUE-style T5 (torch)
  style        JudgeStyle: a paper's correctness prompt and reply parser, supplied by its recipe
  prompts      the generic prompt and parser: LLM-as-NLI, the robust yes/no reading
  from_config  a judge from a config value: build(spec, role) / lazy(spec, role)

Recipes take judges as objects or as config specs (`judge=dict(kind="llm", path=..., style=NAME)`,
`judge=dict(kind="openai", base_url=..., model=...)`); a recipe resolves the style name to its
paper's JudgeStyle (recipes/<recipe>/judge.py). judges/ names no paper.
"""

from grounding_jax.judges.base import (CorrectnessJudge, ExactMatchJudge, LexicalNLIJudge, NLIJudge,
                                       TokenF1Judge)
from grounding_jax.judges.from_config import LazyJudge, build, lazy
from grounding_jax.judges.llm import LLMCorrectnessJudge, LLMNLIJudge, SamplerBackend, render_plain
from grounding_jax.judges.nli import ClassifierNLIJudge, Seq2SeqNLIJudge, load_nli_judge
from grounding_jax.judges.openai_api import JudgeRequestError, OpenAIBackend
from grounding_jax.judges.style import JudgeStyle, with_style

__all__ = ["ClassifierNLIJudge", "CorrectnessJudge", "ExactMatchJudge", "JudgeRequestError",
           "JudgeStyle", "LLMCorrectnessJudge", "LLMNLIJudge", "LazyJudge", "LexicalNLIJudge", "NLIJudge", "OpenAIBackend",
           "SamplerBackend", "Seq2SeqNLIJudge", "TokenF1Judge", "build", "lazy", "load_nli_judge", "render_plain",
           "with_style"]
