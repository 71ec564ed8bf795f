"""launch/build_data.py end to end (as a user runs it): raw files → JSONL splits + manifest + summary."""

import hashlib
import json
import pathlib
import random
import re
import shlex
import subprocess
import sys

import numpy as np

from grounding_jax.data import construct
from grounding_jax.data.jsonl import read_examples, read_examples_with_prompts
from grounding_jax.recipes import render_prompt
from grounding_jax.data.readers import read_dataset

ROOT = pathlib.Path(__file__).resolve().parents[2]
FIX = ROOT / "tests" / "data" / "fixtures"
HOTPOT_TRAIN = FIX / "hotpotqa_train_sample_16.json"  # real HotpotQA train records (fixtures/README)
HOTPOT_DEV = FIX / "hotpotqa_dev_distractor_8.json"   # real HotpotQA dev distractor records


def _run(*args):
  out = subprocess.run([sys.executable, str(ROOT / "launch" / "build_data.py"), *map(str, args)],
                       capture_output=True, text=True, cwd=ROOT, timeout=300)
  assert out.returncode == 0, out.stderr[-3000:]
  return out.stdout


def _manifest(out_dir):
  return json.loads((out_dir / "manifest.json").read_text())


def test_raw_files_to_jsonl_with_prompts(tmp_path):
  stdout = _run("--recipe=arena", "--source=hotpotqa", f"--train_input={FIX / 'hotpotqa_dev_distractor_5.json'}",
                "--train_limit=3", f"--eval_input={FIX / 'hotpotqa_dev_distractor_5.json'}",
                f"--output_dir={tmp_path}", "--with_prompts")
  expected = list(read_dataset("hotpotqa", FIX / "hotpotqa_dev_distractor_5.json"))
  train = list(read_examples_with_prompts(tmp_path / "train.jsonl"))
  # A seeded sample (seed 0), not the first 3 rows: random.Random(seed).sample(range(N), n), sorted.
  picked = [expected[i] for i in sorted(random.Random(0).sample(range(5), 3))]
  assert [ex for ex, _ in train] == picked and picked != expected[:3]
  assert [p for _, p in train] == [render_prompt("arena", ex) for ex in picked]
  assert list(read_examples(tmp_path / "eval.jsonl")) == expected
  rows = {line.split()[0]: line.split() for line in stdout.splitlines() if line.startswith(("train", "eval"))}
  # split examples answerable unanswerable unlabelled rate passages gold prompt-chars
  assert rows["train"][1:6] == ["3", "3", "0", "0", "1.000"]
  assert rows["eval"][1] == "5" and rows["eval"][6:8] == ["10.00", "2.00"]
  mean_chars = sum(len(render_prompt("arena", ex)) for ex in expected) / 5
  assert rows["eval"][8] == f"{mean_chars:.0f}"
  manifest = _manifest(tmp_path)
  assert manifest["seed"] == 0 and manifest["splits"]["train"]["examples"] == 3
  assert manifest["draws"][0]["draw"] == "train=hotpotqa:train:3" and manifest["draws"][0]["rows"] == 5


def test_synthetic_source_and_eval_fraction(tmp_path):
  stdout = _run("--recipe=grace", "--source=synthetic", "--synthetic_train_size=40", "--synthetic_eval_size=10",
                "--synthetic_answerable_ratio=0.25", f"--output_dir={tmp_path / 's'}")
  train = list(read_examples(tmp_path / "s" / "train.jsonl"))
  assert len(train) == 40 and sum(ex.answerable is True for ex in train) == 10
  assert "0.250" in stdout
  _run("--recipe=trust_stage1", "--source=asqa", f"--train_input={FIX / 'trust_asqa_eval_calibrated_handmade.json'}",
       "--eval_fraction=0.5", "--reader_kwargs=ndoc=3", f"--output_dir={tmp_path / 't'}")
  both = list(read_examples(tmp_path / "t" / "train.jsonl")) + list(read_examples(tmp_path / "t" / "eval.jsonl"))
  assert sorted(ex.id for ex in both) == ["hm-asqa-1", "hm-asqa-2"] and all(len(ex.passages) == 3 for ex in both)


