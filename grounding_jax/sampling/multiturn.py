"""Multi-turn generation: the policy calls a tool mid-completion and reads its result.

  gen = generate_turns(model, prompt_ids, prompt_mask, tool=retriever, tool_format=ToolFormat(),
                       max_turns=3, max_new_tokens=256, num_samples=8, tokenizer=tok, seed=key)
  gen.policy_mask  # False at the tokens the tool inserted: no loss on them
  gen.tool_calls   # [N] each row's executed calls (query, ToolResult)

Search-R1 (arXiv 2503.09516, §3.1): a turn decodes until the policy closes a call
(`tool_format.call_close`, an extra stop string), EOS, another stop string or its token budget.
The host reads the query of every row that stopped on a call, calls the tool ONCE for all of them,
and tokenises `tool_format.wrap(result)`; `engine.continue_decode` runs those tokens at each row's
own next cache slots (a prefill chunk, right-padded to a bucket: one program per bucket) and the
row samples on from there. What was decoded before stays in the KV cache and is never run again;
rows that finished wait (their writes are dropped) while the others continue.

Turns: `max_turns` bounds the generation segments, so a completion makes at most max_turns − 1
executed calls; a call closed in the last turn ends the completion unexecuted (Search-R1's final
rollout runs without search). max_turns = 1 is `generate_ids` itself.

Withheld passages: `withheld` gives each prompt the passages its searches must not return
(tools.Withheld; a gold_removed prompt of an evidence-contrast group, data/contrast.py); every row
of that prompt passes it with its queries, so one batched call serves rows of different corpora.

Budget: `max_new_tokens` counts every completion token, the policy's and the inserted ones, so
completions keep the single-turn width [N, max_new_tokens] and the update's shapes. A result
longer than what is left is cut; the row then ends, truncated.

Not here (single-turn only): the batch-shared prompt prefix (`shared_prefix_min_tokens`); the
multi-turn sampler prefills each prompt (or group) alone, the same numbers in another order.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from grounding_jax.parallel import (DEFAULT_RULES, global_to_host_local, host_local_to_global,
                                    spanned_processes, use_mesh)
from grounding_jax.sampling import engine, stopping
from grounding_jax.sampling.generate import (Generation, _as_key, _check_args, _host_row_multiple,
                                             _hosts_max, _left_pad_to_bucket, _with_filler_rows,
                                             default_eos_ids, generate_ids, record_stats,
                                             split_model)
from grounding_jax.sampling.prompts import bucket_length
from grounding_jax.sampling.tools import (Tool, ToolFormat, ToolResult, Withheld, same_text,
                                          withholds)


@dataclasses.dataclass(frozen=True)
class ToolCall:
  """One executed call of a completion: the policy's query and what the tool returned."""
  query: str
  result: ToolResult


@dataclasses.dataclass
class _Row:
  """One completion as the turns build it (host side)."""
  tokens: list = dataclasses.field(default_factory=list)
  logprobs: list = dataclasses.field(default_factory=list)
  policy: list = dataclasses.field(default_factory=list)  # 1 sampled, 0 inserted
  texts: list = dataclasses.field(default_factory=list)
  calls: list = dataclasses.field(default_factory=list)
  truncated: bool = False

  def add(self, tokens, logprobs, policy: bool, text: str):
    self.tokens += [int(t) for t in tokens]
    self.logprobs += [float(x) for x in logprobs]
    self.policy += [policy] * len(tokens)
    self.texts.append(text)


