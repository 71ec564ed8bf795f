"""Knowledge-boundary probing (TruthRL) and the OOK labels it writes."""

import types

import numpy as np
import pytest

from grounding_jax.data import answerability
from grounding_jax.data.schema import Example
from grounding_jax.eval import probing


def _em(questions, predictions, golds):
  return np.array([p.strip().lower() in {g.lower() for g in gs} for p, gs in zip(predictions, golds)])


class _ScriptedGenerate:
  """Deterministic generate-like callable: sample s of a prompt answers `script[prompt](s)`.

  The probing logic (batching, sample offsets, prompt-major unpacking, counting) is what these tests
  check, so a scripted sampler stands in for the model here; the real sampler is tested below.
  """

  def __init__(self, script):
    self.script, self.calls = script, []

  def __call__(self, model, tokenizer, prompts, *, max_new_tokens, temperature, top_p, num_samples,
               seed):
    self.calls.append((tuple(prompts), num_samples, seed))
    done = {p: sum(n for ps, n, _ in self.calls[:-1] if p in ps) for p in prompts}
    texts = [f"<think>x</think> \\boxed{{{self.script[p](done[p] + s)}}}"
             for p in prompts for s in range(num_samples)]
    return types.SimpleNamespace(texts=texts)


def test_probe_counts_correct_samples_and_marks_unknown():
  examples = [Example("q0", answers=("Orsk",)), Example("q1", answers=("Pesk", "Pesk City")),
              Example("q2", answers=("Dun",)), Example("q3", answers=("Vel",))]
  script = {
      "q0": lambda s: "Orsk",                          # always right -> known
      "q1": lambda s: "Pesk City" if s == 9 else "no",  # right once, in the last call -> known
      "q2": lambda s: "I don't know",                   # abstains -> unknown
      "q3": lambda s: "Velx",                           # always wrong -> unknown
  }
  gen = _ScriptedGenerate(script)
  result = probing.probe_knowledge(None, None, examples, num_samples=10, samples_per_call=4,
                                   prompt_batch_size=3, prompt_fn=lambda e: e.question, judge=_em,
                                   generate_fn=gen)
  np.testing.assert_array_equal(result.num_correct, [10, 1, 0, 0])
  np.testing.assert_array_equal(result.known, [True, True, False, False])
  assert [len(a) for a in result.answers] == [10] * 4 and result.answers[2][0] == "I don't know"
  # 2 prompt batches × 3 sample chunks (4 + 4 + 2), each with its own seed.
  assert [n for _, n, _ in gen.calls] == [4, 4, 2, 4, 4, 2]
  assert len({s for _, _, s in gen.calls}) == 6

  relabelled = answerability.relabel_unknown(examples, result.known)
  assert relabelled[1].answers == ("Pesk", "Pesk City")
  assert relabelled[3].answers == ("I don't know",)
  assert relabelled[3].meta == {"ook": True, "original_answers": ["Vel"]}
  assert relabelled[1].meta == {"ook": False}
  flags_only = answerability.relabel_unknown(examples, result.known, relabel_answers=False)
  assert flags_only[3].answers == ("Vel",) and flags_only[3].meta == {"ook": True}

  # The flags are what the knowledge-enhanced TruthRL reward reads (+1 for abstaining when OOK).
  from grounding_jax.recipes import get_reward
  reward = get_reward("truthrl_knowledge", judge="exact_match")
  out = reward(["\\boxed{I don't know}"] * 4, flags_only)
  np.testing.assert_array_equal(out["reward"] > 0, [False, False, True, True])


def test_probe_rejects_a_generate_fn_with_wrong_row_count():
  bad = lambda *a, num_samples, **k: types.SimpleNamespace(texts=["x"])
  with pytest.raises(ValueError, match="prompt-major"):
    probing.probe_knowledge(None, None, [Example("q", answers=("a",))] * 2, num_samples=2,
                            prompt_fn=lambda e: e.question, judge=_em, generate_fn=bad)


def test_probe_with_the_real_sampler_and_a_tiny_model(tiny_checkpoint, smollm2_dir):
  """Integration with grounding_jax.sampling.generate: its prompt-major rows land on the right question."""
  from grounding_jax import models, sampling
  from grounding_jax.data import retrieval

  tokenizer = models.load_tokenizer(smollm2_dir)
  model = models.load_pretrained(tiny_checkpoint("llama", vocab_size=len(tokenizer),
                                                 bos_token_id=tokenizer.bos_token_id,
                                                 eos_token_id=tokenizer.eos_token_id,
                                                 pad_token_id=tokenizer.pad_token_id))
  examples = [Example("What is the capital of Veltria?", answers=("Orsk",)),
              Example("Who founded Tannex?", answers=("Mara Quell",))]
  prompt_fn = lambda e: e.question
  judge = lambda qs, preds, golds: np.array([len(p) % 2 == 0 for p in preds])  # any fixed rule
  result = probing.probe_knowledge(model, tokenizer, examples, num_samples=4, samples_per_call=2,
                                   max_new_tokens=4, temperature=1.0, top_p=1.0, prompt_fn=prompt_fn,
                                   answer_fn=lambda t: t, judge=judge, seed=7)
  # The second sample chunk (offset 2) of the one prompt batch, drawn again with the documented seed.
  again = sampling.generate(model, tokenizer, [prompt_fn(e) for e in examples], max_new_tokens=4,
                            temperature=1.0, num_samples=2,
                            seed=retrieval.stable_seed("probe", 7, 0, 2))
  assert result.answers[0][2:] == again.texts[:2] and result.answers[1][2:] == again.texts[2:]
  assert result.answers[0] != result.answers[1]
  np.testing.assert_array_equal(result.num_correct,
                                [sum(len(a) % 2 == 0 for a in answers) for answers in result.answers])


