"""Retrievers as tools: what a search recipe's rollout calls at each `</search>` (sampling/tools.py).

    tool = tools.from_config(config.search, data_spec=config.stages[0].data)
    results = tool(["capital of Veltria", ...])      # one sampling.tools.ToolResult per query

  corpus.py     a corpus as JSONL ({"id", "title", "text"} rows) read and written; the synthetic
                world's corpus (without its withheld facts) and the real samples' paragraphs
  retriever.py  the in-process tools over data/retrieval.py's BM25 / dense / hybrid retrievers,
                Search-R1's passage format, an LRU cache keyed by (query, k)
  http.py       a retriever served over HTTP (Search-R1's retrieval-server protocol): timeouts,
                retries with back-off, on_error
  build.py      from_config: the `search.*` config section → a Tool

It sits beside sampling/ (layer 4): it reads data/ and text/, the sampler reads only the Tool
protocol, and recipes/, eval/ and rl/ above use it.
"""

from grounding_jax.tools.build import ON_ERROR, RETRIEVERS, from_config
from grounding_jax.tools.corpus import read_corpus, write_corpus
from grounding_jax.tools.http import HttpRetriever
from grounding_jax.tools.retriever import RetrieverTool, format_passages

__all__ = ["HttpRetriever", "ON_ERROR", "RETRIEVERS", "RetrieverTool", "format_passages",
           "from_config", "read_corpus", "write_corpus"]
