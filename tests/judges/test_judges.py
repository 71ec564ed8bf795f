"""Judges: real loading code on tiny local models, and the logic around LLM judges.

Tiny random transformers models are saved to temp folders and loaded through the judges; their
verdicts are compared with an independent per-example reference (the ALCE / Trust-Eval procedure run
one pair at a time). Fake LLM backends are used only where the assertion is about logic around the
judge (exact-match short-circuit, per-alias early exit, parsing, counting).
"""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grounding_jax import judges
from grounding_jax.judges import base as judges_base
from grounding_jax.judges import from_config as judges_build
from grounding_jax.judges import nli as nli_models
from grounding_jax.judges import prompts as jp

WORDS = ("premise: hypothesis: the a cat dog sat ran on mat park paris is capital of france lyon "
         "big small red blue 1 0 yes no").split()

PREMISES = ["the cat sat on the mat", "paris is the capital of france", "a dog ran", "lyon is big",
            "the red cat", "blue dog sat on a mat in the park", "france", "a small red dog ran in the park",
            "the mat is blue", "cat", "paris is big", "the dog is small"]
HYPOTHESES = ["a cat sat", "paris is big", "the dog ran on the mat", "lyon", "red", "a dog sat",
              "france is big", "the dog is red", "mat", "the cat is small", "paris", "dog"]


def _wordlevel_tokenizer(path, *, bert_style):
  """A whitespace word-level fast tokenizer saved to `path` (BERT-style [CLS] … [SEP] or T5-style </s>)."""
  import tokenizers
  import transformers
  from tokenizers import models, pre_tokenizers, processors
  specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] if bert_style else ["<pad>", "</s>", "<unk>"]
  vocab = {w: i for i, w in enumerate(specials + WORDS)}
  tok = tokenizers.Tokenizer(models.WordLevel(vocab, unk_token=specials[1] if bert_style else "<unk>"))
  tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
  if bert_style:
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])])
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="[PAD]", unk_token="[UNK]",
                                                cls_token="[CLS]", sep_token="[SEP]")
  else:
    tok.post_processor = processors.TemplateProcessing(single="$A </s>", special_tokens=[("</s>", 1)])
    from tokenizers import decoders
    tok.decoder = decoders.WordPiece(prefix="##")  # joins words with spaces
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>",
                                                unk_token="<unk>")
  fast.save_pretrained(path)
  return vocab


@pytest.fixture(scope="module")
def tiny_classifier_dir(tmp_path_factory):
  """A random BertForSequenceClassification whose label order puts ENTAILMENT at index 1."""
  import torch
  import transformers
  path = tmp_path_factory.mktemp("tiny_nli_cls")
  vocab = _wordlevel_tokenizer(path, bert_style=True)
  cfg = transformers.BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=32, max_position_embeddings=64, num_labels=3,
                                initializer_range=1.0,  # large weights: verdicts vary with the input
                                id2label={0: "CONTRADICTION", 1: "ENTAILMENT", 2: "NEUTRAL"},
                                label2id={"CONTRADICTION": 0, "ENTAILMENT": 1, "NEUTRAL": 2})
  torch.manual_seed(0)
  model = transformers.BertForSequenceClassification(cfg)
  model.save_pretrained(path, safe_serialization=True)
  return path


def _classifier_reference(path, premises, hypotheses):
  import torch
  import transformers
  tok = transformers.AutoTokenizer.from_pretrained(path)
  model = transformers.AutoModelForSequenceClassification.from_pretrained(path).eval()
  out = []
  for p, h in zip(premises, hypotheses):  # one pair at a time, no padding
    with torch.no_grad():
      logits = model(**tok(p, h, return_tensors="pt")).logits[0]
    out.append(int(logits.argmax()))
  return np.array(out)


