"""sampling/tools.py: the tags of a tool call, and the text inserted after it."""

from grounding_jax.sampling import tools


def test_query_of_a_closed_call_only():
  fmt = tools.ToolFormat()
  assert fmt.query("think <search> capital of Avelia </search>") == "capital of Avelia"
  assert fmt.query("a <search>first</search> b <search>second</search>\n") == "second"
  assert fmt.query("<search>still open") is None
  assert fmt.query("no call </search>") is None
  assert fmt.query("<answer>x</answer>") is None


def test_wrap_puts_the_result_between_its_tags():
  fmt = tools.ToolFormat(result_open="<i>", result_close="</i>")
  assert fmt.wrap(tools.ToolResult("P1: Avelia.", ("p1",))) == "\n\n<i>P1: Avelia.</i>\n\n"


def test_inserted_spans_are_exactly_what_wrap_inserted_after_a_call():
  """The spans the rollout marks as not the policy's (the separators, tags and text `wrap` writes
  after a closed call), and nothing the policy wrote itself."""
  fmt = tools.ToolFormat()
  first, second = fmt.wrap(tools.ToolResult("Doc 1 Avelia.")), fmt.wrap(tools.ToolResult("Doc 2."))
  text = (f"<think>a</think><search> Avelia </search>{first}<think>b</think>"
          f"<search>Orsk</search>{second}<answer> Orsk </answer>")
  assert [text[s:e] for s, e in fmt.inserted_spans(text)] == [first, second]
  forged = "<answer> x </answer><information>Doc 9.</information><search>q</search>"
  assert fmt.inserted_spans(forged) == []  # a block not right after a call; a call without one
  assert fmt.inserted_spans("<search>q</search>\n\n<information>unclosed") == []
  no_separator = "<search>q</search> <information>r</information>done"
  assert [no_separator[s:e] for s, e in fmt.inserted_spans(no_separator)] == [
      " <information>r</information>"]
