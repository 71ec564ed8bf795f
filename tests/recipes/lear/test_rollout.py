"""LEAR rollouts (recipes/lear/rollout.py): the three hard-masked contexts, o_f as the continuation of the
sample, the reward's extras, and a Trainer run of configs/lear.py on a tiny model.

A tiny random llama with SmolLM2's vocabulary stands in for the policy (its tokenizer and chat template
are real). A random model never writes "<reason>…</extract>", so the r/e rollouts of the context tests
are fixed texts whose sampler log-probs come from a forward pass (what the sampler would report); the
answer passes always run on the real sampler.
"""

import importlib.util
import json
import pathlib

import jax
import numpy as np
import pytest

from grounding_jax import sampling
from grounding_jax.data.schema import Example, Passage
from grounding_jax.models import load_pretrained, load_tokenizer
from grounding_jax.models import logprobs
from grounding_jax.recipes import get_recipe
from grounding_jax.recipes import get_reward
from grounding_jax.recipes.lear import recipe as lear
from grounding_jax.recipes.lear import rollout as lear_rollout
from grounding_jax.rl import trainer as trainer_lib
from grounding_jax.sampling import rollout as rollout_lib

ROOT = pathlib.Path(__file__).resolve().parents[3]
G = 2
WIDTH = 128  # the fixed rollouts' completion width (max_new_tokens)


def _words(stem: str, n: int) -> str:
  return " ".join(f"{stem}{i}" for i in range(n))


# Passages of 40 + 25 = 65 words (L_P), so lengths 26 / 13 / 5 words reproduce Eq. 6's
# vectors at a tenth of their scale (Eqs. 6–7 depend on ratios only).
EXAMPLES = [
    Example(question="What is the capital of Veltria?",
            passages=(Passage("Drou is the capital of Veltria. " + _words("fact", 34), "Veltria"),
                      Passage("Mara Quell lives in Veltria. " + _words("trait", 20), "Mara Quell")),
            answers=("Drou",), id="q0"),
    Example(question="Who founded Brask Lamps?",
            passages=(Passage("Brask Lamps was founded by Tov Renn.", "Brask Lamps"),),
            answers=("Tov Renn",), id="q1"),
]
RATIONALES = [_words("why", 26), _words("because", 5), None, None]
EVIDENCE = [_words("ev", 13), _words("note", 5), None, None]
TEXTS = [
    f"<reason>{RATIONALES[0]}</reason><extract>{EVIDENCE[0]}</extract>",
    f"<reason>{RATIONALES[1]}</reason>\n<extract>{EVIDENCE[1]}</extract>",
    "<reason>the model ran out of tokens",             # no "</extract>": truncated
    "<extract>Brask Lamps, founder Tov Renn</extract>",  # complete, but no <reason> block
]


@pytest.fixture(scope="module")
def tok(smollm2_dir):
  return load_tokenizer(smollm2_dir)


@pytest.fixture(scope="module")
def model(tiny_checkpoint):
  return load_pretrained(tiny_checkpoint("llama", vocab_size=49152))


def _prompt_fn(tok):
  return lambda ex: get_recipe("lear").render_prompt(ex, tok)


@pytest.fixture(scope="module")
def fixed_rollout(model, tok):
  """TEXTS as a 2-prompt × G=2 rollout, sampler log-probs from a forward pass at T = 1."""
  pids, pmask = sampling.tokenize_prompts(tok, [_prompt_fn(tok)(ex) for ex in EXAMPLES])
  ids = np.full((len(TEXTS), WIDTH), tok.pad_token_id, np.int32)
  mask = np.zeros((len(TEXTS), WIDTH), bool)
  for i, t in enumerate(TEXTS):
    e = tok.encode(t, add_special_tokens=False)
    assert tok.decode(e) == t
    ids[i, :len(e)], mask[i, :len(e)] = e, True
  lp, _ = logprobs.completion_logprobs(model, np.repeat(pids, G, 0), np.repeat(pmask, G, 0), ids,
                                       mask, temperature=1.0, remat=False)
  return rollout_lib.Rollout(
      examples=list(EXAMPLES), prompt_ids=pids, prompt_mask=pmask, completion_ids=ids,
      completion_mask=mask, sampler_logp=np.where(mask, np.asarray(lp), 0.0).astype(np.float32),
      lengths=mask.sum(1).astype(np.int32), truncated=np.array([False, False, True, False]),
      texts=list(TEXTS), group_size=G)


def _decode(tok, ids):
  return tok.decode(ids, skip_special_tokens=False)