def test_classifier_judge_label_mapping_and_batch_order(tiny_classifier_dir):
  judge = judges.ClassifierNLIJudge(tiny_classifier_dir, batch_size=5)
  assert judge.entail_index == 1
  ref = _classifier_reference(tiny_classifier_dir, PREMISES, HYPOTHESES)
  assert len(set(ref.tolist())) >= 2, "the tiny model must disagree across inputs for this test to bite"
  np.testing.assert_array_equal(judge.entails(PREMISES, HYPOTHESES), ref == 1)
  # Reordering the inputs reorders the verdicts (length-sorted batching restores order).
  perm = np.random.default_rng(0).permutation(len(PREMISES))
  got = judge.entails([PREMISES[i] for i in perm], [HYPOTHESES[i] for i in perm])
  np.testing.assert_array_equal(got, (ref == 1)[perm])
  probs = judge.entailment_probs(PREMISES, HYPOTHESES)
  assert probs.shape == (len(PREMISES),) and np.all((probs >= 0) & (probs <= 1))
  thresholded = judges.ClassifierNLIJudge(tiny_classifier_dir, threshold=0.5)
  np.testing.assert_array_equal(thresholded.entails(PREMISES, HYPOTHESES), probs > 0.5)


def test_classifier_judge_truncates_long_premises(tiny_classifier_dir):
  judge = judges.ClassifierNLIJudge(tiny_classifier_dir, max_length=24, cache=False)
  long_premise = " ".join(["the cat sat on the mat"] * 40)  # 240 words, position table has 64
  got = judge.entails([long_premise, "paris is big"], ["a cat sat", "paris"])
  import transformers
  tok = transformers.AutoTokenizer.from_pretrained(tiny_classifier_dir)
  ids = tok(long_premise, "a cat sat", truncation="longest_first", max_length=24).input_ids
  assert len(ids) == 24 and ids[-4:-1] == tok("a cat sat", add_special_tokens=False).input_ids
  assert got.shape == (2,)


def test_classifier_judge_errors(tiny_classifier_dir, tmp_path):
  with pytest.raises(FileNotFoundError, match="config.json"):
    judges.ClassifierNLIJudge(tmp_path)
  cfg = json.loads((tiny_classifier_dir / "config.json").read_text())
  cfg["id2label"] = {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}
  bad = tmp_path / "bad"
  bad.mkdir()
  for f in tiny_classifier_dir.iterdir():
    (bad / f.name).write_bytes(f.read_bytes())
  (bad / "config.json").write_text(json.dumps(cfg))
  with pytest.raises(ValueError, match="entail_label"):
    judges.ClassifierNLIJudge(bad)
  assert judges.ClassifierNLIJudge(bad, entail_label=2).entail_index == 2
  judge = judges.ClassifierNLIJudge(tiny_classifier_dir)
  with pytest.raises(ValueError, match="2 premises but 1 hypotheses"):
    judge.entails(["a", "b"], ["c"])


@pytest.mark.parametrize("id2label,expected", [
    ({0: "entailment", 1: "neutral", 2: "contradiction"}, 0),
    ({"0": "not_entailment", "1": "entailment"}, 1), ({0: "Non-Entailment", 1: "ENTAILMENT"}, 1),
    ({0: "CONTRADICTION", 1: "NEUTRAL", 2: "ENTAILMENT"}, 2)])
def test_entailment_label_lookup(id2label, expected, tmp_path):
  assert nli_models._entailment_index(id2label, tmp_path) == expected


@pytest.fixture(scope="module")
def tiny_true_dir(tmp_path_factory):
  """A random T5 whose LM head can only say "1" or </s> (w_eos = -w_1), so outputs vary with input."""
  import torch
  import transformers
  path = tmp_path_factory.mktemp("tiny_true")
  vocab = _wordlevel_tokenizer(path, bert_style=False)
  cfg = transformers.T5Config(vocab_size=len(vocab), d_model=16, d_kv=8, d_ff=32, num_layers=1,
                              num_decoder_layers=1, num_heads=2, decoder_start_token_id=0, pad_token_id=0,
                              eos_token_id=1, tie_word_embeddings=False, dropout_rate=0.0,
                              initializer_factor=10.0)  # large weights: the first token depends on input
  torch.manual_seed(0)
  model = transformers.T5ForConditionalGeneration(cfg)
  with torch.no_grad():
    w = model.lm_head.weight
    w1 = w[vocab["1"]].clone()
    w.zero_()
    w[vocab["1"]] = w1 * 20
    w[vocab["</s>"]] = -w1 * 20
  model.save_pretrained(path, safe_serialization=True)
  return path


