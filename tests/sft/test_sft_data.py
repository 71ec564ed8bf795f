"""SFT rows: both row shapes render as documented; a malformed row names file:line and the field."""

import json

import pytest

from grounding_jax import models
from grounding_jax.sft import data as sft_data


def _write(tmp_path, lines):
  path = tmp_path / "rows.jsonl"
  path.write_text("\n".join(l if isinstance(l, str) else json.dumps(l) for l in lines) + "\n")
  return path


GOOD = {"prompt": "w17 w18", "target": "w5 w6"}


@pytest.mark.parametrize("bad_row, field", [
    ({"prompt": "w17"}, "field 'target' must be a non-empty string (got missing)"),
    ({"prompt": "w17", "target": ""}, "field 'target' must be a non-empty string"),
    ({"prompt": 3, "target": "w5"}, "field 'prompt' must be a string (got int 3)"),
    ({"target": "w5"}, "exactly one of the fields 'prompt' and 'messages' (neither given)"),
    ({"prompt": "w1", "messages": [], "target": "w5"}, "(both given)"),
    ({"messages": [], "target": "w5"}, "field 'messages' must be a non-empty list"),
    ({"messages": [{"role": "user"}], "target": "w5"}, "field 'messages[0].content' must be a string"),
    ({"messages": [{"role": "user", "content": "a"}, "hi"], "target": "w5"},
     "field 'messages[1]' must be an object"),
    ("[1, 2]", "a row must be a JSON object, got list"),
    ('{"prompt": "w1", "target": ', "not valid JSON"),
])
def test_malformed_row_names_file_line_and_field(tmp_path, bad_row, field):
  path = _write(tmp_path, [GOOD, "", GOOD, bad_row, GOOD])
  with pytest.raises(ValueError) as e:
    sft_data.read_jsonl(path)
  message = str(e.value)
  assert message.startswith(f"{path}:4: ") and field in message, message
  assert "\n" not in message


def test_empty_path_file_and_unknown_kind(tmp_path):
  with pytest.raises(ValueError, match="config.data.path is empty"):
    sft_data.read_jsonl("")
  with pytest.raises(ValueError, match="no rows"):
    sft_data.read_jsonl(_write(tmp_path, [""]))
  with pytest.raises(FileNotFoundError, match="no such SFT data file"):
    sft_data.read_jsonl(tmp_path / "absent.jsonl")
  with pytest.raises(ValueError, match=r"data.kind='parquet'; expected one of \('jsonl', 'recipe'\)"):
    sft_data.load_rows(type("D", (), {"kind": "parquet"})())


def test_messages_use_the_chat_template_and_prompts_stay_as_text(tiny_chat_model, tmp_path):
  path = _write(tmp_path, [
      {"prompt": "w17 w18", "target": "w5", "id": "extra fields are ignored"},
      {"messages": [{"role": "system", "content": "w20"}, {"role": "user", "content": "w17"}],
       "target": "w6 w7"}])
  rows = sft_data.read_jsonl(path)
  tok = models.load_tokenizer(tiny_chat_model)
  # The chat template writes each turn as "w90 <content> w91" and the generation prompt as "w92".
  assert sft_data.render(rows, tok) == [("w17 w18", "w5"), ("w90 w20 w91 w90 w17 w91 w92", "w6 w7")]
  assert sft_data.render(rows[:1], tok, prompt_as_user_turn=True) == [("w90 w17 w18 w91 w92", "w5")]
  tok.chat_template = None
  with pytest.raises(ValueError, match=rf"{path}:2: field 'messages' needs a chat template"):
    sft_data.render(rows, tok)


def _recipe_config(**data):
  from grounding_jax.sft import trainer as sft_trainer  # pylint: disable=g-import-not-at-top
  c = sft_trainer.default_config()
  c.data.update({**dict(kind="recipe", recipe="truthrl", source="synthetic", num_examples=6, seed=1,
                        answerable_ratio=0.5), **data})
  return c.data


def test_recipe_rows_are_the_recipes_prompt_and_gold_completion(smollm2_dir, tmp_path):
  from grounding_jax.data import jsonl, synthetic  # pylint: disable=g-import-not-at-top
  from grounding_jax.recipes import get_recipe  # pylint: disable=g-import-not-at-top
  tok = models.load_tokenizer(smollm2_dir)
  examples = synthetic.generate_examples(6, seed=1, answerable_ratio=0.5)
  for recipe, extra in (("truthrl", {}), ("grace", {}), ("lear", {})):
    rows = sft_data.load_rows(_recipe_config(recipe=recipe, **extra))
    pairs = sft_data.render(rows, tok)
    for (prompt, target), ex in zip(pairs, examples, strict=True):
      assert prompt == get_recipe(recipe).render_prompt(ex, tok)  # the RL trainer's prompt, exactly
      assert target == get_recipe(recipe).gold_completion(ex)
  # A JSONL of Examples, ARENA's SFT-direct template and target.
  answerable = [e for e in synthetic.generate_examples(8, seed=2, answerable_ratio=1.0)]
  path = tmp_path / "examples.jsonl"
  jsonl.write_examples(path, answerable)
  rows = sft_data.load_rows(_recipe_config(recipe="arena", source="jsonl", path=str(path),
                                           num_examples=0, template="direct", target="direct"))
  assert [r.target for r in rows] == [e.answers[0] for e in answerable]
  assert rows[0].messages[0]["content"].startswith(answerable[0].question + "\n\n1. ")


