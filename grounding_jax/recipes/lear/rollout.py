"""LEAR rollouts: sample <reason>r</reason><extract>e</extract>, then answer from three hard-masked contexts.

LEAR (arXiv:2507.15586) §3.1, Eq. 4: the policy is also the answer generator, and answers each sample three
times, every context prefilled from scratch ("hard masking on input rather than soft masking on
attention"), each followed by the forced prefix "<answer>" and sampled until "</answer>" or EOS:

  ctx_f = prompt(q, P) ⊕ the sampled ids of "<reason>r</reason><extract>e</extract>" ⊕ "<answer>"  → o_f
  ctx_r = prompt(q, P) ⊕ "<reason>r</reason><extract></extract>" ⊕ "<answer>"                    → o_r
  ctx_e = prompt(q)    ⊕ "<reason></reason><extract>e</extract>" ⊕ "<answer>"                     → o_e

prompt(q) is the rollout's prompt with the passages removed (Table 10 with {passages} = ""). o_f is the
continuation of the same sample: ctx_f reuses the sampled token ids and o_f is drawn with the rollout's
sampling settings, so the trained sequence ỹ = {r, e, o_f} (Eq. 12) is exactly what π_old produced.
o_r and o_e only feed the reward. All 3N contexts go through one sampler call (two when o_r / o_e use
their own temperature).

The returned `Rollout`'s completion is [sampled r/e ids | forced prefix ids | o_f ids]: the forced
prefix was not sampled by the policy, so it is attended but carries no loss (completion_mask False,
sampler_logp 0); `lengths` counts all three parts and `texts` decode them. The reward completions are
the r/e texts alone and the three answer texts go in as extras (ANSWER_EXTRAS), as LearReward expects.

Decisions ([DECISION] defaults where the paper is silent; alternatives are `LearOptions` fields):
  (a) masked segments keep their empty tag pairs            keep_empty_tags=True
  (b) ctx_e keeps the instruction (passages text removed)   evidence_context_instruction=True
  (c) "<answer>" is forced after every context              answer_prefix="<answer>" ("" = off)
  (d) ctx_f is token level (the sampled ids); ctx_r / ctx_e re-tokenise r and e from their text. Token
      span deletion is not offered: tag boundaries need not fall on BPE token boundaries.
  o_r / o_e decoding: the rollout's settings (our default); masked_temperature overrides.
  A sample without "</extract>" (EOS or max_new_tokens first) gets no o_f in its trained sequence and
  all three answers ""; one whose <reason> or <extract> block is missing gets o_r = o_e = "" (the
  masks are undefined). Its answers then score 0, so the reward is 0 apart from R_len / R_fmt, which
  LearReward already sets to 0 for such rows ("R^final = 0").
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable, Optional, Sequence

import jax
import numpy as np

from grounding_jax import sampling
from grounding_jax.recipes import base
from grounding_jax.sampling import rollout as rollout_lib
from grounding_jax.text import tags

# The reward's extra inputs: one answer pass per context, o_r / o_e / o_f (LearReward reads them).
ANSWER_EXTRAS = ("answers_rationale", "answers_evidence", "answers_full")


@dataclasses.dataclass(frozen=True)
class RationaleEvidence:
  rationale: str | None  # first <reason> content, or None
  evidence: str | None  # first <extract> content, or None


def parse_rollout(completion: str) -> RationaleEvidence:
  """The rationale r and evidence e of a LEAR rollout (first complete blocks)."""
  return RationaleEvidence(tags.first_block(completion, "reason"), tags.first_block(completion, "extract"))


@dataclasses.dataclass(frozen=True)
class LearOptions:
  """How the three answer passes are built and decoded (config.rollout.options).

  Attributes:
    answer_max_new_tokens: generation limit of each answer pass (32–64 suffice for short answers).
    answer_prefix: text forced after each context; "" lets the model write "<answer>" itself.
    answer_stop: stop strings of the answer passes.
    keep_empty_tags: ctx_r ends "<extract></extract>" and ctx_e starts "<reason></reason>"; False drops
      the empty pairs.
    evidence_context_instruction: ctx_e's prompt is the rollout prompt without passages; False uses a
      bare "Question: {q}" user turn.
    masked_temperature: temperature of o_r and o_e; None = the rollout's (and its top-p / top-k),
      0 = greedy. o_f always uses the rollout's settings (it is trained on).
  """
  answer_max_new_tokens: int = 64
  answer_prefix: str = "<answer>"
  answer_stop: tuple[str, ...] = ("</answer>",)
  keep_empty_tags: bool = True
  evidence_context_instruction: bool = True
  masked_temperature: Optional[float] = None

  def __post_init__(self):
    if int(self.answer_max_new_tokens) < 1:
      raise ValueError(f"rollout.options.answer_max_new_tokens={self.answer_max_new_tokens} must be >= 1")
    if self.masked_temperature is not None and self.masked_temperature < 0:
      raise ValueError(f"rollout.options.masked_temperature={self.masked_temperature} must be >= 0 or None")

  @classmethod
  def from_config(cls, cfg: Any) -> "LearOptions":
    """From a ConfigDict / mapping with this class's field names (config.rollout.options)."""
    fields = {f.name for f in dataclasses.fields(cls)}
    values = dict(cfg.items() if hasattr(cfg, "items") else cfg)
    unknown = sorted(set(values) - fields)
    if unknown:
      raise ValueError(f"rollout.options has unknown fields for LEAR {unknown}; known: {sorted(fields)}")
    if "answer_stop" in values:
      values["answer_stop"] = tuple(values["answer_stop"])
    return cls(**values)


