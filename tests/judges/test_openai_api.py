"""The `openai` judge against a real loopback HTTP server that this test starts.

The server speaks OpenAI's /v1/chat/completions and answers with a tiny llama (SmolLM2's tokenizer and
chat template) through our own sampler, so a judge's replies can be checked against the same greedy
generations computed directly. Other modes of the same server fail on purpose: 503s (retries with
back-off), a 400 (no retry), and a hang (the timeout, then the reward pool's on_error policy).
No mock: real sockets, real JSON, a real model.
"""

import http.server
import json
import pickle
import threading
import time

import numpy as np
import pytest

from grounding_jax import judges
from grounding_jax import sampling
from grounding_jax.data.schema import Example
from grounding_jax.judges import prompts as jp
from grounding_jax.recipes import get_recipe, get_reward
from grounding_jax.rl import reward_pool
from grounding_jax.recipes.arena import judge as arena_judge
from grounding_jax.recipes.grace import judge as grace_judge

MAX_TOKENS = 4


class ChatServer:
  """A threaded loopback OpenAI-compatible server (`mode`: "serve", "flaky", "reject", "hang").

  "flaky" answers 503 (Retry-After: 0) to the first `failures` attempts of each conversation, then
  serves. "hang" holds every request until `close()`. It records each request's payload, headers and
  arrival time, and the most requests it held at once.
  """

  def __init__(self, model, tokenizer, mode="serve", failures=2):
    self.model, self.tokenizer, self.mode, self.failures = model, tokenizer, mode, failures
    self.payloads, self.headers, self.arrivals = [], [], []
    self.in_flight = self.max_in_flight = 0
    self._lock, self._generate_lock, self._release = threading.Lock(), threading.Lock(), threading.Event()
    self._seen: dict[str, int] = {}
    server = self

    class Handler(http.server.BaseHTTPRequestHandler):
      def log_message(self, *args):  # keep pytest output clean
        pass

      def do_POST(self):  # noqa: N802 (http.server's name)
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with server._lock:
          server.payloads.append(body)
          server.headers.append(dict(self.headers))
          server.arrivals.append((json.dumps(body["messages"]), time.monotonic()))
          server.in_flight += 1
          server.max_in_flight = max(server.max_in_flight, server.in_flight)
        try:
          server.respond(self, body)
        except (BrokenPipeError, ConnectionResetError):
          pass  # the client gave up (its timeout) before we answered
        finally:
          with server._lock:
            server.in_flight -= 1

    self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    self.httpd.daemon_threads = True
    self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
    threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

  def respond(self, handler, body):
    if self.path_ok(handler) and self.mode == "hang":
      self._release.wait(30)
      return
    key = json.dumps(body["messages"])
    with self._lock:
      attempt = self._seen[key] = self._seen.get(key, 0) + 1
    if self.mode == "reject":
      return self.send(handler, 400, {"error": {"message": "model 'nope' does not exist"}})
    if self.mode == "flaky" and attempt <= self.failures:
      return self.send(handler, 503, {"error": {"message": "overloaded"}}, {"Retry-After": "0"})
    text = self.generate(body["messages"], body["max_tokens"])
    self.send(handler, 200, {"id": "cmpl-0", "object": "chat.completion", "model": body["model"],
                             "choices": [{"index": 0, "finish_reason": "length",
                                          "message": {"role": "assistant", "content": text}}]})

  def path_ok(self, handler):
    return handler.path == "/v1/chat/completions"

  def generate(self, messages, max_tokens):
    prompt = self.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    with self._generate_lock:  # one generation at a time: the sampler's cache pool is per process
      return sampling.generate(self.model, self.tokenizer, [prompt], max_new_tokens=max_tokens).texts[0]

  @staticmethod
  def send(handler, status, obj, headers=()):
    data = json.dumps(obj).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    for k, v in dict(headers).items():
      handler.send_header(k, v)
    handler.end_headers()
    handler.wfile.write(data)

  def close(self):
    self._release.set()
    self.httpd.shutdown()
    self.httpd.server_close()


@pytest.fixture(scope="module")
def tiny_chat_llm(tiny_smollm2_dir):
  from grounding_jax import models
  return models.load_pretrained(tiny_smollm2_dir), models.load_tokenizer(tiny_smollm2_dir)


