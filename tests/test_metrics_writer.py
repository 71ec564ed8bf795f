"""MetricsWriter writes JSONL rows and TensorBoard scalars a reader can load back."""

import glob
import json
import math
import sys

import numpy as np
import pytest
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


def _tb_events(path):
  with open(path, "rb") as f:
    data = f.read()
  pos, out = 0, []
  while pos < len(data):
    n = int.from_bytes(data[pos:pos + 8], "little")
    out.append(event_pb2.Event.FromString(data[pos + 12:pos + 12 + n]))
    pos += 16 + n
  return out


def test_a_resumed_run_replaces_the_replayed_rows(tmp_path):
  w = metrics_writer.MetricsWriter(tmp_path, console=False)
  for s in (1, 2, 3):
    w.write(s, {"loss": float(s)})
  w.close()
  with open(tmp_path / "metrics.jsonl", "a", encoding="utf-8") as f:
    f.write('{"step": 4, "lo')  # killed mid-write
  # Resumed from the step-2 checkpoint: steps 3 and 4 are computed again.
  w = metrics_writer.MetricsWriter(tmp_path, initial_step=2, console=False)
  w.write(3, {"loss": 30.0})
  w.write(4, {"loss": 40.0})
  w.close()
  rows = metrics_writer.read_jsonl(tmp_path / "metrics.jsonl")
  assert rows == [{"step": 1, "loss": 1.0}, {"step": 2, "loss": 2.0}, {"step": 3, "loss": 30.0},
                  {"step": 4, "loss": 40.0}]
  # TensorBoard: the resumed run's event file opens with a restart at step 3, which makes
  # TensorBoard hide the earlier run's events from step 3 on; the replayed values follow it.
  files = sorted(glob.glob(str(tmp_path / "tb" / "events.*")))
  assert len(files) == 2
  events = _tb_events(files[1])
  starts = [e.step for e in events if e.HasField("session_log")
            and e.session_log.status == event_pb2.SessionLog.START]
  assert starts == [3]
  assert [(v.tag, e.step, v.simple_value) for e in events for v in e.summary.value] == [
      ("loss", 3, 30.0), ("loss", 4, 40.0)]
  assert not any(e.HasField("session_log") for e in _tb_events(files[0]))  # a fresh run: no purge


def test_an_unterminated_last_row_is_kept_and_ended(tmp_path):
  (tmp_path / "metrics.jsonl").write_text('{"step": 1, "loss": 1.0}')
  w = metrics_writer.MetricsWriter(tmp_path, console=False)
  w.write(2, {"loss": 2.0})
  w.close()
  assert [r["step"] for r in metrics_writer.read_jsonl(tmp_path / "metrics.jsonl")] == [1, 2]


def test_compile_time_counts_wall_time_covered_once(monkeypatch):
  """Compile events that overlap (compile_ahead's thread while the step samples) or nest (traces)
  count once: the total equals the union of their spans (a fine grid as the reference), so a step's
  time/compile never exceeds its time/step."""
  rng = np.random.default_rng(0)
  for _ in range(50):
    monkeypatch.setattr(metrics_writer, "_compile_spans", [])
    spans = [(s, s + d) for s, d in zip(rng.uniform(0, 10, 8), rng.uniform(0, 3, 8))]
    total = sum(metrics_writer._cover(s, e) for s, e in spans)
    grid = np.linspace(0, 14, 140_001)
    covered = np.zeros_like(grid, bool)
    for s, e in spans:
      covered |= (grid >= s) & (grid <= e)
    np.testing.assert_allclose(total, covered.mean() * 14, atol=1e-3)


def tb_texts(logdir):
  """{(tag, step): text} of the TensorBoard text summaries under `<logdir>/tb` (tensorboardX names
  a text tag `<tag>/text_summary`)."""
  out = {}
  for path in glob.glob(str(logdir / "tb" / "events.*")):
    for ev in _tb_events(path):
      for v in ev.summary.value:
        if v.metadata.plugin_data.plugin_name == "text":
          out[(v.tag.split("/")[0], ev.step)] = v.tensor.string_val[0].decode("utf-8")
  return out


def test_text_goes_to_tensorboard_and_tables_nowhere_without_wandb(tmp_path):
  w = metrics_writer.MetricsWriter(tmp_path, console=False)
  w.write(1, {"loss": 1.0})
  w.write_text(1, "rollouts", "**group 0** · reward 1")
  w.write_table(1, "rollouts", ["a"], [[1]])  # no W&B: nothing, no error
  w.close()
  assert tb_texts(tmp_path) == {("rollouts", 1): "**group 0** · reward 1"}
  assert not (tmp_path / "wandb").exists()


def test_wandb_asked_for_but_missing_names_the_field(tmp_path, monkeypatch):
  monkeypatch.setitem(sys.modules, "wandb", None)  # `import wandb` raises ImportError
  with pytest.raises(ImportError, match=r"logging\.wandb\.project='demo'.*pip install wandb"):
    metrics_writer.MetricsWriter(tmp_path, console=False, wandb_options={"project": "demo"})


def test_wandb_offline_gets_the_scalars_and_the_table(tmp_path, monkeypatch):
  wandb = pytest.importorskip("wandb")
  monkeypatch.setenv("WANDB_MODE", "offline")
  monkeypatch.setenv("WANDB_SILENT", "true")
  monkeypatch.setenv("WANDB_CONFIG_DIR", str(tmp_path / "wandb_config"))
  options = {"project": "demo", "entity": "", "name": "", "mode": "offline"}
  w = metrics_writer.MetricsWriter(tmp_path, console=False, wandb_options=options,
                                   run_config={"seed": 0})
  w.write(1, {"reward/mean": 0.25})
  w.write_table(1, "rollouts", ["completion", "reward"], [["Paris", 1.0], ["Lyon", 0.0]])
  w.write(2, {"reward/mean": 0.75})
  w.close()
  wandb.teardown()  # stops W&B's service process, which writes the run's log out
  runs = glob.glob(str(tmp_path / "wandb" / "offline-run-*"))
  assert len(runs) == 1
  run_id = (tmp_path / "wandb_run_id").read_text()
  assert runs[0].endswith(run_id)  # a resumed writer continues this run
  # The run's transaction log holds each history row's keys and JSON values as protobuf strings.
  log = open(glob.glob(f"{runs[0]}/run-*.wandb")[0], "rb").read()
  assert b"reward/mean" in log and b"0.75" in log
  table, = glob.glob(f"{runs[0]}/files/media/table/rollouts_1_*.table.json")
  assert json.load(open(table)) == {"columns": ["completion", "reward"],
                                    "data": [["Paris", 1.0], ["Lyon", 0.0]]}