def test_abstain_branch_probability_equals_transformers_at_the_gold_completions_parting(
    tiny_smollm2_dir):
  """p(abstain) / (p(abstain) + p(answer)) at TruthRL's branch ("<think>" then "Document" or
  "None"), ours against transformers' logits of the same tokens; unanswerable items are asked at the
  answerable items' branch."""
  import torch
  import transformers
  from grounding_jax.data import synthetic
  from grounding_jax.eval import model_ref
  from grounding_jax import recipes
  examples = synthetic.generate_examples(6, seed=3, answerable_ratio=0.5, num_passages=3)
  loaded = model_ref.load(str(tiny_smollm2_dir))
  tok = loaded.tokenizer
  branch = probing.branch_of("truthrl", next(e for e in examples if e.answerable), tok)
  assert tok.decode(list(branch.prefix)) == "<think>"
  assert (tok.decode([branch.answer_token]), tok.decode([branch.abstain_token])) == ("Document", "None")
  got = probing.abstain_branch_probability(loaded.model, tok, examples, recipe="truthrl",
                                           batch_size=4)
  ref_model = transformers.AutoModelForCausalLM.from_pretrained(tiny_smollm2_dir, dtype=torch.float32)
  want = []
  for ex in examples:
    prompt = recipes.get_recipe("truthrl").render_prompt(ex, tok)
    ids = tok.encode(prompt, add_special_tokens=False) + list(branch.prefix)
    with torch.no_grad():
      logits = ref_model(torch.tensor([ids])).logits[0, -1]
    diff = float(logits[branch.abstain_token] - logits[branch.answer_token])
    want.append(1 / (1 + np.exp(-diff)))
  np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_ridge_probe_scores_equal_sklearns_ridge_classifier_fold_by_fold():
  """Out-of-fold scores against sklearn's RidgeClassifier (an independent implementation) fitted on
  the same standardised training folds; a question and its twin share a fold; a separable feature
  scores AUROC 1, noise about 0.5."""
  from sklearn import linear_model, preprocessing
  rng = np.random.default_rng(0)
  n, d = 40, 12
  x = rng.normal(size=(n, d))
  labels = np.arange(n) % 2 == 0            # kept, removed, kept, removed, ...
  groups = [f"q{i // 2}" for i in range(n)]  # a question and its twin
  x[:, 3] += 1.5 * labels
  got = probing.ridge_probe_scores(x, labels, groups, folds=4, l2=2.0)
  fold = np.asarray([(i // 2) % 4 for i in range(n)])
  for k in range(4):
    train, test = fold != k, fold == k
    scaler = preprocessing.StandardScaler().fit(x[train])
    ref = linear_model.RidgeClassifier(alpha=2.0).fit(scaler.transform(x[train]), labels[train])
    np.testing.assert_allclose(got[test], ref.decision_function(scaler.transform(x[test])),
                               rtol=1e-6, atol=1e-6)
  separable = np.c_[labels.astype(float), rng.normal(size=(n, 3))]
  assert probing.auroc(probing.ridge_probe_scores(separable, labels, groups)[labels],
                       probing.ridge_probe_scores(separable, labels, groups)[~labels]) == 1.0
  noise = probing.ridge_probe_scores(rng.normal(size=(400, 5)), np.arange(400) % 2 == 0,
                                     [i // 2 for i in range(400)])
  assert abs(probing.auroc(noise[::2], noise[1::2]) - 0.5) < 0.1


def test_auroc_counts_ties_half_and_is_nan_when_a_side_is_empty():
  assert probing.auroc([0.9, 0.8], [0.1, 0.2]) == 1.0
  assert probing.auroc([0.1], [0.9]) == 0.0
  assert probing.auroc([0.5, 0.7], [0.5, 0.6]) == (0.5 + 0 + 1 + 1) / 4
  assert np.isnan(probing.auroc([], [0.3]))


def test_a_branch_needs_completions_that_part():
  from grounding_jax.data import synthetic
  tok = types.SimpleNamespace(encode=lambda text, add_special_tokens=False: [1, 2, 3])
  ex = synthetic.generate_examples(2, seed=3, answerable_ratio=1.0)[0]
  with pytest.raises(ValueError, match="do not part"):
    probing.branch_of("truthrl", ex, tok)