@dataclasses.dataclass
class AnswerContexts:
  """The token contexts of the three answer passes, one list of ids per rollout row ([N] each).

  Attributes:
    full, rationale, evidence: ctx_f / ctx_r / ctx_e ids, each ending with `prefix_ids`.
    prefix_ids: the forced prefix's ids (empty when answer_prefix is "").
    complete: bool [N], the sample ended with the rollout's stop string ("</extract>").
    parsed: bool [N], its <reason> and <extract> blocks were both found.
  """
  full: list
  rationale: list
  evidence: list
  prefix_ids: list
  complete: np.ndarray
  parsed: np.ndarray


@dataclasses.dataclass
class LearSample(rollout_lib.RolloutRound):
  """A LEAR rollout round (a RolloutRound).

  Attributes:
    rollout: trained sequences ỹ = r/e ⊕ prefix ⊕ o_f (see module doc), prompt-major, N = P · G.
    completions: [N] the sampled r/e texts, the reward's `completions`.
    extras: the reward extras answers_rationale / answers_evidence / answers_full, [N] strings each.
    contexts: the contexts the answers were generated from.
  """
  contexts: AnswerContexts


def _encode(tokenizer, text: str) -> list:
  return list(tokenizer.encode(text, add_special_tokens=False)) if text else []


def _prompt_token_lists(tokenizer, prompts: Sequence[str], max_prompt_tokens: int) -> list:
  """Each prompt's ids as the rollout tokenises them (BOS rule, left truncation)."""
  ids, mask = sampling.tokenize_prompts(tokenizer, prompts)
  out = [list(row[m]) for row, m in zip(ids, mask)]
  return [r[-max_prompt_tokens:] if max_prompt_tokens else r for r in out]


def masked_segments(rationale: str, evidence: str, keep_empty_tags: bool) -> tuple[str, str]:
  """The response part of ctx_r (evidence masked) and ctx_e (passages and rationale masked)."""
  empty_extract = "<extract></extract>" if keep_empty_tags else ""
  empty_reason = "<reason></reason>" if keep_empty_tags else ""
  return (f"<reason>{rationale}</reason>{empty_extract}",
          f"{empty_reason}<extract>{evidence}</extract>")


def evidence_prompt(example, prompt_fn: Callable[[Any], str], tokenizer,
                    keep_instruction: bool = True) -> str:
  """prompt(q) of Eq. 4: the rollout prompt with every passage removed, or a bare question turn."""
  if keep_instruction:
    return prompt_fn(dataclasses.replace(example, passages=()))
  user = f"Question: {example.question}"
  if getattr(tokenizer, "chat_template", None):
    return base.render([{"role": "user", "content": user}], tokenizer)
  return user


