"""A judge served over HTTP by vLLM or any OpenAI-compatible server (`POST {base_url}/chat/completions`).

  backend = OpenAIBackend("http://judge:8000/v1", "meta-llama/Llama-3.3-70B-Instruct",
                          api_key_env="JUDGE_API_KEY", max_tokens=512, top_p=0.9)
  replies = backend.chat([[{"role": "user", "content": "…"}], ...])   # one reply per message list

The judges (judges/llm.py) hand it chat messages, not rendered text: the server applies its own chat
template. Requests run concurrently in a thread pool (`concurrency`); each has a `timeout_seconds`
and is retried on connection errors, timeouts, 408/409/429 and 5xx with exponential back-off
(`backoff_seconds` · 2^attempt, capped at `max_backoff_seconds`, at least the server's Retry-After).
Any other 4xx (a wrong model name, a bad key) fails at once: retrying cannot fix it.

A request that still fails raises `JudgeRequestError`, so the reward calling the judge raises and the
reward pool's `on_error` policy decides what the batch's affected rows score (rl/reward_pool.py).
After such a failure the backend fails fast for `cooldown_seconds` (no request is sent), so the pool's
row-by-row re-scoring of a failed chunk costs no further timeouts. Successful replies are cached
(bounded, judges.base.remember) by their request, so a batch retried after a partial failure re-sends
only what failed; the judges' own verdict caches sit in front of this one.

`stats` counts requests (HTTP attempts), retries, timeouts, http_errors, connection_errors, failures
(requests that gave up), fast_failures and cache_hits. The backend pickles without its HTTP sessions
and thread pool, and with an empty cache (a reward holding it can be sent to worker processes).
"""

from __future__ import annotations

import collections
import concurrent.futures
import json
import os
import random
import threading
import time
from typing import Any, Mapping, Sequence

import requests

from grounding_jax.judges import prompts as prompts_lib
from grounding_jax.judges.base import remember

_RETRY_STATUS = frozenset({408, 409, 429, 500, 502, 503, 504})


class JudgeRequestError(RuntimeError):
  """A judge request failed after its retries (or while the backend cools down after a failure)."""