@pytest.fixture
def server_factory(tiny_chat_llm):
  servers = []

  def make(mode="serve", **kw):
    servers.append(ChatServer(*tiny_chat_llm, mode=mode, **kw))
    return servers[-1]

  yield make
  for s in servers:
    s.close()


def _reference(server, conversations):
  """The replies our sampler gives for the same messages, one greedy generation each."""
  return [server.generate(m, MAX_TOKENS) for m in conversations]


QUESTIONS = ["Capital of France?", "Capital of Italy?", "Who wrote Hamlet?", "Largest planet?"]
PREDICTIONS = ["Lyon", "Rome", "Marlowe", "Saturn"]
GOLDS = [["Paris"], ["rome"], ["Shakespeare"], ["Jupiter"]]


def test_openai_judge_sends_messages_concurrently_and_matches_our_sampler(server_factory, monkeypatch):
  server = server_factory("serve")
  monkeypatch.setenv("GJ_TEST_JUDGE_KEY", "secret-1")
  judge = judges.build({"kind": "openai", "base_url": server.url, "model": "tiny-judge",
                        "api_key_env": "GJ_TEST_JUDGE_KEY", "style": arena_judge.STYLE, "parser": "arena",
                        "max_tokens": MAX_TOKENS, "concurrency": 4})
  verdicts = judge(QUESTIONS, PREDICTIONS, GOLDS)
  asked = [0, 2, 3]  # row 1 is an exact match: never sent
  conversations = [arena_judge.arena_messages(QUESTIONS[i], GOLDS[i], PREDICTIONS[i]) for i in asked]
  # The server received chat messages as messages (roles and contents), not one rendered string.
  assert sorted((json.dumps(p["messages"]) for p in server.payloads)) == sorted(map(json.dumps, conversations))
  assert all(p["model"] == "tiny-judge" and p["max_tokens"] == MAX_TOKENS and p["temperature"] == 0.0
             for p in server.payloads)
  assert all(h["Authorization"] == "Bearer secret-1" for h in server.headers)
  replies = _reference(server, conversations)
  expected = np.ones(4, bool)
  expected[asked] = [bool(arena_judge.parse_yes_no_arena(r)) for r in replies]
  np.testing.assert_array_equal(verdicts, expected)
  # The backend's own replies are the sampler's text, byte for byte, and come back in request order.
  backend = judge.backend
  assert backend.chat(conversations) == replies
  assert backend.stats["requests"] == 3 and backend.stats["cache_hits"] == 3  # the second call: cached
  assert server.max_in_flight == 3  # the three requests were open at once (concurrency=4)
  assert judge.stats["judge_calls"] == 3 and judge.stats["em_short_circuit"] == 1
  judge(QUESTIONS, PREDICTIONS, GOLDS)  # the judge's verdict cache: no new request
  assert len(server.payloads) == 3
  clone = pickle.loads(pickle.dumps(backend))  # a reward holding it can go to a worker process
  assert clone.chat(conversations[:1]) == replies[:1]  # asked again: the copy's cache starts empty
  assert clone.stats["requests"] == 1 and len(server.payloads) == 4


def test_retries_back_off_and_a_rejected_request_is_not_retried(server_factory):
  server = server_factory("flaky", failures=2)
  backend = judges.OpenAIBackend(server.url, "tiny-judge", max_tokens=MAX_TOKENS, max_retries=3,
                                 backoff_seconds=0.05, concurrency=2)
  conversations = [jp.nli_messages("the cat sat", "a cat sat"), jp.nli_messages("a dog ran", "a cat")]
  assert backend.chat(conversations) == _reference(server, conversations)
  assert backend.stats["requests"] == 6 and backend.stats["retries"] == 4
  assert backend.stats["http_errors"] == 4 and backend.stats["failures"] == 0
  assert len(server.payloads) == 6
  for messages in conversations:  # each conversation: 503, 503, 200 — after ≥ 0.05 s, then ≥ 0.1 s
    times = [t for key, t in server.arrivals if key == json.dumps(messages)]
    assert len(times) == 3 and times[1] - times[0] >= 0.05 and times[2] - times[1] >= 0.1

  rejecting = server_factory("reject")
  backend = judges.OpenAIBackend(rejecting.url, "nope", max_retries=3, backoff_seconds=0.05)
  with pytest.raises(judges.JudgeRequestError, match="HTTP 400.*does not exist"):
    backend.chat(conversations[:1])
  assert backend.stats["requests"] == 1 and backend.stats["retries"] == 0 and len(rejecting.payloads) == 1