def _true_reference(path, premises, hypotheses, max_new_tokens=10):
  """Trust-Eval `_run_nli_autoais` in behaviour: one pair, greedy, decode == "1"."""
  import torch
  import transformers
  tok = transformers.AutoTokenizer.from_pretrained(path)
  model = transformers.AutoModelForSeq2SeqLM.from_pretrained(path).eval()
  out, texts = [], []
  for p, h in zip(premises, hypotheses):
    ids = tok("premise: {} hypothesis: {}".format(p, h), return_tensors="pt").input_ids
    with torch.inference_mode():
      gen = model.generate(ids, max_new_tokens=max_new_tokens)
    text = tok.decode(gen[0], skip_special_tokens=True)
    texts.append(text)
    out.append(1 if text == "1" else 0)
  return np.array(out, bool), texts


def test_true_judge_matches_per_example_reference(tiny_true_dir):
  # With Trust-Eval's 10 new tokens this random head never stops right after "1" (texts are "" or
  # "1 1 … 1"), so check the batched texts; with 1 new token the verdicts mix True and False.
  ref10, texts10 = _true_reference(tiny_true_dir, PREMISES, HYPOTHESES)
  assert len(set(texts10)) == 2 and not ref10.any()
  judge = judges.Seq2SeqNLIJudge(tiny_true_dir, batch_size=4)
  assert judge.generate_texts(PREMISES, HYPOTHESES) == texts10
  np.testing.assert_array_equal(judge.entails(PREMISES, HYPOTHESES), ref10)
  ref, _ = _true_reference(tiny_true_dir, PREMISES, HYPOTHESES, max_new_tokens=1)
  assert 0 < ref.sum() < len(ref)
  judge = judges.Seq2SeqNLIJudge(tiny_true_dir, batch_size=4, max_new_tokens=1)
  np.testing.assert_array_equal(judge.entails(PREMISES, HYPOTHESES), ref)
  # Cache: a repeated pair is answered without another batch.
  batches = judge.stats["batches"]
  np.testing.assert_array_equal(judge.entails(PREMISES[:3], HYPOTHESES[:3]), ref[:3])
  assert judge.stats["batches"] == batches and judge.stats["cache_hits"] == 3
  assert isinstance(judges.load_nli_judge(tiny_true_dir), judges.Seq2SeqNLIJudge)


def test_true_judge_truncates_premise_not_hypothesis(tiny_true_dir):
  judge = judges.Seq2SeqNLIJudge(tiny_true_dir, max_input_tokens=40, cache=False)
  long_premise = " ".join(["the cat sat on the mat"] * 30)
  text = judge._fit(long_premise, "paris is the capital of france")
  n = len(judge.tokenizer(text).input_ids)
  assert n <= 40 and text.endswith("hypothesis: paris is the capital of france")
  assert judge.stats["truncated"] == 1
  assert judge.entails([long_premise], ["paris is big"]).shape == (1,)
  assert judges.Seq2SeqNLIJudge.is_entailed("1") and not judges.Seq2SeqNLIJudge.is_entailed("1 1")