def test_grace_construction_from_raw_files(tmp_path):
  stdout = _run("--recipe=grace", "--source=hotpotqa", "--grace_construct", "--grace_retrievers=oracle,bm25,random",
                "--grace_test_retriever=bm25", f"--train_input={FIX / 'hotpotqa_dev_distractor_5.json'}",
                f"--eval_input={FIX / 'hotpotqa_dev_distractor_5.json'}", f"--output_dir={tmp_path}")
  assert "GRACE construction (hotpotqa, mode=grace)" in stdout
  train = list(read_examples(tmp_path / "train.jsonl"))
  assert {ex.meta["retriever"] for ex in train} == {"oracle", "bm25", "random"}
  for ex in train:
    assert bool(ex.gold_passage_ids) == ex.answerable  # sufficient ⇔ gold in the context
  evals = list(read_examples(tmp_path / "eval.jsonl"))
  assert len(evals) == 5 and all(len(ex.passages) == 3 for ex in evals)


def _docstring_command(config: pathlib.Path, program: str) -> list[str]:
  """The first `python <program> …` command in a config's docstring, continuation lines joined."""
  doc = config.read_text().split('"""')[1]
  text = re.sub(r"\\\n\s*", " ", doc)
  line = next(l.strip() for l in text.splitlines() if l.strip().startswith(f"python {program}"))
  return shlex.split(line)[2:]


def test_the_grace_config_docstring_command_runs_on_real_hotpotqa(tmp_path):
  args = _docstring_command(ROOT / "configs" / "grace.py", "launch/build_data.py")
  # The paper's files -> the real-record fixtures; the output folder -> tmp.
  files = {"hotpot_train_v1.1.json": HOTPOT_TRAIN, "hotpot_dev_distractor_v1.json": HOTPOT_DEV}
  out_dir = tmp_path / "grace_hotpotqa"
  swap = lambda a: (f"{a.split('=')[0]}={files[a.split('=')[1]]}" if a.split("=")[-1] in files else
                    f"--output_dir={out_dir}" if a.startswith("--output_dir=") else a)
  stdout = _run(*map(swap, args))
  assert {p.name for p in out_dir.iterdir()} == {"train.jsonl", "test.jsonl", "manifest.json"}
  # 16 train questions (fewer than the 2,000 asked for: all taken, with a warning).
  assert "WARNING: draw train=hotpotqa:train:2000 asked for 2000 rows" in stdout
  train = list(read_examples(out_dir / "train.jsonl"))
  assert {ex.meta["retriever"] for ex in train} == {"oracle", "bm25", "dense", "dense_rerank", "random"}
  assert {ex.meta["source_id"] for ex in train} == {ex.id for ex in read_dataset("hotpotqa", HOTPOT_TRAIN)}
  for name in ("bm25", "dense", "dense_rerank", "random"):  # 50/50 per retriever (before dedup)
    rows = [ex for ex in train if ex.meta["retriever"] == name]
    assert sum(not ex.answerable for ex in rows) <= 8 and all(
        bool(ex.gold_passage_ids) == ex.answerable for ex in rows)
  assert all(ex.answerable and len(ex.passages) == 2 for ex in train if ex.meta["retriever"] == "oracle")
  test = list(read_examples(out_dir / "test.jsonl"))
  assert len(test) == 8 and all(len(ex.passages) == 3 for ex in test)
  assert all(ex.answerable == (len(ex.gold_passage_ids) == 2) for ex in test)  # both gold retrieved
  m = _manifest(out_dir)
  assert (m["preset"], m["recipe"], m["seed"]) == ("grace_hotpotqa", "grace", 123456)
  assert [(d["draw"], d["rows"], d["drawn"], d["shortfall"]) for d in m["draws"]] == [
      ("train=hotpotqa:train:2000", 16, 16, 1984), ("test=hotpotqa:eval:500", 8, 8, 492)]
  assert m["inputs"]["hotpotqa:train"]["sha256"] == hashlib.sha256(HOTPOT_TRAIN.read_bytes()).hexdigest()
  assert m["splits"]["train"]["examples"] == len(train) and m["splits"]["test"]["examples"] == 8
  assert m["splits"]["test"]["by_dataset"]["hotpotqa"]["examples"] == 8
  assert re.fullmatch(r"[0-9a-f]{40}", m["git"]["commit"])
  g = m["grace_construction"]
  assert g["mode"] == "grace" and g["k"] == 5 and g["test_k"] == 3 and "BM25" in g["reranker"]
  assert g["dense_encoder"].startswith("all-MiniLM") and m["flags"]["preset"] == "grace_hotpotqa"
  assert sum(c.get("sufficient", 0) + c.get("insufficient", 0)
             for c in g["per_retriever"]["train"].values()) == len(train)