def _example(q, answer):
  return Example(question=q, answers=(answer,), id=q)


def test_a_hanging_server_times_out_and_the_reward_pool_applies_on_error(server_factory):
  server = server_factory("hang")
  spec = {"kind": "openai", "base_url": server.url, "model": "tiny-judge", "style": "truthrl",
          "timeout_seconds": 0.3, "max_retries": 1, "backoff_seconds": 0.05, "concurrency": 4}
  completions = ["<think>x</think> \\boxed{Paris}", "\\boxed{I don't know}", "\\boxed{Lyon}",
                 "\\boxed{Milan}"]
  examples = [_example("q0", "Paris"), _example("q1", "Paris"), _example("q2", "Paris"),
              _example("q3", "Rome")]
  reward = pickle.loads(pickle.dumps(get_reward("truthrl", judge=spec)))  # as a worker receives it
  pool = reward_pool.RewardPool([("truthrl", 1.0, reward)], num_workers=0, on_error="skip")
  result = pool(completions, examples)
  # Rows 0 (exact match) and 1 (abstention) never reach the judge and keep their scores; the rows the
  # judge had to decide failed, and the caller drops their groups ("skip").
  np.testing.assert_array_equal(result.failed, [False, False, True, True])
  assert result.values["reward"][:2].tolist() == [1.0, 0.0]
  assert all("no reply within timeout_seconds=0.3" in e for e in result.errors)
  stats = reward.judge.load().backend.stats
  # Two questions asked at once (the first two arrivals are different questions; one at a time, the
  # second would be the first one's retry), each tried twice (1 retry); the pool's row-by-row
  # re-scoring then fails fast (cool-down) without another request.
  assert server.arrivals[0][0] != server.arrivals[1][0] and server.max_in_flight == 4
  assert stats["requests"] == 4 and stats["timeouts"] == 4 and stats["retries"] == 2
  assert stats["failures"] == 2 and stats["fast_failures"] == 2 and len(server.payloads) == 4

  if "min" in reward_pool.ON_ERROR:  # on_error="min" (branch h4): failed rows score the floor, -1
    floor = reward_pool.RewardPool([("truthrl", 1.0, get_reward("truthrl", judge=spec))],
                                   num_workers=0, on_error="min")(completions, examples)
    assert floor.values["reward"].tolist() == [1.0, 0.0, -1.0, -1.0]

  strict = reward_pool.RewardPool([("truthrl", 1.0, get_reward("truthrl", judge=spec))],
                                  num_workers=0, on_error="raise")
  with pytest.raises(RuntimeError, match=r"(?s)reward failed on 2 row.*q2.*timeout_seconds=0.3"):
    strict(completions, examples)


def test_openai_spec_errors_name_the_option(monkeypatch):
  monkeypatch.delenv("GJ_NO_SUCH_KEY", raising=False)
  with pytest.raises(ValueError, match=r"needs base_url=.*options\.judge\.base_url"):
    judges.lazy({"kind": "openai", "base_url": "", "model": "m"})
  with pytest.raises(ValueError, match=r"needs model="):
    judges.lazy({"kind": "openai", "base_url": "http://h:1/v1"})
  with pytest.raises(ValueError, match=r"GJ_NO_SUCH_KEY.*not set"):
    judges.lazy({"kind": "openai", "base_url": "http://h:1/v1", "model": "m",
                 "api_key_env": "GJ_NO_SUCH_KEY"})
  judge = judges.build({"kind": "openai", "base_url": "http://h:1/v1", "model": "m", "style": grace_judge.STYLE})
  assert judge.backend.body == {"max_tokens": 10, "temperature": 0.0}  # GRACE's judge decoding
  # A spec naming no style gets its recipe's first (the paper's own); judges/ alone needs one.
  paper = judges.build(get_recipe("truthrl").judge_spec({"kind": "openai", "base_url": "http://h:1/v1",
                                                         "model": "m"}))
  assert paper.backend.body == {"max_tokens": 512, "temperature": 0.0, "top_p": 0.9}  # TruthRL's
  with pytest.raises(ValueError, match="needs style="):
    judges.build({"kind": "openai", "base_url": "http://h:1/v1", "model": "m"})