def build_contexts(tokenizer, ro: rollout_lib.Rollout, prompt_fn: Callable[[Any], str],
                   options: LearOptions, *, stop: Sequence[str], max_prompt_tokens: int = 0
                   ) -> AnswerContexts:
  """ctx_f / ctx_r / ctx_e ids for every row of an r/e rollout (LEAR Eq. 4; module doc).

  Args:
    tokenizer: the policy's tokenizer.
    ro: the extractor rollout (completions cut at the stop string).
    prompt_fn: Example -> rendered prompt, the one the rollout used (ctx_e applies it without passages).
    options: layout switches.
    stop: the rollout's stop strings; a row is complete when its text holds one.
    max_prompt_tokens: the rollout's prompt limit (> 0 left-truncates ctx_e's prompt the same way).
  """
  g = ro.group_size
  prefix = _encode(tokenizer, options.answer_prefix)
  no_passage = _prompt_token_lists(
      tokenizer, [evidence_prompt(ex, prompt_fn, tokenizer, options.evidence_context_instruction)
                  for ex in ro.examples], max_prompt_tokens)
  full, rat, evi = [], [], []
  complete = np.zeros(len(ro.texts), bool)
  parsed = np.zeros(len(ro.texts), bool)
  for i, text in enumerate(ro.texts):
    p = i // g
    prompt = [int(t) for t in ro.prompt_ids[p][ro.prompt_mask[p]]]
    complete[i] = bool(stop) and any(s in text for s in stop)
    blocks = parse_rollout(text)
    parsed[i] = complete[i] and blocks.rationale is not None and blocks.evidence is not None
    seg_r, seg_e = masked_segments(blocks.rationale or "", blocks.evidence or "",
                                   options.keep_empty_tags)
    sampled = [int(t) for t in ro.completion_ids[i, :ro.lengths[i]]]
    full.append(prompt + sampled + prefix)
    rat.append(prompt + _encode(tokenizer, seg_r) + prefix)
    evi.append(no_passage[p] + _encode(tokenizer, seg_e) + prefix)
  return AnswerContexts(full=full, rationale=rat, evidence=evi, prefix_ids=prefix,
                        complete=complete, parsed=parsed)


def _rows(gen: sampling.Generation, lo: int, hi: int) -> sampling.Generation:
  """Completion rows [lo, hi) of a num_samples=1 generation."""
  per_row = ("texts", "token_ids", "logprobs", "lengths", "truncated", "completion_mask")
  return dataclasses.replace(gen, **{k: getattr(gen, k)[lo:hi] for k in per_row})


def _join(ro: rollout_lib.Rollout, contexts: AnswerContexts, gen_f: sampling.Generation,
          tokenizer, answer_width: int) -> dict:
  """[r/e | prefix | o_f] completion arrays; rows without "</extract>" keep only their r/e tokens."""
  prefix = np.asarray(contexts.prefix_ids, np.int32)
  n, width = ro.completion_ids.shape
  total = width + len(prefix) + answer_width
  pad = int(tokenizer.pad_token_id or 0)
  ids = np.full((n, total), pad, np.int32)
  mask = np.zeros((n, total), bool)
  logp = np.zeros((n, total), np.float32)
  ids[:, :width], mask[:, :width] = ro.completion_ids, ro.completion_mask
  logp[:, :width] = np.where(ro.completion_mask, ro.sampler_logp, 0.0)
  lengths, truncated = ro.lengths.copy(), ro.truncated.copy()
  for i in np.flatnonzero(contexts.complete):
    start, la = int(ro.lengths[i]), int(gen_f.lengths[i])
    ids[i, start:start + len(prefix)] = prefix  # forced: attended, never in the loss
    mask[i, start:start + len(prefix)] = False
    a = start + len(prefix)
    ids[i, a:a + la] = gen_f.token_ids[i, :la]
    mask[i, a:a + la] = True
    logp[i, a:a + la] = gen_f.logprobs[i, :la]
    lengths[i], truncated[i] = a + la, gen_f.truncated[i]
  texts = [tokenizer.decode(ids[i, :lengths[i]], skip_special_tokens=True) for i in range(n)]
  return dict(completion_ids=ids, completion_mask=mask, sampler_logp=logp, lengths=lengths,
              truncated=truncated, texts=texts)