def test_true_judge_accepts_a_tokenizer_with_token_type_ids(tmp_path):
  # A BERT-style tokenizer also returns token_type_ids, which T5's generate rejects; the judge
  # passes only ids and mask.
  import shutil

  import transformers

  from grounding_jax.models import bert
  for name in ("vocab.txt", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.json"):
    if (bert.minilm_path() / name).exists():
      shutil.copy(bert.minilm_path() / name, tmp_path / name)
  cfg = transformers.T5Config(vocab_size=30522, d_model=8, d_kv=4, d_ff=16, num_layers=1, num_decoder_layers=1,
                              num_heads=2, decoder_start_token_id=0, pad_token_id=0, eos_token_id=102)
  transformers.T5ForConditionalGeneration(cfg).save_pretrained(tmp_path)
  assert "token_type_ids" in judges.Seq2SeqNLIJudge(tmp_path).tokenizer("a cat")
  assert judges.Seq2SeqNLIJudge(tmp_path, max_new_tokens=2).entails(["a cat"], ["cat"]).shape == (1,)


# --- LLM judges: parsing and the logic around the backend -------------------------------------------

class FakeBackend:
  """Deterministic stand-in for an LLM: answers from a rule; records every prompt it receives."""

  def __init__(self, rule):
    self.rule, self.prompts = rule, []

  def __call__(self, prompts):
    self.prompts.extend(prompts)
    return [self.rule(p) for p in prompts]


def test_arena_and_grace_prompts_are_the_papers_strings():
  # ARENA `src/gpt_eval.py` as recorded in 002 §2.8 (typed here independently of the module).
  answer, golds = "Paris", ["Paris", "City of Light"]
  expected = ('*************Consider a knowledge Q&A RAG task to test the capability of a testing model, the correct answer list is:*************\n' + str(golds)
              + '\n\n\n\n*************Here is the model\'s response:*************\n' + answer
              + '\n\n\n\n*************Please check if the model\'s answer is correct. As long as the model\'s answer hits any item (or synonym) in the correct answer list, it can be considered correct. You only need to answer "yes" or "no".*************')
  assert jp.arena_judge_prompt(golds, answer) == expected
  assert jp.grace_judge_prompt(golds, answer) == expected.replace(str(golds), "Paris\nCity of Light")
  msgs = jp.truthrl_messages("q?", "g", "p")
  assert msgs[0]["content"].startswith(jp.TRUTHRL_INSTRUCTIONS + "\nYou should make the judgment")
  assert msgs[1]["content"] == "Question: q?\n Ground truth: g\n Prediction: p\n"


@pytest.mark.parametrize("reply,robust,arena,grace", [
    ("yes", True, True, True), ("Yes.", True, True, False), ("**No**", False, False, False),
    ("no", False, False, False), ("I think the answer is yes", True, True, False),
    ("Nope", None, False, False), ("", None, None, False), (None, None, None, None),
    ("<think>no wait</think> yes", True, True, False)])
def test_yes_no_parsers(reply, robust, arena, grace):
  assert jp.parse_yes_no(reply) is robust
  assert jp.parse_yes_no_arena(reply) is arena
  assert jp.parse_yes_no_grace(reply) is grace


@pytest.mark.parametrize("reply,expected", [
    ('{"score": 1, "explanation": "ok"}', True), ('{"explanation": "x", "score": 0}', False),
    ('bla {"score": 0} then {"score": 1}', True), ('{"score": 2}', None), ("score is 1", None),
    ('```json\n{"explanation": "a", "score":1}\n```', True), ('{"score": "1"}', True), ("{", None),
    (12, None), ('{"explanation": "{nested}", "score": 1}', True)])
def test_json_score_parser(reply, expected):
  assert jp.parse_json_score(reply) is expected


_REPLY_TEXT = st.one_of(st.text(max_size=200), st.sampled_from(['{"score": 1}', "yes", "No.", "{", "}{", '"score":']))


@settings(max_examples=200, deadline=None)
@given(reply=_REPLY_TEXT)
def test_parsers_never_raise_on_arbitrary_replies(reply):
  for parse in (jp.parse_yes_no, jp.parse_yes_no_arena, jp.parse_yes_no_grace, jp.parse_json_score):
    assert parse(reply) in (True, False, None)


@settings(max_examples=50, deadline=None)
@given(replies=st.lists(_REPLY_TEXT, min_size=3, max_size=3), preds=st.lists(st.text(max_size=30), min_size=3,
                                                                               max_size=3))
def test_correctness_judge_never_raises_on_model_text(replies, preds):
  for style in ("truthrl", "arena", "grace"):
    it = iter(replies * 3)
    judge = judges.LLMCorrectnessJudge(lambda prompts: [next(it) for _ in prompts], style=style, cache=False)
    out = judge(["q"] * 3, preds, [["gold"], ["a", "b"], ["c"]])
    assert out.dtype == bool and out.shape == (3,)


def test_correctness_judge_em_short_circuit_and_empty():
  backend = FakeBackend(lambda p: "yes")
  judge = judges.LLMCorrectnessJudge(backend, style="arena")
  out = judge(["q1", "q2", "q3", "q4"], ["The Beatles", "Fab Four", "  ", "Lennon"],
              [["beatles"], ["The Beatles"], ["x"], []])
  np.testing.assert_array_equal(out, [True, True, False, False])
  assert len(backend.prompts) == 1 and "Fab Four" in backend.prompts[0]  # only the non-EM, non-empty row
  assert backend.prompts[0].startswith(jp.ARENA_SYSTEM + "\n\n")
  assert judge.stats["em_short_circuit"] == 1 and judge.stats["empty"] == 2 and judge.stats["judge_calls"] == 1


def test_truthrl_judge_asks_alias_by_alias_and_stops_at_first_yes():
  # TruthRL note §3.4 table: gold ["a", "b"], judge says 0 for "a" and 1 for "b" → correct after 2 calls.
  def rule(prompt):
    return '{"explanation": "", "score": 1}' if "Ground truth: b\n" in prompt else '{"score": 0}'
  backend = FakeBackend(rule)
  judge = judges.LLMCorrectnessJudge(backend, style="truthrl")
  out = judge(["q", "q2"], ["pred", "other"], [["a", "b", "c"], ["z"]])
  np.testing.assert_array_equal(out, [True, False])
  asked = [p.split("Ground truth: ")[1].split("\n")[0] for p in backend.prompts]
  assert asked == ["a", "z", "b"]  # round 1 asks a and z; round 2 only the undecided row's b; never c
  assert judge.stats["judge_calls"] == 3


def test_truthrl_reasoning_judge_sees_full_response_without_em_shortcut():
  backend = FakeBackend(lambda p: '{"score": 1}' if "Reasoning: <think>Document" in p else '{"score": 0}')
  judge = judges.LLMCorrectnessJudge(backend, style="truthrl_reasoning")
  responses = ["<think>Document [1] says Paris.</think> \\boxed{Paris}", "Paris"]
  out = judge(["q", "q"], responses, [["Paris"], ["Paris", "paris, france"]])
  np.testing.assert_array_equal(out, [True, False])  # "Paris" equals the gold, but EM does not apply
  assert len(backend.prompts) == 3 and "Reasoning: <think>Document [1]" in backend.prompts[0]
  assert backend.prompts[0].startswith(jp.TRUTHRL_REASONING_INSTRUCTIONS + "\nYou should make")


def test_unparseable_replies_count_and_never_raise():
  replies = iter(['{"score": 2}', "I cannot", None, 7])
  judge = judges.LLMCorrectnessJudge(FakeBackend(lambda p: next(replies)), style="truthrl", cache=False)
  out = judge(["q"] * 4, ["w", "x", "y", "z"], [["g"]] * 4)
  assert not out.any() and judge.stats["unparseable"] == 4 and judge.last_unparseable.all()
  with pytest.raises(TypeError, match="sequence of gold strings"):
    judge(["q"], ["p"], ["gold as a bare string"])
  with pytest.raises(ValueError, match="one reply per prompt"):
    judges.LLMCorrectnessJudge(lambda prompts: [], style="grace")(["q"], ["p"], [["g"]])


def test_grace_style_counts_only_an_exact_yes():
  # GRACE's code (note 000 §6.3 LJ, §9 item 27): correct iff reply.lower() == "yes"; "Yes." is wrong.
  for reply, want in (("Yes.", False), ("YES", True), ("yes", True), (" yes", False)):
    judge = judges.LLMCorrectnessJudge(FakeBackend(lambda p, r=reply: r), style="grace")
    assert judge(["q"], ["p"], [["g"]]).tolist() == [want], reply
  lenient = judges.LLMCorrectnessJudge(FakeBackend(lambda p: "Yes."), style="grace", parser="robust")
  assert lenient(["q"], ["p"], [["g"]]).tolist() == [True]


def test_llm_nli_judge_with_callable_backend():
  backend = FakeBackend(lambda p: "Yes" if "cat" in p.split("Hypothesis:")[1] else "No, it does not.")
  judge = judges.LLMNLIJudge(backend)
  out = judge.entails(["the cat sat", "the cat sat", "the cat sat"], ["a cat", "a dog", "a cat"])
  np.testing.assert_array_equal(out, [True, False, True])
  assert len(backend.prompts) == 2  # the repeated pair is asked once
  np.testing.assert_array_equal(judge.entails(["the cat sat"], ["a dog"]), [False])
  assert len(backend.prompts) == 2 and judge.stats["cache_hits"] == 1
  assert isinstance(judge, judges.NLIJudge)
  assert isinstance(judges.LLMCorrectnessJudge(backend), judges.CorrectnessJudge)
  assert isinstance(judges.ExactMatchJudge(), judges.CorrectnessJudge)
  assert judges.ExactMatchJudge()(["q", "q"], ["the Beatles", "Wings"], [["Beatles"], ["Beatles"]]).tolist() == [True, False]


def test_caches_are_bounded(monkeypatch):
  monkeypatch.setattr(judges_base, "CACHE_SIZE", 2)
  backend = FakeBackend(lambda p: "yes")
  judge = judges.LLMNLIJudge(backend)
  judge.entails(["p1", "p2", "p3"], ["h", "h", "h"])
  judge.entails(["p3", "p1"], ["h", "h"])  # p3 still cached; p1 was evicted (oldest) → asked again
  assert len(backend.prompts) == 4 and judge.stats["cache_hits"] == 1


def test_build_judges_from_config(tiny_true_dir, smollm2_dir):
  assert judges.build(None) is None
  assert isinstance(judges.build({"kind": "exact_match"}), judges.ExactMatchJudge)
  nli = judges.build({"kind": "nli", "path": str(tiny_true_dir), "batch_size": 3, "max_new_tokens": 1},
                     role="nli")
  assert isinstance(nli, judges.Seq2SeqNLIJudge) and nli.batch_size == 3 and nli.max_new_tokens == 1
  judge = judges.build({"kind": "llm", "path": str(smollm2_dir), "style": "grace",
                        "max_new_tokens": 10})
  assert judge.style == "grace" and judge.backend.max_new_tokens == 10
  assert judge.backend.render([{"role": "user", "content": "hi"}]).startswith("<|im_start|>")
  assert isinstance(judges.build({"kind": "llm", "path": str(smollm2_dir)}, role="nli"),
                    judges.LLMNLIJudge)
  with pytest.raises(ValueError, match="needs path"):
    judges.build({"kind": "llm"})
  with pytest.raises(ValueError, match="kind='nli'.*entailment classifier"):
    judges.build({"kind": "nli", "path": str(tiny_true_dir)}, role="correctness")
  with pytest.raises(ValueError, match="judge kind='nope'"):
    judges.build({"kind": "nope"})


def test_lazy_judge_loads_on_first_use_and_pickles_light(tiny_true_dir, tiny_checkpoint):
  import pickle
  lazy = judges.lazy({"kind": "nli", "path": str(tiny_true_dir), "batch_size": 2}, role="nli")
  assert lazy._judge is None
  ref = judges.Seq2SeqNLIJudge(tiny_true_dir).entails(PREMISES[:4], HYPOTHESES[:4])
  np.testing.assert_array_equal(lazy.entails(PREMISES[:4], HYPOTHESES[:4]), ref)
  assert isinstance(lazy._judge, judges.Seq2SeqNLIJudge) and lazy._judge.batch_size == 2
  clone = pickle.loads(pickle.dumps(lazy))
  assert clone._judge is None and clone.spec["path"] == str(tiny_true_dir)
  np.testing.assert_array_equal(clone.entails(PREMISES[:4], HYPOTHESES[:4]), ref)
  # A causal LM folder named as an NLI judge is asked yes/no on our sampler (loaded on first use).
  assert judges_build._is_causal_lm(str(tiny_checkpoint("llama")))
  assert not judges_build._is_causal_lm(str(tiny_true_dir))
  from grounding_jax.recipes import get_reward  # configs name the NLI model by folder
  assert isinstance(get_reward("trust_stage1", nli=str(tiny_true_dir)).nli, judges.LazyJudge)
  with pytest.raises(FileNotFoundError, match="config.json"):
    judges.lazy("/nonexistent", role="nli").entails(["a"], ["b"])
  with pytest.raises(ValueError, match="needs path"):
    judges.lazy("", role="nli")


# --- LLM judges on our own sampler (a tiny random llama driven by SmolLM2's tokenizer) ---------------

@pytest.fixture(scope="module")
def sampler_backend(tiny_checkpoint, smollm2_dir):
  from grounding_jax.models import load_pretrained, load_tokenizer
  model = load_pretrained(tiny_checkpoint("llama", vocab_size=49152, initializer_range=0.3,
                                          bos_token_id=1, eos_token_id=2, pad_token_id=2))
  return judges.SamplerBackend(model, load_tokenizer(smollm2_dir), max_new_tokens=4, batch_size=4)


def test_llm_judge_through_the_sampler(sampler_backend):
  # One jit compile: the judge's call and the reference call have the same shapes.
  from grounding_jax import sampling
  backend = sampler_backend
  # Chat template applied: SmolLM2's template wraps turns in <|im_start|> … <|im_end|>.
  rendered = backend.render(jp.arena_messages("q", ["Paris"], "Lyon"))
  assert rendered.startswith("<|im_start|>system\n" + jp.ARENA_SYSTEM) and rendered.endswith("<|im_start|>assistant\n")
  questions = ["Capital of France?", "Capital of Italy?", "Who wrote Hamlet?"]
  preds = ["Lyon", "Rome", "Marlowe"]
  golds = [["Paris"], ["rome"], ["Shakespeare"]]
  judge = judges.LLMCorrectnessJudge(backend, style="arena", parser="arena", cache=False)
  verdicts = judge(questions, preds, golds)
  # Reference: the same greedy generations, all prompts in one call, parsed with ARENA's rule.
  asked = [0, 2]  # row 1 is an exact match and never reaches the LLM
  prompts = [backend.render(jp.arena_messages(questions[i], golds[i], preds[i])) for i in asked]
  texts = sampling.generate(backend.model, backend.tokenizer, prompts, max_new_tokens=4).texts
  expected = [True, True, True]
  for i, t in zip(asked, texts):
    expected[i] = bool(jp.parse_yes_no_arena(t))
  np.testing.assert_array_equal(verdicts, expected)
  assert judge.stats["judge_calls"] == 2 and judge.stats["em_short_circuit"] == 1
  assert judge.stats["unparseable"] == sum(jp.parse_yes_no_arena(t) is None for t in texts)


def test_llm_judge_from_config_runs_sharded_on_a_mesh(tiny_smollm2_dir):
  # kind "llm" with mesh axes: the judge model is sharded over this process's 8 (fake) devices and
  # sampled on that mesh; its replies equal the single-device judge's greedy replies.
  import jax
  spec = {"kind": "llm", "path": str(tiny_smollm2_dir), "style": "arena", "parser": "arena",
          "max_new_tokens": 4, "batch_size": 8, "cache": False}
  sharded = judges.build({**spec, "mesh": {"fsdp": -1}})
  plain = judges.build(spec)
  mesh = sharded.backend.mesh
  assert mesh is not None and mesh.devices.size == jax.local_device_count() == 8
  embed = sharded.backend.model.embed[...]
  assert len(embed.sharding.device_set) == 8 and not embed.sharding.is_fully_replicated
  conversations = [jp.arena_messages("q", [g], p) for g, p in (("Paris", "Lyon"), ("Rome", "Milan"),
                                                               ("Oslo", "Bergen"))]
  prompts = [plain.backend.render(m) for m in conversations]
  assert sharded.backend(prompts) == plain.backend(prompts)
  with pytest.raises(ValueError, match="mesh axis sizes"):
    judges_build.judge_mesh(4)