def test_recipe_rows_errors_name_the_example_and_the_fix():
  with pytest.raises(ValueError, match=r"synthetic\(seed=1\) example \d+ \(id='synthetic-1-\d+'\): .*"
                                       r"gold_passage_ids.*answerable_ratio=1.0"):
    sft_data.load_rows(_recipe_config(recipe="arena"))
  with pytest.raises(ValueError, match="needs config.data.recipe, one of .*'truthrl'"):
    sft_data.load_rows(_recipe_config(recipe=""))
  with pytest.raises(ValueError, match="unknown recipe 'graze'"):
    sft_data.load_rows(_recipe_config(recipe="graze"))
  with pytest.raises(ValueError, match=r"no gold completion style 'direct'"):
    sft_data.load_rows(_recipe_config(target="direct"))
  with pytest.raises(ValueError, match=r"no gold completion style 'direct'"):  # in a mix too
    sft_data.load_rows(_recipe_config(target="default:0.5,direct:0.5"))
  with pytest.raises(ValueError, match="source='jsonl' needs config.data.path"):
    sft_data.load_rows(_recipe_config(source="jsonl"))
  with pytest.raises(ValueError, match="data.source='web'"):
    sft_data.load_rows(_recipe_config(source="web"))


def test_answerable_only_keeps_the_rows_whose_context_holds_the_answer():
  from grounding_jax.data import synthetic  # pylint: disable=g-import-not-at-top
  examples = synthetic.generate_examples(6, seed=1, answerable_ratio=0.5)
  every = sft_data.load_rows(_recipe_config())
  kept = sft_data.load_rows(_recipe_config(answerable_only=True))
  assert len(every) == 6 and len(kept) == 3
  answerable = [row for row, ex in zip(every, examples, strict=True) if ex.answerable]
  assert [(r.messages, r.target) for r in kept] == [(r.messages, r.target) for r in answerable]
  assert not any("I don't know" in row.target for row in kept)


def test_num_passages_sets_each_synthetic_context_and_is_checked_before_any_model():
  from grounding_jax.data import synthetic  # pylint: disable=g-import-not-at-top
  rows = sft_data.load_rows(_recipe_config(num_passages=3))
  examples = synthetic.generate_examples(6, seed=1, answerable_ratio=0.5, num_passages=3)
  assert all(len(ex.passages) == 3 for ex in examples)
  for row, ex in zip(rows, examples, strict=True):
    prompt = row.messages[-1]["content"]
    assert prompt.count("<DOC>") == 3 and all(p.text in prompt for p in ex.passages)
  assert sft_data.load_rows(_recipe_config()) != rows  # the default stays five
  with pytest.raises(ValueError, match="num_passages=1: need at least 2"):
    sft_data.load_rows(_recipe_config(num_passages=1))


def test_a_target_mix_gives_each_style_its_share_of_rows():
  styles = sft_data.target_styles("default:0.25,direct:0.75", 64, seed=3)
  assert styles.count("default") == 16 and styles.count("direct") == 48
  assert styles == sft_data.target_styles("default:0.25,direct:0.75", 64, seed=3)  # seeded
  assert styles != sft_data.target_styles("default:0.25,direct:0.75", 64, seed=4)
  assert sft_data.target_styles("direct", 3, seed=0) == ["direct"] * 3
  assert sft_data.target_styles("a:0.5,b:0.5", 5, seed=0).count("b") == 3  # the last takes the rest
  for bad in ("default:0.5,direct:0.6", "default:x", "default:1.5,direct:-0.5", ":1"):
    with pytest.raises(ValueError, match="data.target="):
      sft_data.target_styles(bad, 4, seed=0)


def test_search_rows_of_a_mix_search_or_answer_directly():
  """The search recipe's "direct" rows answer without a search (no inserted spans); the default
  rows search; the mix keeps each row's prompt."""
  mixed = sft_data.load_rows(_recipe_config(recipe="search", num_examples=8,
                                            target="default:0.25,direct:0.75"))
  searching = sft_data.load_rows(_recipe_config(recipe="search", num_examples=8))
  styles = sft_data.target_styles("default:0.25,direct:0.75", 8, seed=1)
  for row, gold_row, style in zip(mixed, searching, styles, strict=True):
    assert row.messages == gold_row.messages
    if style == "default":
      assert row == gold_row and "<search>" in row.target and row.inserted_spans
    else:
      assert "<search>" not in row.target and not row.inserted_spans
      assert row.target.endswith(gold_row.target[gold_row.target.rindex("<answer>"):])
