"""Where a copy of the customer's words may go: word-aligned pieces of their phrases, and free text
that began a number the customer said held to the rest of that phrase (`held_copy`)."""

from rl.chat.copy_spans import SaidSpans, held_copy

SAID = ("Hi, my order is <order_1>.", "Send it to 4149 Sunset Boulevard, Portland, OR 97217 please.")


def test_pieces_start_at_words_and_stay_inside_one_phrase():
    spans = SaidSpans(SAID)
    assert spans.viable("Sunset Bou") and spans.complete("Sunset Boulevard")
    assert not spans.viable("Boulevard, Portland")  # a copy never crosses a comma
    assert not spans.viable("unset")  # nor starts inside a word
    assert spans.heads("4149 Sunset") == {" "}


def test_a_name_run_is_the_capitalised_and_numbered_words_a_piece_starts_with():
    spans = SaidSpans(SAID)
    assert spans.ends_run("4149 Sunset Boulevard") and spans.ends_run("OR 97217") and spans.ends_run("97217")
    assert not spans.in_run("97217 please")  # a lowercase word ends the run
    assert spans.run_goes_on("4149 Sunset") and not spans.run_goes_on("4149 Sunset Boulevard")
    assert not spans.in_run("please")


def test_free_text_that_began_a_number_the_customer_said_copies_the_rest_of_the_phrase():
    spans = SaidSpans(SAID)
    assert held_copy("I'll send it to 414", spans) == "414"
    assert held_copy("I'll send it to 4149 Sun", spans) == "4149 Sun"
    assert held_copy("I'll send it to 4149 Sunset Boulevard", spans) is None  # the phrase is written
    assert held_copy("Your zip is 972", spans) == "972"
    assert held_copy("Your zip is 97217", spans) is None  # not "97217 please"


def test_other_numbers_and_text_stay_free():
    spans = SaidSpans(SAID)
    assert held_copy("I'll send it to 41", spans) is None  # too short to be one the customer gave
    assert held_copy("I'll send it to 4149 Lakeview", spans) is None  # not what they said: no copy
    assert held_copy("That is $4149", spans) is None  # not at a word start after a space
    assert held_copy("Order 12345", spans) is None
    assert held_copy("Sunset Bou", spans) is None  # words alone are never held
    assert held_copy("", SaidSpans(())) is None


def test_the_longest_copy_wins():
    spans = SaidSpans(("Ship it to 1234 1234 Road, Austin.",))
    assert held_copy("to 1234 1234 R", spans) == "1234 1234 R"
