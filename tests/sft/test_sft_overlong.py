"""SFT targets longer than data.max_completion_tokens: never cut silently (data.overlong = "cut" with
a warning, "drop" with a count, "error"), checked before any model loads."""

import logging
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "rl"))
import toy_task  # noqa: E402

from grounding_jax import config_fields  # noqa: E402
from grounding_jax.sft import data as sft_data  # noqa: E402
from grounding_jax.sft import trainer as sft  # noqa: E402

EOS = 2  # toy_task's "</s>"
# Targets of 3, 5, 7 and 9 words: 4, 6, 8 and 10 tokens with the EOS; at a limit of 6 the last two
# are overlong (2 of 4, 50.0 %).
PAIRS = [(f"w{10 + i} w11", " ".join(f"w{20 + k}" for k in range(n))) for i, n in enumerate((3, 5, 7, 9))]


def _tokenize(overlong, limit=6, pairs=PAIRS):
  return sft_data.tokenize_pairs(toy_task.make_tokenizer(), pairs, max_prompt_tokens=8,
                            max_completion_tokens=limit, overlong=overlong)


def test_cut_keeps_every_row_and_warns_with_count_share_and_limit(caplog):
  with caplog.at_level(logging.WARNING):
    data = _tokenize("cut")
  assert data["completion_ids"].shape == (4, 6)
  ends_with_eos = [EOS in row for row in data["completion_ids"]]
  assert ends_with_eos == [True, True, False, False]  # the cut rows lost their EOS
  assert data["loss_mask"][2:].all()
  (record,) = [r for r in caplog.records if "SFT targets" in r.getMessage()]
  message = record.getMessage()
  assert record.levelno == logging.WARNING
  assert "2 of 4 SFT targets (50.0%)" in message and "max_completion_tokens=6" in message
  assert "the longest has 10" in message and "data.overlong='drop'" in message


def test_drop_leaves_the_overlong_rows_out_with_their_prompts(caplog):
  tok = toy_task.make_tokenizer()
  with caplog.at_level(logging.WARNING):
    data = _tokenize("drop")
  assert data["completion_ids"].shape == (2, 6)
  assert [EOS in row for row in data["completion_ids"]] == [True, True]
  prompts = [tok.decode(ids[mask]) for ids, mask in zip(data["prompt_ids"], data["prompt_mask"])]
  assert prompts == [PAIRS[0][0], PAIRS[1][0]]
  targets = [tok.decode(ids[mask][:-1]) for ids, mask in zip(data["completion_ids"], data["loss_mask"])]
  assert targets == [PAIRS[0][1], PAIRS[1][1]]
  assert any("2 of 4 SFT targets (50.0%)" in r.getMessage() and "left out" in r.getMessage()
             for r in caplog.records)


def test_drop_with_nothing_left_and_error_raise():
  with pytest.raises(ValueError, match=r"4 of 4 SFT targets .*leaves no row"):
    _tokenize("drop", limit=3)
  with pytest.raises(ValueError, match=r"2 of 4 SFT targets \(50.0%\) are longer than "
                                       r"data.max_completion_tokens=6"):
    _tokenize("error")
  with pytest.raises(ValueError, match="overlong='trim'"):
    _tokenize("trim")


def test_targets_that_fit_pass_unchanged_and_quietly(caplog):
  with caplog.at_level(logging.WARNING):
    modes = [_tokenize(mode, limit=10) for mode in ("cut", "drop", "error")]
  assert not [r for r in caplog.records if "SFT targets" in r.getMessage()]
  for data in modes[1:]:
    for key, value in modes[0].items():
      np.testing.assert_array_equal(data[key], value)
  assert modes[0]["completion_ids"].shape == (4, 10)


def _config(tmp_path, **data):
  c = sft.default_config()
  c.workdir = str(tmp_path)
  c.model.path = str(tmp_path / "no_model_here")  # every check below fires before a model loads
  c.batch_size = c.micro_batch_size = 2
  c.data.max_completion_tokens = 6
  c.data.update(data)
  return c


