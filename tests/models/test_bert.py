"""BERT encoder parity: a tiny random BERT against transformers, and MiniLM against sentence-transformers."""

import numpy as np
import pytest

from grounding_jax.models import bert


def test_tiny_random_bert_matches_transformers(tmp_path):
  import jax.numpy as jnp
  import torch
  import transformers

  config = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                   num_attention_heads=4, intermediate_size=48,
                                   max_position_embeddings=40)
  torch.manual_seed(0)
  ref = transformers.BertModel(config, add_pooling_layer=False).eval()
  with torch.no_grad():  # LayerNorm params start at 1 / 0; perturb so the test sees them.
    for name, p in ref.named_parameters():
      if "LayerNorm" in name:
        p.add_(0.1 * torch.randn_like(p))
  ref.save_pretrained(tmp_path, safe_serialization=True)

  rng = np.random.default_rng(0)
  ids = rng.integers(1, 64, size=(3, 11)).astype(np.int32)
  mask = np.ones((3, 11), bool)
  mask[1, 7:] = False  # right padding, as the tokenizer pads
  mask[2, 3:] = False
  with torch.no_grad():
    want = ref(input_ids=torch.tensor(ids, dtype=torch.long),
               attention_mask=torch.tensor(mask, dtype=torch.long)).last_hidden_state.numpy()
  model = bert.load_bert(tmp_path)
  got = np.asarray(model(jnp.asarray(ids), jnp.asarray(mask)))
  np.testing.assert_allclose(got[mask], want[mask], atol=2e-5, rtol=1e-4)


def test_missing_checkpoint_names_the_file(tmp_path):
  with pytest.raises(FileNotFoundError, match="config.json"):
    bert.load_bert(tmp_path)


def test_minilm_embeddings_match_sentence_transformers():
  import sentence_transformers  # the test extra installs it
  texts = ["The capital of Veltria is Orsk.", "Which city is Veltria's capital?", "hi",
           "A longer sentence about rivers, bridges and the many ferries that cross them " * 6]
  ours = bert.default_encoder().encode(texts)
  ref = sentence_transformers.SentenceTransformer(str(bert.minilm_path()), device="cpu")
  theirs = ref.encode(texts, normalize_embeddings=True)
  np.testing.assert_allclose(np.linalg.norm(ours, axis=-1), 1.0, atol=1e-5)
  cosine = (ours * theirs).sum(-1) / np.linalg.norm(theirs, axis=-1)
  assert cosine.min() >= 0.9999, cosine


def _perturbed(model):
  """LayerNorm params start at 1 / 0 and biases at 0; perturb everything so parity sees each tensor."""
  import torch
  with torch.no_grad():
    for p in model.parameters():
      p.add_(0.05 * torch.randn_like(p))
  return model.eval()


def _xlmr_config(**kw):
  import transformers
  # XLM-RoBERTa as in bge-reranker-v2-m3: pad id 1 (positions start at 2), one token type, eps 1e-5.
  return transformers.XLMRobertaConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                       num_attention_heads=4, intermediate_size=48,
                                       max_position_embeddings=40, type_vocab_size=1,
                                       pad_token_id=1, layer_norm_eps=1e-5, **kw)


def _ids_and_mask(pad_id):
  rng = np.random.default_rng(0)
  ids = rng.integers(3, 64, size=(3, 11)).astype(np.int32)
  mask = np.ones((3, 11), bool)
  mask[1, 7:] = False
  mask[2, 3:] = False
  return np.where(mask, ids, pad_id), mask


def test_tiny_random_xlm_roberta_matches_transformers(tmp_path):
  import jax.numpy as jnp
  import torch
  import transformers

  torch.manual_seed(0)
  ref = _perturbed(transformers.XLMRobertaModel(_xlmr_config(), add_pooling_layer=False))
  ref.save_pretrained(tmp_path, safe_serialization=True)
  ids, mask = _ids_and_mask(pad_id=1)
  with torch.no_grad():  # transformers derives positions 2, 3, … from input_ids != pad
    want = ref(input_ids=torch.tensor(ids, dtype=torch.long),
               attention_mask=torch.tensor(mask, dtype=torch.long)).last_hidden_state.numpy()
  model = bert.load_bert(tmp_path)
  assert model.config.offset_positions and model.config.pad_token_id == 1
  # Our positions come from the mask, so the id a batch is padded with does not matter.
  got = np.asarray(model(jnp.asarray(np.where(mask, ids, 0)), jnp.asarray(mask)))
  np.testing.assert_allclose(got[mask], want[mask], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("family", ["bert", "xlm-roberta"])
def test_sequence_classifier_matches_transformers(tmp_path, family):
  import jax.numpy as jnp
  import torch
  import transformers

  torch.manual_seed(1)
  if family == "bert":  # pooler (dense + tanh) then classifier, segment ids 0 / 1
    config = transformers.BertConfig(vocab_size=64, hidden_size=32, num_hidden_layers=2,
                                     num_attention_heads=4, intermediate_size=48,
                                     max_position_embeddings=40, num_labels=1)
    ref = _perturbed(transformers.BertForSequenceClassification(config))
  else:  # classifier.dense + tanh + classifier.out_proj on <s>
    ref = _perturbed(transformers.XLMRobertaForSequenceClassification(_xlmr_config(num_labels=1)))
  ref.save_pretrained(tmp_path, safe_serialization=True)
  ids, mask = _ids_and_mask(pad_id=0 if family == "bert" else 1)
  types = (np.arange(11)[None, :] >= 5).astype(np.int32) * mask if family == "bert" else None
  kw = {} if types is None else {"token_type_ids": torch.tensor(types, dtype=torch.long)}
  with torch.no_grad():
    want = ref(input_ids=torch.tensor(ids, dtype=torch.long),
               attention_mask=torch.tensor(mask, dtype=torch.long), **kw).logits.numpy()
  model = bert.load_bert_classifier(tmp_path)
  got = np.asarray(model(jnp.asarray(ids), jnp.asarray(mask),
                         None if types is None else jnp.asarray(types)))
  assert got.shape == (3, 1)
  np.testing.assert_allclose(got, want, atol=1e-5, rtol=1e-5)
  # The plain encoder loads from the same task checkpoint (prefix dropped, head ignored).
  assert bert.load_bert(tmp_path).config.num_labels == 1
