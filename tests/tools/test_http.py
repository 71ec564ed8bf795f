"""The HTTP retriever against real loopback servers this test starts (http.server in a thread): one
serving BM25 over a tiny corpus with Search-R1's protocol, one that hangs past the timeout, one that
fails once and then answers, and one that rejects the request."""

import contextlib
import http.server
import json
import threading
import time

import pytest

from grounding_jax.data import retrieval
from grounding_jax.data.schema import Passage
from grounding_jax.sampling.tools import Withheld
from grounding_jax.tools import http as http_tool

CORPUS = [Passage("The capital of Veltria is Orsk.", title="Veltria", id="v1"),
          Passage("Tannex was founded by Mara Quell.", title="Tannex", id="t1"),
          Passage("The river Dun flows to the sea.", title="Dun", id="d1")]
BM25 = retrieval.BM25Retriever().index(CORPUS)
TIMEOUT_S = 0.2


def _bm25_result(body, with_scores):
  out = []
  for q in body["queries"]:
    docs = []
    for i, score in BM25.search(q, body["topk"]):
      p = CORPUS[i]
      doc = {"id": p.id, "contents": f"{p.title}\n{p.text}"}  # Search-R1: title on the first line
      docs.append({"document": doc, "score": score} if with_scores else doc)
    out.append(docs)
  return {"result": out}


@contextlib.contextmanager
def serve(respond):
  """A loopback server whose POST handler calls respond(body, calls) -> (status, reply dict)."""
  calls = []

  class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):  # pylint: disable=invalid-name
      body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
      calls.append(body)
      status, reply = respond(body, calls)
      data = json.dumps(reply).encode()
      try:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
      except (BrokenPipeError, ConnectionResetError):
        pass  # the client timed out and left

    def log_message(self, *args):
      pass

  server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
  server.daemon_threads = True
  thread = threading.Thread(target=server.serve_forever, kwargs=dict(poll_interval=0.02),
                            daemon=True)
  thread.start()
  try:
    yield f"http://127.0.0.1:{server.server_address[1]}/retrieve", calls
  finally:
    server.shutdown()
    server.server_close()


def test_results_from_a_search_r1_server_read_like_the_in_process_tool():
  with serve(lambda body, calls: (200, _bm25_result(body, with_scores=True))) as (url, calls):
    tool = http_tool.HttpRetriever(url, top_k=2, timeout_s=5.0)
    results = tool(["capital of Veltria", "Tannex founder", "capital of Veltria"])
    assert calls == [{"queries": ["capital of Veltria", "Tannex founder"], "topk": 2,
                      "return_scores": True}]  # one POST, each distinct query once
    assert results[0].text.startswith("Doc 1(Title: Veltria) The capital of Veltria is Orsk.\nDoc 2(")
    assert results[0].doc_ids[0] == "v1" and results[1].doc_ids[0] == "t1"
    assert results[2] == results[0] and not results[0].error
    tool(["capital of Veltria"])        # cached: no second request
    assert len(calls) == 1


def test_documents_without_scores_and_with_title_and_text_fields():
  def respond(body, calls):
    return 200, {"result": [[{"id": "x", "title": "T", "text": "body"}] for _ in body["queries"]]}
  with serve(respond) as (url, _):
    [r] = http_tool.HttpRetriever(url, top_k=1)(["q"])
  assert (r.text, r.doc_ids) == ("Doc 1(Title: T) body", ("x",))


