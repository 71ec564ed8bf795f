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