def answer_passes(model, tokenizer, ro: rollout_lib.Rollout, prompt_fn: Callable[[Any], str],
                  options: LearOptions, *, temperature: float, top_p: float, top_k: int,
                  stop: Sequence[str], max_prompt_tokens: int, seed: jax.Array,
                  mesh=None) -> LearSample:
  """Runs the three answer passes for an r/e rollout and joins o_f to the trained sequence.

  Args:
    model, tokenizer: the policy (π_old) and its tokenizer.
    ro: the extractor rollout of `rollout.sample` (or anything shaped like it).
    prompt_fn: the rollout's Example -> prompt renderer.
    options: LearOptions.
    temperature, top_p, top_k: the rollout's sampling settings (o_f must share them: the trainer's
      log-probs are log_softmax(logits / T) at the rollout temperature).
    stop: the rollout's stop strings (("</extract>",)).
    max_prompt_tokens: the rollout's prompt limit.
    seed: PRNG key of the answer passes.
    mesh: as sampling.generate_ids.

  Returns:
    LearSample whose rollout completion width is ro's + len(prefix ids) + answer_max_new_tokens.
  """
  ctx = build_contexts(tokenizer, ro, prompt_fn, options, stop=stop,
                       max_prompt_tokens=max_prompt_tokens)
  n = len(ro.texts)
  pad = int(tokenizer.pad_token_id or 0)
  settings = dict(temperature=temperature, top_p=top_p, top_k=top_k)
  run = lambda rows, key, s: sampling.generate_ids(
      model, *sampling.left_pad(rows, pad), max_new_tokens=int(options.answer_max_new_tokens),
      num_samples=1, stop=tuple(options.answer_stop), tokenizer=tokenizer, seed=key, mesh=mesh, **s)
  if options.masked_temperature is None:  # one call: 3N rows, o_f rows first
    gen = run(ctx.full + ctx.rationale + ctx.evidence, seed, settings)
    gen_f = _rows(gen, 0, n)
    texts_r, texts_e = gen.texts[n:2 * n], gen.texts[2 * n:]
  else:
    k_f, k_m = jax.random.split(seed)
    gen_f = run(ctx.full, k_f, settings)
    masked = dict(temperature=float(options.masked_temperature), top_p=top_p, top_k=top_k)
    gen_m = run(ctx.rationale + ctx.evidence, k_m, masked)
    texts_r, texts_e = gen_m.texts[:n], gen_m.texts[n:]
  prefix = options.answer_prefix
  answers = {"answers_rationale": (texts_r, ctx.parsed), "answers_evidence": (texts_e, ctx.parsed),
             "answers_full": (gen_f.texts, ctx.complete)}
  extras = {k: [prefix + t if ok else "" for t, ok in zip(*answers[k])]
            for k in ANSWER_EXTRAS}
  joined = _join(ro, ctx, gen_f, tokenizer, int(options.answer_max_new_tokens))
  trained = rollout_lib.Rollout(examples=ro.examples, prompt_ids=ro.prompt_ids,
                                prompt_mask=ro.prompt_mask, group_size=ro.group_size, **joined)
  return LearSample(rollout=trained, completions=list(ro.texts), extras=extras, contexts=ctx)


def sample(model, tokenizer, examples: Sequence[Any], prompt_fn: Callable[[Any], str],
           settings: rollout_lib.SamplingSettings, *, seed: jax.Array, mesh=None,
           options: LearOptions = LearOptions()) -> LearSample:
  """A LEAR round: G r/e samples per example (sampling.rollout.sample, stop "</extract>"), then the
  three answer passes of every sample (answer_passes). Arguments as sampling.rollout.sample, plus
  `options`."""
  if not settings.stop:
    raise ValueError("the LEAR rollout needs rollout.stop=('</extract>',) (LEAR Table 10: the "
                     "extractor stops at '</extract>'); it is empty.")
  k_extract, k_answer = jax.random.split(seed)
  ro = rollout_lib.sample(model, tokenizer, examples, prompt_fn, settings, seed=k_extract, mesh=mesh)
  return answer_passes(model, tokenizer, ro, prompt_fn, options, temperature=settings.temperature,
                       top_p=settings.top_p, top_k=settings.top_k, stop=settings.stop,
                       max_prompt_tokens=settings.max_prompt_tokens, seed=k_answer, mesh=mesh)