def generate_turns(model, prompt_ids, prompt_mask, *, tool: Tool | None, tool_format: ToolFormat,
                   max_turns: int, max_new_tokens: int, tokenizer, eos_ids: Sequence[int] | None = None,
                   pad_id: int | None = None, temperature: float = 0.0, top_p: float = 1.0,
                   top_k: int = 0, num_samples: int = 1, stop: Sequence[str] = (),
                   seed: int | jax.Array = 0, mesh=None, rules=None,
                   shared_prefix_min_tokens: int = 0, fuse_projections: bool = False,
                   withheld: Sequence[Withheld] | None = None) -> Generation:
  """`generate_ids` with up to `max_turns` turns of tool calls (module docstring).

  Args:
    tool: called with the queries of every row that closed a call in a turn (one batch), returns
      one ToolResult each; required when max_turns > 1.
    tool_format: the call and result tags.
    max_turns: generation segments per completion (1 = `generate_ids`, no tool).
    max_new_tokens: the completion budget, policy and inserted tokens together.
    tokenizer: required (queries are read from text, results tokenised).
    shared_prefix_min_tokens: used by the one-turn path only.
    withheld: [P] per prompt, the passages its rows' searches must not return (None: none); a
      non-empty one needs a tool that `withholds`.
    The rest: as `generate_ids`.

  Returns:
    Generation [N, max_new_tokens] with policy_mask and tool_calls set; texts hold the policy's
    text and the inserted results in order.
  """
  kwargs = dict(max_new_tokens=max_new_tokens, eos_ids=eos_ids, pad_id=pad_id,
                temperature=temperature, top_p=top_p, top_k=top_k, num_samples=num_samples,
                stop=stop, tokenizer=tokenizer, seed=seed, mesh=mesh, rules=rules,
                fuse_projections=fuse_projections)
  if int(max_turns) < 1:
    raise ValueError(f"rollout.max_turns={max_turns} must be >= 1 (1 = no tool calls).")
  if max_turns == 1:
    return generate_ids(model, prompt_ids, prompt_mask,
                                shared_prefix_min_tokens=shared_prefix_min_tokens, **kwargs)
  if tool is None:
    raise ValueError(f"rollout.max_turns={max_turns} > 1 needs a tool (a retriever) to call; pass "
                     "one (Trainer(tool=...), evaluate(tool=...)) or set rollout.max_turns=1.")
  if tokenizer is None:
    raise ValueError("multi-turn generation needs the tokenizer (queries are read from text).")
  if withheld is not None:
    withheld = list(withheld)
    if len(withheld) != len(prompt_ids):
      raise ValueError(f"withheld has {len(withheld)} entries for {len(prompt_ids)} prompts; give "
                       "one Withheld per prompt")
    if not any(withheld):
      withheld = None
    elif not withholds(tool):
      raise ValueError(f"some prompts withhold passages from their searches (evidence-contrast "
                       f"groups' gold_removed rows), but the tool {tool!r} cannot filter per query: "
                       "use a grounding_jax.tools retriever (search.retriever bm25 | dense | hybrid "
                       "| http), or give the tool `withholds = True` and a `withheld=` keyword")
  return _Turns(model, prompt_ids, prompt_mask, tool, tool_format, int(max_turns), kwargs,
                withheld).run()