@pytest.mark.parametrize("keep_empty_tags", [True, False])
@pytest.mark.parametrize("prefix", ["<answer>", ""])
def test_contexts_match_string_construction(tok, fixed_rollout, keep_empty_tags, prefix):
  opts = lear_rollout.LearOptions(answer_prefix=prefix, keep_empty_tags=keep_empty_tags)
  ctx = lear_rollout.build_contexts(tok, fixed_rollout, _prompt_fn(tok), opts, stop=("</extract>",))
  np.testing.assert_array_equal(ctx.complete, [True, True, False, True])
  np.testing.assert_array_equal(ctx.parsed, [True, True, False, False])
  assert ctx.prefix_ids == tok.encode(prefix, add_special_tokens=False)
  empty_extract, empty_reason = ("<extract></extract>", "<reason></reason>") if keep_empty_tags \
      else ("", "")
  for i in (0, 1):
    ex = EXAMPLES[i // G]
    full_prompt = get_recipe("lear").render_prompt(ex, tok)
    # prompt_noP: the passages' text deleted from the full prompt string (Eq. 4).
    passages_text = lear.passages_text(ex.passages)
    assert full_prompt.count(passages_text) == 1
    no_passage_prompt = full_prompt.replace(passages_text, "")
    sampled = list(fixed_rollout.completion_ids[i, :fixed_rollout.lengths[i]])
    # ctx_f: the prompt ids the rollout ran, then the sampled ids themselves, then the prefix.
    prompt_ids = list(fixed_rollout.prompt_ids[i // G][fixed_rollout.prompt_mask[i // G]])
    assert ctx.full[i] == prompt_ids + sampled + ctx.prefix_ids
    assert _decode(tok, ctx.full[i]) == full_prompt + TEXTS[i] + prefix
    assert _decode(tok, ctx.rationale[i]) == (
        f"{full_prompt}<reason>{RATIONALES[i]}</reason>{empty_extract}{prefix}")
    ctx_e = _decode(tok, ctx.evidence[i])
    assert ctx_e == f"{no_passage_prompt}{empty_reason}<extract>{EVIDENCE[i]}</extract>{prefix}"
    assert RATIONALES[i] not in ctx_e and "Passage 1" not in ctx_e
    assert not any(p.text in ctx_e or p.text[:20] in ctx_e for p in ex.passages)


def test_evidence_context_without_instruction(tok, fixed_rollout):
  opts = lear_rollout.LearOptions(evidence_context_instruction=False)
  ctx = lear_rollout.build_contexts(tok, fixed_rollout, _prompt_fn(tok), opts, stop=("</extract>",))
  bare = tok.apply_chat_template([{"role": "user", "content": f"Question: {EXAMPLES[0].question}"}],
                                 tokenize=False, add_generation_prompt=True)
  assert _decode(tok, ctx.evidence[0]) == (
      f"{bare}<reason></reason><extract>{EVIDENCE[0]}</extract><answer>")


@pytest.fixture(scope="module")
def lear_sample(model, tok, fixed_rollout):
  return _answer_passes(model, tok, fixed_rollout, seed=3)


def _answer_passes(model, tok, ro, seed):
  # o_r / o_e greedy (masked_temperature=0, a second sampler call); the Trainer test below runs the
  # default single call.
  opts = lear_rollout.LearOptions(answer_max_new_tokens=8, masked_temperature=0.0)
  return lear_rollout.answer_passes(model, tok, ro, _prompt_fn(tok), opts, temperature=1.0,
                                    top_p=1.0, top_k=0, stop=("</extract>",), max_prompt_tokens=0,
                                    seed=jax.random.key(seed))


def test_full_answer_continues_the_sample_and_forced_prefix_has_no_loss(model, tok, fixed_rollout,
                                                                       lear_sample):
  ro = lear_sample.rollout
  prefix = tok.encode("<answer>", add_special_tokens=False)
  p = len(prefix)
  assert ro.completion_ids.shape[1] == WIDTH + p + 8
  for i in range(len(TEXTS)):
    n = int(fixed_rollout.lengths[i])
    np.testing.assert_array_equal(ro.completion_ids[i, :n], fixed_rollout.completion_ids[i, :n])
    assert ro.completion_mask[i, :n].all()
    if i == 2:  # no "</extract>": the trained sequence is the r/e sample alone
      assert ro.lengths[i] == n and not ro.completion_mask[i, n:].any()
      assert ro.truncated[i]
      continue
    np.testing.assert_array_equal(ro.completion_ids[i, n:n + p], prefix)
    assert not ro.completion_mask[i, n:n + p].any() and (ro.sampler_logp[i, n:n + p] == 0).all()
    assert ro.lengths[i] > n + p and ro.completion_mask[i, n + p:ro.lengths[i]].all()
    assert not ro.completion_mask[i, ro.lengths[i]:].any()
    o_f = tok.decode(ro.completion_ids[i, n + p:ro.lengths[i]], skip_special_tokens=True)
    assert lear_sample.extras["answers_full"][i] == "<answer>" + o_f
    assert ro.texts[i] == TEXTS[i] + "<answer>" + o_f
  # The trained sequence's log-probs by a plain forward pass (the update's mask: forced tokens are
  # attended but not counted) equal the sampler's on every sampled token, o_f included.
  lp, _ = logprobs.completion_logprobs(model, np.repeat(ro.prompt_ids, G, 0),
                                       np.repeat(ro.prompt_mask, G, 0), ro.completion_ids,
                                       ro.completion_mask, temperature=1.0, remat=False)
  m = ro.completion_mask
  np.testing.assert_allclose(np.asarray(lp)[m], ro.sampler_logp[m], atol=1e-5, rtol=0)
  assert lear_sample.completions == TEXTS


def test_reward_gets_three_answers_per_row(tok, fixed_rollout, lear_sample):
  x = lear_sample.extras
  assert all(len(x[k]) == len(TEXTS) for k in ("answers_rationale", "answers_evidence",
                                               "answers_full"))
  # Rows without both blocks have no masked contexts; the truncated row has no answers at all.
  assert x["answers_rationale"][2:] == ["", ""] and x["answers_evidence"][2:] == ["", ""]
  assert x["answers_full"][2] == "" and x["answers_full"][3].startswith("<answer>")
  assert all(x[k][i].startswith("<answer>") for k in x for i in (0, 1))
  out = get_reward("lear", tau=1.0, gamma=0.5)(lear_sample.completions,
                                              lear_sample.rollout.row_examples(), **x)
  # Eq. 6 vectors, scaled: len_reward_rationale(100, 50, τ=1) = 0.731059 ↔ (26, 13);
  # len_reward_evidence(130, 650, 0.9, 0.5) = 0.894427 ↔ (13, 65); (50, 650) → 1.0 ↔ (5, 65); L_r = L_e
  # → 0.5.
  np.testing.assert_allclose(out["len_rationale"], [26, 5, 0, 0])
  np.testing.assert_allclose(out["len_passages"], [65, 65, 7, 7])
  np.testing.assert_allclose(out["len_reward_rationale"], [0.731059, 0.5, 0, 0], atol=1e-6)
  np.testing.assert_allclose(out["len_reward_evidence"], [0.894427, 1.0, 0, 0], atol=1e-6)
  # A random policy's answer passes do not close </answer>: F1 0, format 0 (Eq. 8 on ỹ = r/e + o_f).
  for k in ("f1_rationale", "f1_evidence", "f1_full", "format"):
    np.testing.assert_array_equal(out[k], 0.0)
  np.testing.assert_allclose(out["reward"], 0.1 * out["length"])
  assert out["reward"][2] == 0.0


def test_masked_passes_can_be_greedy(model, tok, fixed_rollout, lear_sample):
  # Greedy o_r / o_e do not depend on the key; o_f (sampled at the rollout temperature) does.
  other = _answer_passes(model, tok, fixed_rollout, seed=4)
  for k in ("answers_rationale", "answers_evidence"):
    assert other.extras[k] == lear_sample.extras[k]
  assert other.extras["answers_full"] != lear_sample.extras["answers_full"]


def _lear_config(workdir):
  spec = importlib.util.spec_from_file_location("lear_config", ROOT / "configs" / "lear.py")
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  c = module.get_config("runlocal")
  c.workdir = str(workdir)
  c.rollout.update(dict(prompts_per_step=2, group_size=2, max_new_tokens=8))
  # A random policy never writes "</extract>"; the letter "e" also ends the sample, so most rows are
  # "complete" and the update trains on [r/e | forced "<answer>" | o_f] sequences with a hole.
  c.rollout.stop = ("e",)  # besides the recipe's "</extract>"
  c.rollout.options.answer_max_new_tokens = 4
  c.update_loop.micro_batch_size = 4
  c.reward.num_workers = 0
  c.loss.logprob_chunk_size = 8192
  c.logging.console = False
  c.evals.every_steps, c.checkpoint.best_metric = 0, ""  # the spy sees training rollouts only
  for st in c.stages:
    st.num_steps = 1
    st.data.num_examples = 8
  return c


def test_trainer_runs_lear_config(tiny_checkpoint, tok, tmp_path, monkeypatch):
  seen = []

  def spy(*args, **kwargs):
    out = real(*args, **kwargs)
    seen.append(out)
    return out

  real = lear_rollout.sample
  monkeypatch.setattr(lear_rollout, "sample", spy)
  c = _lear_config(tmp_path)
  model = load_pretrained(tiny_checkpoint("llama", vocab_size=49152))  # the update donates params
  history = trainer_lib.Trainer(c, model=model, tokenizer=tok).train()
  assert [h["step"] for h in history] == [1]
  components = ("f1_rationale", "f1_evidence", "f1_full", "answer", "len_reward_rationale",
                "len_reward_evidence", "length", "format")
  rows = [json.loads(line) for line in (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()]
  for h in rows:
    for k in components:
      assert np.isfinite(h[f"reward/{k}"])
    assert np.isfinite(h["loss"]) and h["kl"] >= 0.0
  # Some trained rows held the forced prefix (the hole) and an o_f continuation.
  holes = [((~s.rollout.completion_mask) & (np.arange(s.rollout.completion_ids.shape[1])
                                             < s.rollout.lengths[:, None])).any(1)
           for s in seen]
  assert np.concatenate(holes).any()
  assert all(len(s.extras["answers_full"]) == 4 for s in seen)