def _rows():
  return [sft_data.SFTRow(prompt=p, target=t) for p, t in PAIRS]


def test_trainer_checks_data_overlong_before_the_model_loads(tmp_path):
  assert sft.default_config().data.overlong == "cut"  # existing runs unchanged
  with pytest.raises(config_fields.ConfigError,
                     match=r"config.data.overlong='trim': must be one of \('cut', 'drop', 'error'\)"):
    sft.SFTTrainer(_config(tmp_path, overlong="trim"), rows=_rows(), tokenizer=toy_task.make_tokenizer())
  with pytest.raises(ValueError, match="2 of 4 SFT targets"):
    sft.SFTTrainer(_config(tmp_path, overlong="error"), rows=_rows(), tokenizer=toy_task.make_tokenizer())
  c = _config(tmp_path, overlong="drop")
  c.batch_size = c.micro_batch_size = 4
  with pytest.raises(ValueError, match=r"2 SFT rows fit data.max_completion_tokens=6 "
                                       r"\(data.overlong='drop'\), fewer than batch_size=4"):
    sft.SFTTrainer(c, rows=_rows(), tokenizer=toy_task.make_tokenizer())


def test_a_config_without_the_field_passes_the_check(tmp_path):
  """Configs written before data.overlong (a run's config.json) are not refused; they cut."""
  c = _config(tmp_path)
  del c.data["overlong"]
  sft.check_config(c)


# Prompts of 2, 4, 6 and 8 words sharing their first word; at max_prompt_tokens=5 the last two are
# overlong (2 of 4).
PROMPT_PAIRS = [(" ".join(["w10"] + [f"w{30 + k}" for k in range(n - 1)]), "w20 w21")
                for n in (2, 4, 6, 8)]


def _tokenize_prompts(overlong):
  return sft_data.tokenize_pairs(toy_task.make_tokenizer(), PROMPT_PAIRS, max_prompt_tokens=5,
                                 max_completion_tokens=6, overlong=overlong)


def test_overlong_prompts_cut_on_the_left_with_a_warning(caplog):
  with caplog.at_level(logging.WARNING):
    data = _tokenize_prompts("cut")
  assert data["prompt_ids"].shape == (4, 5)
  assert data["prompt_mask"].sum(axis=1).tolist() == [2, 4, 5, 5]
  # The cut rows lost their first word, so the rows share no prefix any more.
  assert sft.shared_prefix_length(data) == 0
  (record,) = [r for r in caplog.records if "SFT prompts" in r.getMessage()]
  message = record.getMessage()
  assert "2 of 4 SFT prompts (50.0%) are longer than data.max_prompt_tokens=5" in message
  assert "the longest has 8" in message and "on the left" in message
  assert "data.overlong='drop'" in message


def test_overlong_prompts_dropped_keep_the_shared_prefix_or_raise(caplog):
  tok = toy_task.make_tokenizer()
  with caplog.at_level(logging.WARNING):
    data = _tokenize_prompts("drop")
  prompts = [tok.decode(ids[mask]) for ids, mask in zip(data["prompt_ids"], data["prompt_mask"])]
  assert prompts == [PROMPT_PAIRS[0][0], PROMPT_PAIRS[1][0]]
  assert data["prompt_ids"].shape == (2, 4)  # as wide as the longest prompt kept
  assert sft.shared_prefix_length(data) == 2  # "w10 w30"
  assert any("2 of 4 SFT prompts (50.0%)" in r.getMessage() and "left out" in r.getMessage()
             for r in caplog.records)
  with pytest.raises(ValueError, match=r"2 of 4 SFT prompts \(50.0%\) are longer than "
                                       r"data.max_prompt_tokens=5"):
    _tokenize_prompts("error")