class OpenAIBackend:
  """Chat completions from an OpenAI-compatible endpoint; see the module docstring.

  Args:
    base_url: the API root including the version, e.g. "http://localhost:8000/v1" (vLLM's default).
    model: the served model name sent as "model".
    api_key_env: name of the environment variable holding the API key (sent as a Bearer token);
      None/"" sends no key (a local vLLM needs none). The key itself never enters a config.
    max_tokens, temperature, top_p: decoding of every request (top_p None = the server's default).
    timeout_seconds: per HTTP attempt (connect and read).
    max_retries: further attempts after the first; back-off between them as described above.
    concurrency: requests in flight at once.
    cooldown_seconds: after a request gives up, calls fail at once for this long (0 = never).
    cache: keep successful replies (bounded) keyed by the request.
    extra_body: more JSON fields for every request (e.g. {"seed": 0} or vLLM's sampling options).
  """

  def __init__(self, base_url: str, model: str, *, api_key_env: str | None = None,
               max_tokens: int = 32, temperature: float = 0.0, top_p: float | None = None,
               timeout_seconds: float = 60.0, max_retries: int = 3, backoff_seconds: float = 1.0,
               max_backoff_seconds: float = 30.0, concurrency: int = 16,
               cooldown_seconds: float = 30.0, cache: bool = True,
               extra_body: Mapping[str, Any] | None = None):
    if not base_url or not str(base_url).startswith(("http://", "https://")):
      raise ValueError(f"judge base_url={base_url!r}: give the server's API root, e.g. "
                       "http://judge-host:8000/v1")
    if not model:
      raise ValueError("judge model is empty: give the served model name, e.g. "
                       "meta-llama/Llama-3.3-70B-Instruct")
    if api_key_env and api_key_env not in os.environ:
      raise ValueError(f"judge api_key_env={api_key_env!r}: that environment variable is not set; "
                       f"export {api_key_env}=<key>, or set api_key_env='' for a server without keys")
    for name, value, low in (("max_tokens", max_tokens, 1), ("concurrency", concurrency, 1),
                             ("max_retries", max_retries, 0)):
      if int(value) < low:
        raise ValueError(f"judge {name}={value} must be >= {low}")
    if timeout_seconds <= 0 or backoff_seconds < 0 or cooldown_seconds < 0:
      raise ValueError(f"judge timeout_seconds={timeout_seconds} must be > 0 and backoff_seconds="
                       f"{backoff_seconds}, cooldown_seconds={cooldown_seconds} >= 0")
    self.url = str(base_url).rstrip("/") + "/chat/completions"
    self.model, self.api_key_env = model, api_key_env or None
    self.body = {"max_tokens": int(max_tokens), "temperature": float(temperature),
                 **({} if top_p is None else {"top_p": float(top_p)}), **dict(extra_body or {})}
    self.timeout_seconds, self.max_retries = float(timeout_seconds), int(max_retries)
    self.backoff_seconds, self.max_backoff_seconds = float(backoff_seconds), float(max_backoff_seconds)
    self.concurrency, self.cooldown_seconds = int(concurrency), float(cooldown_seconds)
    self._cache: dict[str, str] | None = {} if cache else None
    self.stats: collections.Counter[str] = collections.Counter()
    self._setup_runtime()

  def _setup_runtime(self) -> None:
    self._lock = threading.Lock()
    # One requests.Session per pool thread: Sessions are not documented as thread-safe.
    self._local = threading.local()
    self._pool: concurrent.futures.ThreadPoolExecutor | None = None
    self._failed_at: float | None = None
    self._last_error = ""

  def __getstate__(self):
    state = {k: v for k, v in vars(self).items()
             if k not in ("_lock", "_local", "_pool", "_failed_at", "_last_error")}
    state["stats"] = collections.Counter()
    state["_cache"] = None if self._cache is None else {}  # a copy in a worker starts empty (and small)
    return state

  def __setstate__(self, state):
    vars(self).update(state)
    self._setup_runtime()

  def __repr__(self) -> str:
    return f"OpenAIBackend({self.url!r}, model={self.model!r})"

  # --- one request
  def _count(self, key: str, n: int = 1) -> None:
    with self._lock:
      self.stats[key] += n

  def _session(self) -> requests.Session:
    session = getattr(self._local, "session", None)
    if session is None:
      session = self._local.session = requests.Session()
    return session

  def _headers(self) -> dict[str, str]:
    headers = {"Content-Type": "application/json"}
    if self.api_key_env:
      headers["Authorization"] = f"Bearer {os.environ[self.api_key_env]}"
    return headers

  def _delay(self, attempt: int, retry_after: str | None) -> float:
    delay = min(self.backoff_seconds * 2 ** attempt, self.max_backoff_seconds)
    if retry_after:
      try:
        delay = max(delay, min(float(retry_after), self.max_backoff_seconds))
      except ValueError:
        pass  # an HTTP date: keep our own back-off
    return delay * (1.0 + 0.1 * random.random())  # a little jitter: concurrent retries spread out

  def _request(self, messages: prompts_lib.Messages) -> str:
    payload = {"model": self.model, "messages": list(messages), **self.body}
    error = ""
    for attempt in range(self.max_retries + 1):
      if attempt:
        self._count("retries")
      self._count("requests")
      retry_after = None
      try:
        response = self._session().post(self.url, json=payload, headers=self._headers(),
                                        timeout=self.timeout_seconds)
      except requests.Timeout:
        self._count("timeouts")
        error = f"no reply within timeout_seconds={self.timeout_seconds:g}"
      except requests.ConnectionError as e:
        self._count("connection_errors")
        error = f"cannot connect ({type(e).__name__}: {_first_line(e)})"
      else:
        if response.status_code == 200:
          return _reply_text(response, self.url)
        self._count("http_errors")
        error = f"HTTP {response.status_code}: {response.text[:300]}"
        if response.status_code not in _RETRY_STATUS:
          break  # a request the server rejects (model name, key, payload): retrying cannot help
        retry_after = response.headers.get("Retry-After")
      if attempt < self.max_retries:
        time.sleep(self._delay(attempt, retry_after))
    self._count("failures")
    raise JudgeRequestError(f"judge request to {self.url} (model {self.model!r}) failed after "
                            f"{attempt + 1} attempt(s): {error}")

  # --- a batch
  def chat(self, conversations: Sequence[prompts_lib.Messages]) -> list[str]:
    """One reply (the first choice's message content) per message list, in order.

    Raises:
      JudgeRequestError: a request failed after its retries, or the backend is cooling down after
        such a failure (the message names the URL and the last error).
    """
    out: list[str | None] = [None] * len(conversations)
    todo: dict[str, list[int]] = {}
    for i, messages in enumerate(conversations):
      key = json.dumps(messages, sort_keys=True, ensure_ascii=False)
      if self._cache is not None and key in self._cache:
        out[i] = self._cache[key]
        self._count("cache_hits")
      else:
        todo.setdefault(key, []).append(i)
    if todo:
      with self._lock:
        if self._failed_at is not None and time.monotonic() - self._failed_at < self.cooldown_seconds:
          self.stats["fast_failures"] += 1
          raise JudgeRequestError(
              f"judge at {self.url} failed {time.monotonic() - self._failed_at:.0f}s ago "
              f"({self._last_error}); not retried within cooldown_seconds={self.cooldown_seconds:g}")
      if self._pool is None:
        self._pool = concurrent.futures.ThreadPoolExecutor(self.concurrency,
                                                           thread_name_prefix="judge-http")
      futures = {key: self._pool.submit(self._request, conversations[idx[0]])
                 for key, idx in todo.items()}
      first_error: JudgeRequestError | None = None
      for key, future in futures.items():  # wait for all, so successes are cached before raising
        try:
          reply = future.result()
        except JudgeRequestError as e:
          first_error = first_error or e
          continue
        if self._cache is not None:
          with self._lock:
            remember(self._cache, key, reply)
        for i in todo[key]:
          out[i] = reply
      if first_error is not None:
        with self._lock:
          self._failed_at, self._last_error = time.monotonic(), str(first_error)
        raise first_error
    return out  # type: ignore[return-value]  (every entry is a str here)


def _first_line(e: BaseException) -> str:
  return str(e).splitlines()[0][:200] if str(e) else ""


def _reply_text(response: requests.Response, url: str) -> str:
  """choices[0].message.content of an OpenAI chat-completions reply (None content reads as "")."""
  try:
    return response.json()["choices"][0]["message"]["content"] or ""
  except (ValueError, KeyError, IndexError, TypeError) as e:
    raise JudgeRequestError(f"judge at {url} answered 200 without choices[0].message.content "
                            f"({type(e).__name__}); body: {response.text[:300]!r}") from None