def test_chunks_count_tokenizer_tokens_or_words(tmp_path, smollm2_dir):
  from grounding_jax.models import bert
  import transformers
  minilm = bert.minilm_path()
  common = ["--recipe=grace", "--source=hotpotqa", "--grace_construct", "--grace_retrievers=bm25",
            "--grace_test_retriever=bm25", f"--eval_input={FIX / 'hotpotqa_dev_distractor_5.json'}",
            "--chunk_tokens=24", "--chunk_overlap=4"]
  _run(*common, f"--chunk_tokenizer={minilm}", f"--output_dir={tmp_path / 'tok'}")
  _run(*common, f"--output_dir={tmp_path / 'words'}")
  tok = transformers.AutoTokenizer.from_pretrained(str(minilm), local_files_only=True)
  by_tokens = [p.text for ex in read_examples(tmp_path / "tok" / "eval.jsonl") for p in ex.passages]
  by_words = [p.text for ex in read_examples(tmp_path / "words" / "eval.jsonl") for p in ex.passages]
  n_tokens = [len(tok(t, add_special_tokens=False)["input_ids"]) for t in by_tokens]
  # A window may start inside a word; re-tokenising its text can shift the count by a piece or two.
  assert max(n_tokens) <= 26 and max(len(t.split()) for t in by_words) <= 24
  assert max(len(tok(t, add_special_tokens=False)["input_ids"]) for t in by_words) > 26
  assert _manifest(tmp_path / "tok")["grace_construction"]["chunking"] == {
      "tokenizer": str(minilm), "tokens": 24, "overlap": 4}
  assert _manifest(tmp_path / "words")["grace_construction"]["chunking"]["tokenizer"] == "whitespace words"
  # --tokenizer (the chat template's folder) also sets the chunk tokens when --chunk_tokenizer is unset.
  _run(*common, f"--tokenizer={smollm2_dir}", f"--output_dir={tmp_path / 'chat'}")
  smol = transformers.AutoTokenizer.from_pretrained(str(smollm2_dir), local_files_only=True)
  chat = [p.text for ex in read_examples(tmp_path / "chat" / "eval.jsonl") for p in ex.passages]
  assert max(len(smol(t, add_special_tokens=False)["input_ids"]) for t in chat) <= 26
  assert _manifest(tmp_path / "chat")["grace_construction"]["chunking"]["tokenizer"] == str(smollm2_dir)


def test_grace_retrievers_from_local_folders(tmp_path):
  from grounding_jax.data import retrieval
  from grounding_jax.models.embedding import DecoderEmbedder
  from tiny_encoders import QUERY_PROMPT, build_qwen3_embedding, build_xlmr_reranker
  embedder, reranker = build_qwen3_embedding(tmp_path / "emb"), build_xlmr_reranker(tmp_path / "rr")
  src = FIX / "hotpotqa_dev_distractor_5.json"
  _run("--recipe=grace", "--source=hotpotqa", "--grace_construct", "--grace_retrievers=dense,dense_rerank",
       f"--train_input={src}", f"--eval_input={src}", f"--dense_encoder={embedder}",
       f"--reranker={reranker}", f"--output_dir={tmp_path / 'out'}")
  g = _manifest(tmp_path / "out")["grace_construction"]
  assert (g["dense_encoder"], g["reranker"], g["dense_query_prompt"]) == (
      str(embedder), str(reranker), QUERY_PROMPT)
  # The eval contexts are the Qwen3 embedder's natural top-3 (query prompt on, documents plain).
  enc = DecoderEmbedder(embedder)
  dense = retrieval.DenseRetriever(enc)
  for item, got in zip(read_dataset("hotpotqa", src), read_examples(tmp_path / "out" / "eval.jsonl")):
    pool = construct.chunk_pool(item)
    want = [i for i, _ in dense.index(pool.chunks).search(item.question, 3)]
    assert [p.text for p in got.passages] == [pool.chunks[i].text for i in want]
  assert {ex.meta["retriever"] for ex in read_examples(tmp_path / "out" / "train.jsonl")} == {
      "dense", "dense_rerank"}


def test_ablation_modes(tmp_path):
  src = FIX / "hotpotqa_dev_distractor_8.json"
  for mode in ("naive", "wo_ab"):
    _run("--recipe=grace", "--source=hotpotqa", "--grace_construct", f"--grace_mode={mode}",
         "--grace_retrievers=bm25,random", f"--train_input={src}", f"--output_dir={tmp_path / mode}")
    train = list(read_examples(tmp_path / mode / "train.jsonl"))
    assert _manifest(tmp_path / mode)["grace_construction"]["mode"] == mode
    if mode == "naive":  # gold only, or k gold-free chunks
      assert all(bool(ex.gold_passage_ids) == ex.answerable for ex in train)
      assert {ex.meta["retriever"] for ex in train} == {"naive"} and len(train) == 8
      assert all(len(ex.passages) == (2 if ex.answerable else 5) for ex in train)
    else:  # natural top-5: sufficient iff both gold paragraphs were retrieved
      assert {ex.meta["retriever"] for ex in train} == {"bm25", "random"}
      assert all(len(ex.passages) == 5 and ex.answerable == (len(ex.gold_passage_ids) == 2)
                 for ex in train)
      assert sum(ex.answerable for ex in train if ex.meta["retriever"] == "bm25") > 4  # unbalanced


