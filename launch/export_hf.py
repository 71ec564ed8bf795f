r"""Exports a checkpoint of a training or SFT run as an HF folder for transformers and vLLM.

  python launch/export_hf.py --workdir=/runs/grace --output_dir=/export/grace            # newest step
  python launch/export_hf.py --workdir=/runs/grace --step=200 --output_dir=/export/grace_200 \
      --dtype=bfloat16 --overwrite
  vllm serve /export/grace_200                                                           # then serve it
  # a LoRA run (model.lora.rank > 0): merged into the weights (default), or the adapters alone
  python launch/export_hf.py --workdir=/runs/reader --output_dir=/export/reader_peft --adapters=peft

Writes config.json, model.safetensors (shards + index past 2 GB), the base model's tokenizer files
with its chat template, and generation_config.json with the model's bos / eos / pad ids. The workdir's
run record (<workdir>/config.json, written by launch/train.py and launch/sft.py) names the base model
and the checkpoint dtype; only the policy parameters are read from the checkpoint. A LoRA run's adapters
are merged into the weights, or with --adapters=peft written alone as a PEFT folder
(adapter_config.json + adapter_model.safetensors; peft's PeftModel.from_pretrained(base, folder) or
transformers' load_adapter read it). A non-empty
--output_dir is refused unless --overwrite (and even then only an earlier export is replaced).
The weights pass through host memory, so it runs on the CPU: SmolLM2-135M (an SFT workdir, exported
as bfloat16) took 27 s wall and 2.0 GB peak memory on the shared 2-core CPU (load average 10).
"""

from __future__ import annotations

import os
import sys

# Export only moves bytes, and host memory holds models that one accelerator's does not; set before
# JAX starts (JAX_PLATFORMS=tpu or gpu in the environment still wins).
os.environ.setdefault("JAX_PLATFORMS", "cpu")

from absl import app  # noqa: E402  (after JAX_PLATFORMS)
from absl import flags  # noqa: E402
from absl import logging  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from grounding_jax.eval import model_ref  # noqa: E402
from grounding_jax.models import hf_export  # noqa: E402

_WORKDIR = flags.DEFINE_string("workdir", None, "A training or SFT run's working directory.")
_STEP = flags.DEFINE_integer("step", None, "Checkpoint step to export (default: the newest).")
_OUTPUT_DIR = flags.DEFINE_string("output_dir", None, "The HF folder to write.")
_DTYPE = flags.DEFINE_enum("dtype", None, ["float32", "bfloat16", "float16"],
                           "Tensor dtype of the export (default: the checkpoint's).")
_OVERWRITE = flags.DEFINE_bool("overwrite", False, "Replace an earlier export in --output_dir.")
_ADAPTERS = flags.DEFINE_enum("adapters", "merge", ["merge", "peft"],
                              "A LoRA run (model.lora.rank > 0): 'merge' folds the adapters into the "
                              "weights (a plain HF folder); 'peft' writes the adapters alone as a PEFT "
                              "folder (adapter_config.json + adapter_model.safetensors) over the base.")
flags.mark_flags_as_required(["workdir", "output_dir"])


def main(argv):
  del argv
  try:  # user errors (a missing step, a busy output folder) as one line, before any weights load
    hf_export.check_output_dir(_OUTPUT_DIR.value, overwrite=_OVERWRITE.value, marker=(
        hf_export.PEFT_CONFIG if _ADAPTERS.value == "peft" else "config.json"))
    spec = _WORKDIR.value if _STEP.value is None else f"{_WORKDIR.value}@{_STEP.value}"
    ref = model_ref.resolve(spec)
  except (FileNotFoundError, FileExistsError, ValueError) as e:
    sys.exit(f"export_hf: {e}")
  if ref.workdir is None:
    sys.exit(f"export_hf: {_WORKDIR.value} is already an HF folder; --workdir takes a training or SFT "
             f"working directory")
  if _ADAPTERS.value == "peft" and ref.lora is None:
    sys.exit(f"export_hf: --adapters=peft needs a LoRA run, but {_WORKDIR.value} trained all "
             f"parameters (its model.lora.rank is 0); drop --adapters to export the full model")
  loaded = model_ref.load(ref)
  dtype = None if _DTYPE.value is None else getattr(jnp, _DTYPE.value)
  if _ADAPTERS.value == "peft":
    folder = hf_export.export_peft(loaded.model, _OUTPUT_DIR.value, base_model=ref.hf_folder,
                                   dtype=dtype, overwrite=_OVERWRITE.value)
  else:  # LoRA adapters, if any, merged into the weights
    folder = hf_export.export_hf(loaded.model, _OUTPUT_DIR.value, tokenizer_from=ref.hf_folder,
                                 dtype=dtype, overwrite=_OVERWRITE.value)
  logging.info("exported %s (base %s) to %s", ref.name, ref.hf_folder, folder)
  print(f"exported {ref.name} to {folder}")


if __name__ == "__main__":
  app.run(main)
