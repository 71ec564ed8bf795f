"""A judge server that is down for whole steps (rl/health.py): each step says how many rows its reward
lost, reward.on_error scores them, and after health.max_failed_steps such steps in a row the run
stops with one message and its newest checkpoint kept. The server is real: a loopback HTTP server
answering 500 to every request, or a port nobody listens on (connection refused)."""

import http.server
import json
import logging
import pathlib
import socket
import threading

import numpy as np
import pytest

import toy_task
from grounding_jax.judges import openai_api
from grounding_jax.rl import config as config_lib
from grounding_jax.rl import health


class Server500:
  """Answers every POST with HTTP 500; counts the requests."""

  def __init__(self):
    self.requests = 0
    server = self

    class Handler(http.server.BaseHTTPRequestHandler):
      def log_message(self, *args):
        pass

      def do_POST(self):  # noqa: N802 (http.server's name)
        self.rfile.read(int(self.headers["Content-Length"]))
        server.requests += 1
        body = json.dumps({"error": {"message": "internal error"}}).encode()
        self.send_response(500)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.httpd.daemon_threads = True
    self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
    threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

  def close(self):
    self.httpd.shutdown()
    self.httpd.server_close()


def _refused_url():
  with socket.socket() as s:  # bound, then closed: nothing listens there
    s.bind(("127.0.0.1", 0))
    return f"http://127.0.0.1:{s.getsockname()[1]}/v1"


class JudgedReward(toy_task.TargetShareReward):
  """The toy reward, granted only when the judge at `url` says yes (it never answers)."""

  def __init__(self, url):
    self.backend = openai_api.OpenAIBackend(url, "judge", timeout_seconds=5, max_retries=1,
                                            backoff_seconds=0.0, cooldown_seconds=0.0)

  def __call__(self, completions, examples, **extra):
    replies = self.backend.chat([[{"role": "user", "content": f"Is {c!r} good?"}] for c in completions])
    out = super().__call__(completions, examples)
    return {**out, "reward": out["reward"] * np.array([r.strip() == "yes" for r in replies])}


@pytest.mark.parametrize("down", ["http_500", "refused"])
def test_a_judge_down_for_every_step_stops_the_run_after_max_failed_steps(tiny_checkpoint, tmp_path,
                                                                         caplog, down):
  server = Server500() if down == "http_500" else None
  try:
    c = toy_task.toy_config(tmp_path, steps=3, prompts=2, group=4)  # test_health.py's programs
    c.health.max_failed_steps = 2
    reward = JudgedReward(server.url if server else _refused_url())
    tr = toy_task.make_trainer(tiny_checkpoint("llama"), tmp_path, c, reward=reward)
    with caplog.at_level(logging.WARNING), pytest.raises(health.FailedRewardsError) as info:
      tr.train()
  finally:
    if server:
      server.close()
  assert str(info.value) == (
      "stopping at step 2: the reward failed on every row of steps 1–2 (health.max_failed_steps=2): "
      "a judge server down or unreachable, or a reward that raises on every completion (the [reward] "
      f"lines above show the error); the newest checkpoint is {tmp_path / 'checkpoints' / '1'}. Fix "
      "it, then re-run with the same workdir to resume")
  lost = [r.getMessage() for r in caplog.records if "the reward failed on" in r.getMessage()]
  assert len(lost) == 2 and lost[0].startswith("step 1: the reward failed on 8 of 8 rows"), lost
  assert "every row failed in 2 step(s) in a row, the run stops at 2" in lost[1]
  rows = [json.loads(x) for x in (tmp_path / "logs" / "metrics.jsonl").read_text().splitlines()]
  assert [(r["step"], r["reward/failed_frac"], r["reward/mean"]) for r in rows] == \
      [(1, 1.0, 0.0), (2, 1.0, 0.0)]  # on_error="min": the reward's floor
  if server:  # each of the 8 rows asked, and retried once, in each of the 2 steps
    assert server.requests >= 2 * 8 * 2


def test_failed_steps_reset_on_a_step_with_a_reward_and_resume_with_the_checkpoint(caplog):
  class Latest:
    directory = pathlib.Path("/ck")

    def latest_step(self):
      return 3

  bounds = config_lib.default_config().health
  assert bounds.max_failed_steps == 3
  params = {"w": np.ones(4, np.float32)}
  h = health.RunHealth(bounds)
  h.start_stage(params)
  with caplog.at_level(logging.WARNING):
    for step, frac in enumerate([1.0, 1.0, 0.25, 1.0, 1.0], start=1):
      h.observe(step, {"reward/failed_frac": frac}, params, rows=8)
      h.stop_if_stuck(step, Latest())
  assert "step 3: the reward failed on 2 of 8 rows" in caplog.text and h.failed_steps == 2
  resumed = health.RunHealth(bounds, json.loads(json.dumps(h.state())))
  resumed.observe(6, {"reward/failed_frac": 1.0}, params, rows=8)
  with pytest.raises(health.FailedRewardsError, match="steps 4–6 .*newest checkpoint is /ck/3"):
    resumed.stop_if_stuck(6, Latest())