def test_arena_preset_mixes_three_datasets_with_a_holdout(tmp_path):
  wiki, musique = FIX / "2wikimultihopqa_dev_handmade.json", FIX / "musique_ans_train_3.jsonl"
  _run("--preset=arena", f"--input=hotpotqa:train={HOTPOT_TRAIN}", f"--input=hotpotqa:eval={HOTPOT_DEV}",
       f"--input=2wikimultihopqa:train={wiki}", f"--input=2wikimultihopqa:eval={wiki}",
       f"--input=musique:train={musique}", f"--input=musique:eval={musique}",
       "--holdout=heldout=train:5", f"--output_dir={tmp_path}")
  m = _manifest(tmp_path)
  assert [(d["draw"], d["requested"]) for d in m["draws"]] == [
      ("train=hotpotqa:train:10000", 10000), ("train=2wikimultihopqa:train:10000", 10000),
      ("train=musique:train:5000", 5000), ("test_hotpotqa=hotpotqa:eval:500", 500),
      ("test_2wikimultihopqa=2wikimultihopqa:eval:500", 500), ("test_musique=musique:eval:500", 500)]
  s = m["splits"]
  assert (s["train"]["examples"], s["heldout"]["examples"]) == (16 + 2 + 3 - 5, 5)
  by = {d: s["train"]["by_dataset"].get(d, {}).get("examples", 0) + s["heldout"]["by_dataset"].get(
      d, {}).get("examples", 0) for d in ("hotpotqa", "2wikimultihopqa", "musique")}
  assert by == {"hotpotqa": 16, "2wikimultihopqa": 2, "musique": 3}
  assert (s["test_hotpotqa"]["examples"], s["test_musique"]["examples"]) == (8, 3)
  assert m["recipe"] == "arena" and m["seed"] == 123456 and m["holdout"]["count"] == 5
  train_sets = [ex.meta["dataset"] for ex in read_examples(tmp_path / "train.jsonl")]
  assert train_sets != sorted(train_sets, key=("hotpotqa", "2wikimultihopqa", "musique").index)


def _trust_file(path, dataset, n=150):
  """Trust-Score format; row i answerable (answers_found in its first doc) iff i % 3 != 0."""
  rows = [{"question": f"{dataset} question {i}?", "sample_id": f"{dataset}-{i}", "answers": [[f"a{i}"]],
           "docs": [{"title": "D", "text": f"Text {i}.", "answers_found": [int(i % 3 != 0)]}]}
          for i in range(n)]
  path.write_text(json.dumps(rows))
  return path


def test_trust_preset_samples_the_two_stages(tmp_path):
  inputs = [f"--input={d}:train={_trust_file(tmp_path / f'{d}.json', d)}" for d in ("asqa", "qampari", "eli5")]
  _run("--preset=trust", *inputs, f"--output_dir={tmp_path / 'out'}")
  m = _manifest(tmp_path / "out")
  assert [(d["draw"], d["requested"], d["requested_answerable"]) for d in m["draws"]] == [
      (f"stage1={d}:train:100:100", 100, 100) for d in ("asqa", "qampari", "eli5")] + [
      (f"stage2={d}:train:1000:500", 1000, 500) for d in ("asqa", "qampari", "eli5")]
  stage1 = list(read_examples(tmp_path / "out" / "stage1.jsonl"))
  stage2 = list(read_examples(tmp_path / "out" / "stage2.jsonl"))
  assert len(stage1) == 300 and all(ex.answerable for ex in stage1)  # 100 answerable per dataset
  # Each file has 100 answerable rows, all taken by stage 1; stage 2 gets the 50 unanswerable ones.
  assert len(stage2) == 150 and not any(ex.answerable for ex in stage2)
  assert not {ex.id for ex in stage1} & {ex.id for ex in stage2} and m["seed"] == 42
  assert np.array_equal([d["shortfall"] for d in m["draws"]], [0, 0, 0, 950, 950, 950])
