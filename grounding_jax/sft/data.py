"""SFT rows: a context and the target the model learns to write after it.

Rows come from `config.data.kind`:
  "jsonl"   a JSONL file of rows (below), `data.path`
  "recipe"  Examples (the synthetic world, or a JSONL of Examples at `data.path`; `data.source`)
            and a recipe (`data.recipe`): the prompt is the recipe's prompt (`data.template`) as chat
            messages, the target its gold completion (`data.target`, Recipe.gold_completion) — a
            paper's SFT-baseline target in that recipe's format. A recipe whose rollout calls a
            tool (its `tool_format`: the search recipes) writes the tool's results into the target
            as the rollout inserts them; those spans are the row's `inserted_spans` and carry no
            loss, as in the rollout (Search-R1 masks retrieved tokens out of the loss,
            arXiv:2503.09516 §3.1).

A JSONL row is one of
  {"prompt": str, "target": str}
  {"messages": [{"role": str, "content": str}, ...], "target": str}
(other fields, e.g. "id", are kept out of the way). `messages` are rendered with the model's chat
template and its generation prompt, so the target is the assistant's reply. `prompt` is text the model
sees as is — already rendered, as the RL data layer renders its prompts — unless
`data.prompt_as_user_turn` wraps it as one user turn of the chat template. The loss falls on the target
tokens (and the EOS after them) only, less any `inserted_spans`; see sft/trainer.py.

Rows are read and checked before any model loads; an error names file:line and the field.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import pathlib
from typing import Any, Mapping, Optional, Sequence

import ml_collections
import numpy as np

from grounding_jax import recipes
from grounding_jax import sampling
from grounding_jax.data import jsonl as examples_jsonl
from grounding_jax.data import splits
from grounding_jax.data import synthetic
from grounding_jax.data.schema import Example
from grounding_jax.models import tokenizer as tokenizer_lib

KINDS = ("jsonl", "recipe")
SOURCES = ("synthetic", "jsonl")  # where data.kind="recipe" reads its Examples
_MISSING = object()  # a field absent from a row (None is a JSON value: null)
_ROW_SHAPE = ('each row is {"prompt": str, "target": str} or '
              '{"messages": [{"role": str, "content": str}, ...], "target": str}')
OVERLONG = ("cut", "drop", "error")  # config data.overlong (tokenize_pairs)


@dataclasses.dataclass(frozen=True)
class SFTRow:
  """One training pair: `prompt` text or chat `messages` (exactly one), and the `target` text;
  `inserted_spans`, [start, end) character spans of `target` that a tool wrote (read, not
  learned: no loss)."""
  target: str
  prompt: Optional[str] = None
  messages: Optional[tuple[Mapping[str, str], ...]] = None
  where: str = ""  # "file:line", for errors raised after reading
  inserted_spans: tuple[tuple[int, int], ...] = ()


def load_rows(data: ml_collections.ConfigDict) -> list[SFTRow]:
  """The rows of config.data by its `kind` ("jsonl": the file at data.path; "recipe": recipe_rows)."""
  if data.kind == "jsonl":
    return read_jsonl(data.path)
  if data.kind == "recipe":
    return recipe_rows(data)
  raise ValueError(f"config.data.kind={data.kind!r}; expected one of {KINDS}")


def load_examples(data: ml_collections.ConfigDict) -> tuple[list[Example], str]:
  """(Examples, where they came from) for data.kind="recipe": data.source "synthetic"
  (num_examples, seed, answerable_ratio, num_passages, optional unanswerable and num_countries) or
  "jsonl" (the Examples file at data.path)."""
  if data.source == "synthetic":
    examples = synthetic.generate_examples(int(data.num_examples), seed=int(data.seed),
                                           answerable_ratio=float(data.answerable_ratio),
                                           **splits.synthetic_options(data))
    return examples, f"synthetic(seed={data.seed})"
  if data.source == "jsonl":
    if not data.path:
      raise ValueError("config.data.source='jsonl' needs config.data.path: a JSONL file of Examples "
                       "(launch/build_data.py writes them)")
    if not pathlib.Path(data.path).is_file():
      raise FileNotFoundError(f"{data.path}: no such Examples file (config.data.path)")
    examples = list(examples_jsonl.read_examples(data.path))
    if data.num_examples:
      examples = examples[:int(data.num_examples)]
    return examples, str(data.path)
  raise ValueError(f"config.data.source={data.source!r}; expected one of {SOURCES}")


def target_styles(spec: str, n: int, seed: int) -> list[str]:
  """The gold-completion style of each of `n` rows for config data.target: one style ("default")
  for all, or a mix "style:share,style:share" (shares summing to 1) — each style on round(share x n)
  rows (the last takes the rest), the rows drawn by a permutation seeded with `seed`.

  Raises:
    ValueError: a malformed mix, a share outside [0, 1], or shares not summing to 1.
  """
  if ":" not in spec:
    return [spec] * n
  mix = []
  for part in spec.split(","):
    style, _, share = part.strip().partition(":")
    try:
      mix.append((style.strip(), float(share)))
    except ValueError:
      raise ValueError(f"data.target={spec!r}: {part!r} is not style:share") from None
  shares = [share for _, share in mix]
  if not all(style for style, _ in mix) or not all(0.0 <= x <= 1.0 for x in shares) or \
     abs(sum(shares) - 1.0) > 1e-6:
    raise ValueError(f"data.target={spec!r}: a mix is style:share pairs with shares in [0, 1] "
                     "summing to 1, e.g. 'default:0.25,direct:0.75'")
  order = np.random.default_rng(seed).permutation(n)
  styles, start = [""] * n, 0
  for k, (style, share) in enumerate(mix):
    stop = n if k == len(mix) - 1 else min(n, start + round(share * n))
    for i in order[start:stop]:
      styles[i] = style
    start = stop
  return styles


def recipe_rows(data: ml_collections.ConfigDict) -> list[SFTRow]:
  """One row per Example: `messages` = the recipe's prompt (template data.template), `target` = its
  gold completion (style data.target), with the results of the recipe's tool calls as
  `inserted_spans` (`ToolFormat.inserted_spans`; none for a recipe without a `tool_format`); a
  data.target mix ("default:0.25,direct:0.75", `target_styles`) gives rows of several styles. With
  data.answerable_only, Examples whose context lacks the answer (`answerable` False) give no row.

  Raises:
    ValueError: an unknown recipe, template or target style, no Examples, or an Example the target
      cannot be written for (named by source, position and id).
  """
  if not data.recipe:
    raise ValueError(f"config.data.kind='recipe' needs config.data.recipe, one of "
                     f"{recipes.available_recipes()}")
  recipe = recipes.get_recipe(data.recipe)
  examples, source = load_examples(data)
  if data.get("answerable_only", False):  # a bool field: ConfigDict refuses other types
    examples = [ex for ex in examples if ex.answerable is not False]
  if not examples:
    raise ValueError(f"{source}: no Examples to build SFT rows from")
  tool_format = getattr(recipe, "tool_format", None)
  styles = target_styles(data.target, len(examples), int(data.seed))
  rows = []
  for i, ex in enumerate(examples):
    where = f"{source} example {i + 1} (id={ex.id!r})"
    try:
      target = recipe.gold_completion(ex, style=styles[i])
      messages = recipe.messages(ex, template=data.template)
    except (ValueError, TypeError, NotImplementedError) as e:
      raise ValueError(f"{where}: {e}") from None
    spans = tuple(tool_format.inserted_spans(target)) if tool_format is not None else ()
    rows.append(SFTRow(target=target, messages=tuple(dict(m) for m in messages), where=where,
                       inserted_spans=spans))
  return rows


def read_jsonl(path: str | os.PathLike) -> list[SFTRow]:
  """Reads and checks every row of a JSONL file (blank lines skipped).

  Raises:
    ValueError: an empty path, an empty file, or a malformed row ("file:line: field '…' …").
    FileNotFoundError: no such file.
  """
  if not path:
    raise ValueError("config.data.path is empty: give a JSONL file; " + _ROW_SHAPE)
  path = pathlib.Path(path)
  if not path.is_file():
    raise FileNotFoundError(f"{path}: no such SFT data file (config.data.path)")
  rows = []
  with open(path, encoding="utf-8") as f:
    for line_no, line in enumerate(f, 1):
      if line.strip():
        rows.append(_parse_row(line, f"{path}:{line_no}"))
  if not rows:
    raise ValueError(f"{path}: no rows; " + _ROW_SHAPE)
  return rows


def _parse_row(line: str, where: str) -> SFTRow:
  try:
    row = json.loads(line)
  except json.JSONDecodeError as e:
    raise ValueError(f"{where}: not valid JSON ({e.msg} at column {e.colno}); {_ROW_SHAPE}") from None
  if not isinstance(row, dict):
    raise ValueError(f"{where}: a row must be a JSON object, got {type(row).__name__}; {_ROW_SHAPE}")

  def bad(field: str, value: Any, want: str) -> ValueError:
    got = "missing" if value is _MISSING else f"{type(value).__name__} {_short(value)}"
    return ValueError(f"{where}: field '{field}' must be {want} (got {got}); {_ROW_SHAPE}")

  target = row.get("target", _MISSING)
  if not isinstance(target, str) or not target:
    raise bad("target", target, "a non-empty string")
  if ("prompt" in row) == ("messages" in row):
    raise ValueError(f"{where}: give exactly one of the fields 'prompt' and 'messages' "
                     f"({'both' if 'prompt' in row else 'neither'} given); {_ROW_SHAPE}")
  if "prompt" in row:
    if not isinstance(row["prompt"], str):
      raise bad("prompt", row["prompt"], "a string")
    return SFTRow(target=target, prompt=row["prompt"], where=where)
  messages = row["messages"]
  if not isinstance(messages, list) or not messages:
    raise bad("messages", messages, "a non-empty list of {role, content} objects")
  for i, m in enumerate(messages):
    if not isinstance(m, dict):
      raise bad(f"messages[{i}]", m, "an object with string 'role' and 'content'")
    for key in ("role", "content"):
      if not isinstance(m.get(key, _MISSING), str):
        raise bad(f"messages[{i}].{key}", m.get(key, _MISSING), "a string")
  return SFTRow(target=target, messages=tuple({"role": m["role"], "content": m["content"]}
                                              for m in messages), where=where)


def _short(value: Any) -> str:
  text = json.dumps(value)
  return text if len(text) <= 40 else text[:37] + "..."


def render(rows: Sequence[SFTRow], tokenizer, *, prompt_as_user_turn: bool = False,
           enable_thinking: Optional[bool] = None) -> list[tuple[str, str]]:
  """(prompt text, target text) per row: messages (and wrapped prompts) through the chat template.

  Raises:
    ValueError: a row needs the chat template and the tokenizer has none (names the row).
  """
  needs_template = [r for r in rows if r.messages is not None or prompt_as_user_turn]
  if needs_template and not getattr(tokenizer, "chat_template", None):
    row = needs_template[0]
    field = "messages" if row.messages is not None else "prompt (data.prompt_as_user_turn=True)"
    raise ValueError(f"{row.where}: field '{field}' needs a chat template, but tokenizer "
                     f"{tokenizer.name_or_path!r} has none; give rendered 'prompt' text instead")
  pairs = []
  for r in rows:
    if r.messages is not None or prompt_as_user_turn:
      messages = r.messages if r.messages is not None else ({"role": "user", "content": r.prompt},)
      prompt = tokenizer_lib.render_chat(tokenizer, messages, add_generation_prompt=True,
                                         enable_thinking=enable_thinking)
    else:
      prompt = r.prompt
    pairs.append((prompt, r.target))
  return pairs


def target_tokens(tokenizer, target: str, spans: Sequence[tuple[int, int]] = ()
                  ) -> tuple[list[int], list[bool]]:
  """(token ids, carries loss) of a target: tokenised whole without spans, else piece by piece,
  False on the pieces inside `spans` (sorted, disjoint [start, end) character spans)."""
  if not spans:
    ids = tokenizer.encode(target, add_special_tokens=False)
    return ids, [True] * len(ids)
  ids, loss, pos = [], [], 0
  for start, end in [*spans, (len(target), len(target))]:
    if not pos <= start <= end <= len(target):
      raise ValueError(f"inserted span ({start}, {end}) of a {len(target)}-character target is out "
                       f"of order or range (after {pos}); spans are sorted, disjoint [start, end)")
    for piece, trains in ((target[pos:start], True), (target[start:end], False)):
      piece_ids = tokenizer.encode(piece, add_special_tokens=False) if piece else []
      ids += piece_ids
      loss += [trains] * len(piece_ids)
    pos = end
  return ids, loss


def tokenize_pairs(tokenizer, pairs: Sequence[tuple[str, str]], *, max_prompt_tokens: int,
                   max_completion_tokens: int,
                   inserted_spans: Optional[Sequence[Sequence[tuple[int, int]]]] = None,
                   overlong: str = "cut") -> dict[str, np.ndarray]:
  """Left-padded prompts [N, Lp] and right-padded completions (+ EOS) [N, Lc] with masks.

  loss_mask [N, Lc] is True at the completion tokens that carry loss: every target token and the
  EOS, except those of the row's `inserted_spans` ([start, end) characters of its target that a
  tool wrote; SFTRow.inserted_spans). A target with spans is tokenised piece by piece at their
  edges, as the rollout tokenises each inserted result alone (sampling/multiturn.py), so no token
  straddles an edge; the holes stay attended (models/logprobs.completion_logprobs).

  A completion longer than `max_completion_tokens` (EOS included), or a prompt longer than
  `max_prompt_tokens`, is, by `overlong` (config data.overlong): "cut" (a completion at its end,
  losing its EOS; a prompt on the left, losing its system prompt and instructions), with a warning
  that counts such rows; "drop"-ped, counted in a warning, so N is the rows kept; "error":
  ValueError.

  Raises:
    ValueError: overlong="error" and a completion or prompt is too long; "drop" and every row is;
      an unknown `overlong`.
  """
  if overlong not in OVERLONG:
    raise ValueError(f"overlong={overlong!r}: expected one of {OVERLONG} (config data.overlong)")
  eos = tokenizer.eos_token_id
  spans = [()] * len(pairs) if inserted_spans is None else list(inserted_spans)
  if len(spans) != len(pairs):
    raise ValueError(f"inserted_spans has {len(spans)} rows for {len(pairs)} pairs")
  comps = []
  for (_, target), row_spans in zip(pairs, spans):
    tokens, loss = target_tokens(tokenizer, target, row_spans)
    comps.append((tokens + ([eos] if eos is not None else []), loss + [True] * (eos is not None)))
  prompt_ids, prompt_mask = sampling.tokenize_prompts(tokenizer, [p for p, _ in pairs])
  prompt_lengths = prompt_mask.sum(axis=1)
  keep = np.ones(len(pairs), bool)
  for name, lengths, field, limit, counted, cut in (
      ("targets", [len(c) for c, _ in comps], "max_completion_tokens", max_completion_tokens,
       "EOS included; ", "cut there, so they lose their EOS and end (a gold completion its answer) "
       "and teach never finishing"),
      ("prompts", prompt_lengths, "max_prompt_tokens", max_prompt_tokens, "",
       "cut on the left, so they lose their beginning (system prompt, instructions) and share no "
       "prefix with the other rows any more")):
    over = np.asarray(lengths) > limit
    if not over.any():
      continue
    what = (f"{int(over.sum())} of {len(pairs)} SFT {name} ({over.mean():.1%}) are longer than "
            f"data.{field}={limit} ({counted}the longest has {int(np.max(lengths))})")
    if overlong == "error":
      raise ValueError(f"{what}; raise the limit, shorten them, or set data.overlong='drop' "
                       "(leave them out) or 'cut'")
    if overlong == "drop":
      keep &= ~over
      if not keep.any():
        raise ValueError(f"{what}: data.overlong='drop' leaves no row; raise the limit or shorten "
                         f"the {name}")
      logging.warning("%s: left out (data.overlong='drop')", what)
    else:
      logging.warning("%s: %s; data.overlong='drop' leaves them out", what, cut)
  if not keep.all():
    comps = [c for c, k in zip(comps, keep) if k]
    prompt_ids, prompt_mask = prompt_ids[keep], prompt_mask[keep]
    prompt_lengths = prompt_lengths[keep]
  width = min(int(prompt_lengths.max()), max_prompt_tokens)
  prompt_ids, prompt_mask = prompt_ids[:, -width:], prompt_mask[:, -width:]
  width = min(max(len(c) for c, _ in comps), max_completion_tokens)
  pad = tokenizer.pad_token_id or 0
  ids = np.full((len(comps), width), pad, np.int32)
  mask = np.zeros((len(comps), width), bool)
  for i, (c, loss) in enumerate(comps):
    c, loss = c[:width], loss[:width]
    ids[i, :len(c)] = c
    mask[i, :len(c)] = loss
  return dict(prompt_ids=prompt_ids, prompt_mask=prompt_mask, completion_ids=ids, loss_mask=mask)
