"""text.answer_sentence: the sentence of a paragraph that states an answer (MuSiQue's hops, NQ's gold
passage), on hand-written paragraphs whose right sentence is known."""

from grounding_jax import text

PARAGRAPH = ("Hall was born in Ashfield, Massachusetts. The formal study of adolescence began with "
             "G. Stanley Hall's book in 1904. Hall, who was the first president of the American "
             "Psychological Association, taught at Clark University.")
FIRST, SECOND, THIRD = text.split_sentences(PARAGRAPH)


def test_the_sentence_holding_the_answer_as_whole_words_wins():
  # "Hall's" holds "G. Stanley Hall" once punctuation is a space; no other sentence holds it whole.
  assert text.answer_sentence(PARAGRAPH, ["G. Stanley Hall"], "Who wrote the 1904 book?") == SECOND
  # "Clark" inside a word does not count: "Clarkson" is not "Clark".
  assert text.answer_sentence("Clarkson is a town. Clark is a county.", ["Clark"]) == "Clark is a county."


def test_among_answer_sentences_the_question_decides_then_the_order():
  question = "Who was the first president of the American Psychological Association?"
  assert text.answer_sentence(PARAGRAPH, ["Hall"], question) == THIRD
  assert text.answer_sentence(PARAGRAPH, ["Hall"], "") == FIRST  # no question words: the earliest
  assert text.answer_sentence(PARAGRAPH, ["Boston", "Clark University"], "") == THIRD  # any answer


def test_without_the_answer_the_question_then_the_first_sentence():
  # The annotation paraphrases ("America" is not in "American"): the closest sentence to the question.
  assert text.answer_sentence(PARAGRAPH, ["America"], "Which association was he president of?") == THIRD
  assert text.answer_sentence(PARAGRAPH, ["Boston"], "Which river?") == FIRST
  assert text.answer_sentence("   ", ["x"]) == ""