class _Turns:
  """The state of one multi-turn call: device arrays between turns, host rows, timings."""

  def __init__(self, model, prompt_ids, prompt_mask, tool, tool_format, max_turns, kw,
               withheld=None):
    self.withheld = withheld  # [P] Withheld per prompt, or None
    _check_args(kw["max_new_tokens"], kw["temperature"], kw["top_p"], kw["top_k"],
                        kw["num_samples"])
    self.live = not isinstance(model, tuple)
    self.graphdef, self.state, self.model = split_model(model)
    self.tool, self.format, self.max_turns, self.kw = tool, tool_format, max_turns, kw
    self.tokenizer, self.mesh = kw["tokenizer"], kw["mesh"]
    self.rules = DEFAULT_RULES if kw["rules"] is None else kw["rules"]
    eos = kw["eos_ids"]
    eos = default_eos_ids(self.model, self.tokenizer) if eos is None else tuple(eos)
    pad = kw["pad_id"]
    if pad is None:
      candidates = [getattr(self.tokenizer, "pad_token_id", None), self.model.config.pad_token_id,
                    *eos, 0]
      pad = next(int(c) for c in candidates if c is not None)
    self.pad_id, self.eos = int(pad), np.asarray(list(eos) or [-1], np.int32)
    self.stops = tuple(kw["stop"]) + tuple(s for s in (tool_format.call_close,) if s not in kw["stop"])
    self.tables = stopping.build_stop_tables(self.tokenizer, self.stops, self.model.config.vocab_size)
    ids, mask = _left_pad_to_bucket(prompt_ids, prompt_mask, self.pad_id, self.mesh)
    self.num_prompts = ids.shape[0]
    shards = _host_row_multiple(self.mesh, self.rules)
    padded = -(-_hosts_max(self.num_prompts, self.mesh) // shards) * shards
    self.ids, self.mask = ids, mask
    self.run_ids, self.run_mask = _with_filler_rows(ids, mask, padded, self.pad_id)
    self.g = int(kw["num_samples"])
    self.padded_prompts, self.n = padded, padded * self.g
    self.rows = self.num_prompts * self.g
    self.ln = bucket_length(int(kw["max_new_tokens"]))
    greedy = kw["temperature"] == 0.0
    self.config = engine.DecodeConfig(num_samples=self.g, greedy=greedy, top_k=int(kw["top_k"]),
                                      use_top_p=(not greedy) and kw["top_p"] < 1.0,
                                      pad_id=self.pad_id)
    self.temperature = jnp.float32(1.0 if greedy else kw["temperature"])
    self.key = _as_key(kw["seed"])

  def _put(self, x, names):
    if self.mesh is None:
      return jnp.asarray(x)
    return host_local_to_global(x, names, self.mesh, rules=self.rules)

  def run(self) -> Generation:
    context = (use_mesh(self.mesh, self.rules) if self.mesh is not None
               else contextlib.nullcontext())
    with context:
      graphdef, state = engine.inference_state(
          self.model if self.live else nnx.merge(self.graphdef, self.state),
          self.kw["fuse_projections"])
      fused = self.kw["fuse_projections"] and nnx.merge(graphdef, state).projections_fused()
      self.tool_seconds = 0.0
      rows, steps, seconds = self._turns(graphdef, state)
    # decode_seconds holds the whole turn loop; tool_seconds the tool calls within it.
    record_stats(prefill_seconds=seconds[0], decode_seconds=seconds[1], decode_steps=steps,
                 tool_seconds=self.tool_seconds, prompt_rows=self.padded_prompts, rows=self.n,
                 prompt_bucket=self.run_ids.shape[1], new_tokens_bucket=self.ln,
                 shared_prefix_bucket=0, fused_projections=bool(fused))
    return self._generation(rows)

  def _turns(self, graphdef, state):
    kw, n = self.kw, self.n
    ids_d, mask_d = self._put(self.run_ids, ("batch", "length")), self._put(self.run_mask,
                                                                            ("batch", "length"))
    active = np.arange(n) < self.rows
    start = time.perf_counter()
    prompt_cache, prompt_logits = engine.prefill(graphdef, state, ids_d, mask_d)
    jax.block_until_ready(prompt_logits)
    prefill_seconds = time.perf_counter() - start
    lp = self.run_ids.shape[1]
    cache = engine.POOL.take(self.model, n * spanned_processes(self.mesh),
                             self.ln if self.g > 1 else lp + self.ln, self.mesh)
    start = time.perf_counter()
    out = engine.decode(
        graphdef, self.config, state, cache, prompt_cache, prompt_logits, mask_d,
        self._put(active, ("batch",)), self.key, self.temperature, jnp.float32(kw["top_p"]),
        jnp.int32(kw["max_new_tokens"]), jnp.asarray(self.eos), self.tables, None)
    rows = [_Row() for _ in range(self.rows)]
    total_steps = 0
    for turn in range(1, self.max_turns + 1):
      *host, cache = out
      tokens, logprobs, lengths, stopped, steps = (np.asarray(global_to_host_local(x))
                                                   for x in host)
      total_steps += int(steps)
      calls = self._read_turn(rows, active, tokens, logprobs, lengths, stopped,
                              last=turn == self.max_turns)
      chunk = self._insert(rows, calls)
      if _hosts_max(len(chunk), self.mesh) == 0:
        break
      active, args = self._chunk_arrays(rows, chunk)
      total_steps += args[1].shape[1]  # the chunk's positions cost about a decode step each (perf)
      out = engine.continue_decode(
          graphdef, self.config, state, cache, prompt_cache, mask_d, *args,
          self._put(active, ("batch",)), jax.random.fold_in(self.key, turn), self.temperature,
          jnp.float32(kw["top_p"]), self._put(self._limits(rows, chunk), ("batch",)),
          jnp.asarray(self.eos), self.tables)
    engine.POOL.give_back(self.model, cache, self.mesh)
    return rows, total_steps, (prefill_seconds, time.perf_counter() - start)

  def _read_turn(self, rows, active, tokens, logprobs, lengths, stopped, *, last: bool):
    """Appends each active row's turn to it; returns {row: query} of the calls to run. A row that
    did not close a call (or did in the last turn) is finished."""
    budget = int(self.kw["max_new_tokens"])
    calls = {}
    for r in np.flatnonzero(active[:self.rows]):
      row, k = rows[r], int(lengths[r])
      text, keep = stopping.truncate_at_stop(self.tokenizer, tokens[r, :k], self.stops)
      hit = bool(stopped[r]) or keep < k or any(s in text for s in self.stops)
      row.add(tokens[r, :keep], logprobs[r, :keep], True, text)
      query = self.format.query(text) if hit else None
      if query is None or last:
        row.truncated = not hit
      elif len(row.tokens) >= budget:  # no room left for the result: the call is not run
        row.truncated = True
      else:
        calls[int(r)] = query
    return calls

  def _insert(self, rows, calls: dict) -> dict:
    """Runs the turn's calls in one batch and appends the results' tokens; {row: token ids} of
    the rows that go on (a result that fills the budget ends its row, truncated)."""
    if not calls:
      return {}
    order = sorted(calls)
    queries = [calls[r] for r in order]
    start = time.perf_counter()
    if self.withheld is None:
      results = list(self.tool(queries))
    else:  # rows are prompt-major: row r samples prompt r // G
      results = list(self.tool(queries, withheld=[self.withheld[r // self.g] for r in order]))
    self.tool_seconds += time.perf_counter() - start
    if len(results) != len(order):
      raise ValueError(f"the tool returned {len(results)} results for {len(order)} queries; a Tool "
                       "returns one ToolResult per query, in order (sampling/tools.py).")
    budget = int(self.kw["max_new_tokens"])
    chunk = {}
    for r, result in zip(order, results):
      row = rows[r]
      ids = self.tokenizer.encode(self.format.wrap(result), add_special_tokens=False)
      room = budget - len(row.tokens)
      row.calls.append(ToolCall(calls[r], result))
      if len(ids) >= room:
        ids = ids[:room]
        row.truncated = True
      text = self.tokenizer.decode(ids, skip_special_tokens=True)
      row.add(ids, [0.0] * len(ids), False, text)
      if not row.truncated:
        chunk[r] = ids
    return chunk

  def _chunk_arrays(self, rows, chunk: dict):
    """(active [N], (used, chunk_ids, chunk_len) device arrays) for `engine.continue_decode`."""
    n = self.n
    width = bucket_length(_hosts_max(max([len(v) for v in chunk.values()] or [1]),
                                             self.mesh))
    ids = np.full((n, width), self.pad_id, np.int32)
    count = np.zeros((n,), np.int32)
    used = np.zeros((n,), np.int32)
    active = np.zeros((n,), bool)
    for r, toks in chunk.items():
      ids[r, :len(toks)] = toks
      count[r] = len(toks)
      used[r] = len(rows[r].tokens) - len(toks)  # the chunk's first slot
      active[r] = True
    put = lambda x, names=("batch",): self._put(x, names)
    return active, (put(used), put(ids, ("batch", "length")), put(count))

  def _limits(self, rows, chunk: dict) -> np.ndarray:
    """int32 [N] each continuing row's token budget for the next turn."""
    limit = np.zeros((self.n,), np.int32)
    for r in chunk:
      limit[r] = int(self.kw["max_new_tokens"]) - len(rows[r].tokens)
    return limit

  def _generation(self, rows) -> Generation:
    width = int(self.kw["max_new_tokens"])
    n = self.rows
    tokens = np.full((n, width), self.pad_id, np.int32)
    logprobs = np.zeros((n, width), np.float32)
    policy = np.zeros((n, width), bool)
    lengths = np.zeros((n,), np.int32)
    for r, row in enumerate(rows):
      k = lengths[r] = len(row.tokens)
      tokens[r, :k], logprobs[r, :k], policy[r, :k] = row.tokens, row.logprobs, row.policy
    return Generation(
        texts=["".join(row.texts) for row in rows], token_ids=tokens, logprobs=logprobs,
        lengths=lengths, truncated=np.array([row.truncated for row in rows], bool),
        completion_mask=np.arange(width)[None, :] < lengths[:, None],
        prompt_ids=self.ids, prompt_mask=self.mask, policy_mask=policy,
        tool_calls=[list(row.calls) for row in rows])


def gold_passages(example) -> list:
  """An Example's gold passages (gold_passage_ids are 1-indexed positions in its passages) that
  retrieval recall can look for: those with an id."""
  passages = getattr(example, "passages", ()) or ()
  return [passages[i - 1] for i in dict.fromkeys(getattr(example, "gold_passage_ids", ()) or ())
          if 0 < i <= len(passages) and passages[i - 1].id]


def tool_call_stats(rollout) -> tuple[np.ndarray, np.ndarray]:
  """Per row of a rollout (anything with `tool_calls` and `row_examples()`): (executed calls
  int [N], recall of the example's gold passages float [N]: the share of them (`gold_passages`)
  its calls retrieved — by id (ToolResult.doc_ids) or by text (doc_texts, whitespace aside: a
  paragraph shared by questions is in a corpus once, under one id); NaN where the example has no
  gold passage with an id). A one-turn rollout has no calls (zeros; recall 0 where gold exists)."""
  examples = rollout.row_examples()
  calls = rollout.tool_calls or [[] for _ in examples]
  counts = np.array([len(c) for c in calls], np.int32)
  recall = np.full(len(examples), np.nan)
  for i, (ex, row_calls) in enumerate(zip(examples, calls)):
    gold = gold_passages(ex)
    if gold:
      ids = {str(d) for call in row_calls for d in call.result.doc_ids}
      texts = {same_text(t) for call in row_calls for t in call.result.doc_texts}
      found = sum(p.id in ids or same_text(p.text) in texts for p in gold)
      recall[i] = found / len(gold)
  return counts, recall


def tool_metrics(counts: np.ndarray, recall: np.ndarray, prefix: str = "search/") -> dict:
  """The search metrics of `tool_call_stats`' columns (every host's rows): calls per completion,
  the share of completions that call at least once, gold-passage recall (over rows with gold).
  Columns [..., N] with leading axes (the bootstrap's resamples) give arrays over those axes (gold
  recall NaN for a set without gold)."""
  counts, recall = np.asarray(counts, np.float64), np.asarray(recall, np.float64)
  m = {f"{prefix}calls_per_completion": np.mean(counts, -1),
       f"{prefix}searching_frac": np.mean(counts > 0, -1)}
  if np.any(~np.isnan(recall)):
    with np.errstate(invalid="ignore", divide="ignore"):
      m[f"{prefix}gold_recall"] = np.nansum(recall, -1) / np.sum(~np.isnan(recall), -1)
  return {k: float(v) if np.ndim(v) == 0 else v for k, v in m.items()}
