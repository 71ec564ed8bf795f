"""NLI judges (judges/nli.py) through their real loading code on tiny local models, and judges built
from config specs (judges/from_config.py), eagerly or loaded on first use.

Tiny random transformers models are saved to temp folders and loaded through the judges; their
verdicts are compared with an independent per-example reference (the ALCE / Trust-Eval procedure run
one pair at a time).
"""

import json
import pickle

import numpy as np
import pytest

from grounding_jax import judges
from grounding_jax.judges import from_config as judges_build
from grounding_jax.judges import nli as nli_models
from grounding_jax.recipes.grace import judge as grace_judge

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


# --- Judges from config specs -------------------------------------------------------------------------

def test_build_judges_from_config(tiny_true_dir, smollm2_dir):
  assert judges.build(None) is None
  assert isinstance(judges.build({"kind": "exact_match"}), judges.ExactMatchJudge)
  nli = judges.build({"kind": "nli", "path": str(tiny_true_dir), "batch_size": 3, "max_new_tokens": 1},
                     role="nli")
  assert isinstance(nli, judges.Seq2SeqNLIJudge) and nli.batch_size == 3 and nli.max_new_tokens == 1
  judge = judges.build({"kind": "llm", "path": str(smollm2_dir), "style": grace_judge.STYLE,
                        "max_new_tokens": 10})
  assert judge.style.name == "grace" and judge.backend.max_new_tokens == 10
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