def test_a_hanging_server_times_out_into_an_empty_result_or_raises():
  def hang(body, calls):
    time.sleep(4 * TIMEOUT_S)
    return 200, _bm25_result(body, with_scores=False)
  with serve(hang) as (url, calls):
    empty = http_tool.HttpRetriever(url, timeout_s=TIMEOUT_S, retries=1, backoff_s=0.01,
                                    on_error="empty")
    results = empty(["capital of Veltria", "Dun"])
    assert [r.text for r in results] == [http_tool.FAILED_TEXT] * 2
    assert all("timeout_s=0.2" in r.error and "2 attempt(s)" in r.error for r in results)
    assert results[0].doc_ids == () and len(calls) == 2 and empty.failures == 1
    assert empty.cache.get(("Dun", 3)) is None   # a failure is not cached
    strict = http_tool.HttpRetriever(url, timeout_s=TIMEOUT_S, retries=0, on_error="raise")
    with pytest.raises(http_tool.SearchRequestError, match="no reply within timeout_s=0.2"):
      strict(["Dun"])


def test_a_server_error_is_retried_and_a_rejected_request_is_not():
  def flaky(body, calls):
    return (503, {"error": "busy"}) if len(calls) == 1 else (200, _bm25_result(body, False))
  with serve(flaky) as (url, calls):
    [r] = http_tool.HttpRetriever(url, retries=2, backoff_s=0.01)(["Dun"])
    assert r.doc_ids[0] == "d1" and len(calls) == 2
  with serve(lambda body, calls: (400, {"error": "bad topk"})) as (url, calls):
    with pytest.raises(http_tool.SearchRequestError, match="HTTP 400.*bad topk"):
      http_tool.HttpRetriever(url, retries=3, backoff_s=0.01, on_error="raise")(["Dun"])
    assert len(calls) == 1
  with serve(lambda body, calls: (200, {"result": []})) as (url, _):
    [r] = http_tool.HttpRetriever(url)(["Dun"])
    assert "should hold 1 lists" in r.error


def test_bad_settings_are_named():
  with pytest.raises(ValueError, match="on_error"):
    http_tool.HttpRetriever("http://h/retrieve", on_error="skip")
  with pytest.raises(ValueError, match="endpoint"):
    http_tool.HttpRetriever("h:8000")


def test_withheld_documents_are_filtered_on_the_client_after_over_fetching():
  gold = Withheld.of([CORPUS[0]])
  with serve(lambda body, calls: (200, _bm25_result(body, with_scores=True))) as (url, calls):
    tool = http_tool.HttpRetriever(url, top_k=1, timeout_s=5.0)
    kept, removed = tool(["capital of Veltria", "capital of Veltria"], withheld=[Withheld(), gold])
    # One POST for both rows: the query once, over-fetched by the one withheld passage.
    assert calls == [{"queries": ["capital of Veltria"], "topk": 2, "return_scores": True}]
    assert kept.doc_ids == ("v1",) and removed.doc_ids != ("v1",) and len(removed.doc_ids) == 1
    # The best of the rest, as BM25 ranks the whole corpus.
    assert removed.doc_ids == (CORPUS[BM25.search("capital of Veltria", 2)[1][0]].id,)
    # Cached apart: each condition's result answers only that condition.
    assert tool(["capital of Veltria"], withheld=[gold]) == [removed]
    assert tool(["capital of Veltria"]) == [kept] and len(calls) == 1


def test_a_server_holding_duplicates_of_a_withheld_passage_is_asked_again():
  # The server holds the gold paragraph three times under other ids (matched by text): over-fetching
  # by one is not enough, so the client asks for twice as many until k others are left.
  dupes = [{"id": f"dup{i}", "contents": f"Veltria\n{CORPUS[0].text}"} for i in range(3)]
  rest = [{"id": p.id, "contents": f"{p.title}\n{p.text}"} for p in CORPUS[1:]]
  ranked = dupes + rest
  with serve(lambda body, calls: (200, {"result": [ranked[:body["topk"]]
                                                   for _ in body["queries"]]})) as (url, calls):
    [r] = http_tool.HttpRetriever(url, top_k=2)(["Veltria"], withheld=[Withheld.of([CORPUS[0]])])
  assert r.doc_ids == ("t1", "d1")
  assert [c["topk"] for c in calls] == [3, 6]
