"""MetricsWriter writes JSONL rows and TensorBoard scalars a reader can load back."""

import glob
import math

from tensorboardX.proto import event_pb2

from grounding_jax import metrics_writer


def _tb_scalars(logdir):
  out = {}
  for path in glob.glob(str(logdir / "tb" / "events.*")):
    with open(path, "rb") as f:
      data = f.read()
    pos = 0
    while pos < len(data):  # TFRecord framing: len u64, crc u32, payload, crc u32
      n = int.from_bytes(data[pos:pos + 8], "little")
      ev = event_pb2.Event.FromString(data[pos + 12:pos + 12 + n])
      pos += 16 + n
      for v in ev.summary.value:
        out[(v.tag, ev.step)] = v.simple_value
  return out


def test_jsonl_and_tensorboard(tmp_path):
  w = metrics_writer.MetricsWriter(tmp_path, total_steps=2, console=True)
  w.write(1, {"reward/mean": 0.25, "loss": -1.5})
  w.write(2, {"reward/mean": 0.5, "loss": float("nan")})
  w.close()
  rows = metrics_writer.read_jsonl(tmp_path / "metrics.jsonl")
  assert rows == [{"step": 1, "reward/mean": 0.25, "loss": -1.5},
                  {"step": 2, "reward/mean": 0.5, "loss": None}]
  tb = _tb_scalars(tmp_path)
  assert tb[("reward/mean", 1)] == 0.25 and tb[("reward/mean", 2)] == 0.5
  assert math.isnan(tb[("loss", 2)])


def test_resumed_writer_appends(tmp_path):
  """A resumed run (a new writer on the same directory) keeps the earlier rows."""
  w = metrics_writer.MetricsWriter(tmp_path / "logs", console=False)
  w.write(1, {"reward/mean": 0.1})
  w.close()
  w = metrics_writer.MetricsWriter(str(tmp_path / "logs"), initial_step=1, console=False)
  w.write(2, {"reward/mean": 0.2, "eval/em": 0.5})
  w.close()
  rows = metrics_writer.read_jsonl(str(tmp_path / "logs" / "metrics.jsonl"))
  assert rows == [{"step": 1, "reward/mean": 0.1}, {"step": 2, "reward/mean": 0.2, "eval/em": 0.5}]
