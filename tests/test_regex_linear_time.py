"""Regular expressions on untrusted text (judge replies and errors, trace content, DuckDB messages, eval files) fail
in linear time. Each rewritten pattern is compared with the one it replaced on a table of inputs and on generated
ones, then run on a text of a million characters built to make the old one backtrack (quadratic: from half a
minute to hours). Nothing is timed here."""

from __future__ import annotations

import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracegrade.criteria import trajectory_db
from tracegrade.ingest import settings as settings_module
from tracegrade.judges import client, failures, parsing, prompts
from tracegrade.models import file_text

WORST = 1_000_000  # characters in each worst case

OLD_FENCE = re.compile(r"```[a-zA-Z0-9_-]*\s*\n?(.*?)```", re.DOTALL)
OLD_THINKING = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.DOTALL | re.IGNORECASE)
OLD_MARKER = re.compile(r"<<<\s*/?[A-Za-z0-9_ -]*>>>")
OLD_RECEIVED = re.compile(r"Received: (.*?)\. Check the reverse proxy", re.DOTALL)
OLD_LOCATION = re.compile(r"\n*LINE (\d+): (.*)\n( *)\^+\s*$")
OLD_LITELLM_PREFIX = re.compile(r"^\s*(?:litellm\.)?[A-Za-z]*(?:Error|Exception)(?::| -)\s*")


def old_long_integer(digits: int) -> re.Pattern[str]:
    return re.compile(rf'"(?:[^"\\]|\\.)*"|(-?\d{{{digits},}})')


def new_long_integer(digits: int) -> re.Pattern[str]:
    return re.compile(file_text._LONG_INTEGER.format(digits))


def old_without_litellm_prefixes(text: str) -> str:
    previous = None
    while previous != text:
        previous, text = text, OLD_LITELLM_PREFIX.sub("", text, count=1)
    return text


def found(pattern: re.Pattern[str], text: str) -> list[tuple[tuple[int, int], tuple[str | None, ...]]]:
    return [(m.span(), m.groups()) for m in pattern.finditer(text)]


def first(match: re.Match[str] | None) -> tuple[str | None, ...] | None:
    return None if match is None else match.groups()


def texts(*pieces: str) -> st.SearchStrategy[str]:
    """Texts made of ``pieces``: the parts of a pattern, so that generated texts come close to matching."""
    return st.lists(st.sampled_from(pieces), max_size=40).map("".join)


FENCE_PIECES = ("```", "`", "json", "a", "-", "_", " ", "\t", "\n", "{", '"score": 1', "}")
THINKING_PIECES = (
    *("<think>", "</think>", "<THINK>", "</Think>", "<thinking>", "</thinking>", "<reasoning>", "</REASONING>"),
    *("<thinK>", "</reaſoning>", "<", "</", ">", "x", "\n", "think"),  # a Kelvin sign, a long s: case folding
)
MARKER_PIECES = ("<<<", "<", ">>>", ">", " ", "\t", "\n", "/", "END_", "a", "-", "9")
RECEIVED_PIECES = ("Received: ", "Received:", ". Check the reverse proxy", ". Check", "'x'", ".", " ", "\n")
LOCATION_PIECES = ("\n", "LINE 1: ", "LINE 12: ", "SELECT x", "...", " ", "^", "^^^", "\t", "Error")
INTEGER_PIECES = ('"', "\\", "1", "12", "-", " ", ",", "a", "\n", "[", "]")
LITELLM_PIECES = ("litellm.", "Error", "Exception", "RateLimit", ":", " -", " ", "\n", "x", "-", "OpenAI")


FENCE_TABLE = [
    'prose ```json\n{"score": 1}\n``` more',
    "```\n{}\n```",
    "```json{}```",
    "```py  \n\n  x```",
    "``` a b```",
    "```````",
    "```" + " " * 10,
    "```json",
    "no fence",
    "```a```b```c```",
]


@pytest.mark.parametrize("text", FENCE_TABLE)
def test_fence_finds_the_blocks_it_found(text: str) -> None:
    assert found(parsing._FENCE, text) == found(OLD_FENCE, text)


@settings(max_examples=200, deadline=None)
@given(texts(*FENCE_PIECES))
def test_fence_agrees_with_the_old_pattern_on_generated_replies(text: str) -> None:
    assert found(parsing._FENCE, text) == found(OLD_FENCE, text)


@pytest.mark.parametrize("tail", [" ", "\n", "a", "json "])
def test_fence_fails_in_linear_time_without_a_closing_fence(tail: str) -> None:
    with pytest.raises(parsing.UnreadableReply, match="no JSON object"):
        parsing.extract_json_object("```" + tail * (WORST // len(tail)) + "x")


THINKING_TABLE = [
    '<think>draft</think>{"score": 1}',
    "<THINK>a</think>b<thinking>c</THINKING>d",
    "<think>unclosed {} <reasoning>r</reasoning> end",
    "<think><think>x</think></think>",
    "<thinking>x</think>",
    "<reasoning>a</reasoning><reasoning>b",
    "<thinK>kelvin</think>",
    "<reaſoning>long s</reasoning>",
    "",
]


@pytest.mark.parametrize("text", THINKING_TABLE)
def test_thinking_blocks_are_removed_as_before(text: str) -> None:
    assert parsing._without_thinking(text) == OLD_THINKING.sub("", text)


@settings(max_examples=200, deadline=None)
@given(texts(*THINKING_PIECES))
def test_thinking_removal_agrees_with_the_old_pattern_on_generated_replies(text: str) -> None:
    assert parsing._without_thinking(text) == OLD_THINKING.sub("", text)


def test_thinking_removal_is_linear_on_openers_without_closers() -> None:
    text = ("<think>" + "<Reasoning>x") * (WORST // 19)
    with pytest.raises(parsing.UnreadableReply, match="no JSON object"):
        parsing.extract_json_object(text)
    assert parsing._without_thinking(text) == text


MARKER_TABLE = ["<<<TOOL_x>>>", "<<< /END_ab >>>", "<<<\t\n/x>>>", "<<<  a  >>>", "<<<<>>>>", "<<< / >>>", "<<<  "]


@pytest.mark.parametrize("text", MARKER_TABLE)
def test_fence_markers_are_stripped_as_before(text: str) -> None:
    assert prompts._MARKER.sub("", text) == OLD_MARKER.sub("", text)


@settings(max_examples=200, deadline=None)
@given(texts(*MARKER_PIECES))
def test_marker_agrees_with_the_old_pattern_on_generated_values(text: str) -> None:
    assert found(prompts._MARKER, text) == found(OLD_MARKER, text)


def test_marker_fails_in_linear_time_on_a_run_of_spaces() -> None:
    value = "<<<" + " " * WORST
    assert prompts.strip_fence_markers(value) == "<<" + " " * WORST  # the run of three angles is cut to two


RECEIVED_TABLE = [
    "Empty or invalid response from LLM endpoint. Received: 'oops'. Check the reverse proxy or API base",
    "Received: a. Check the reverse proxy. Received: b. Check the reverse proxy",
    "Received: . Check the reverse proxy",
    "Received: 'x' Check the reverse proxy",
    "xReceived: Received: y. Check the reverse proxy",
    "no body quoted",
]


@pytest.mark.parametrize("text", RECEIVED_TABLE)
def test_received_reads_the_body_it_read(text: str) -> None:
    assert first(failures._RECEIVED.match(text)) == first(OLD_RECEIVED.search(text))


@settings(max_examples=200, deadline=None)
@given(texts(*RECEIVED_PIECES))
def test_received_agrees_with_the_old_pattern_on_generated_messages(text: str) -> None:
    assert first(failures._RECEIVED.match(text)) == first(OLD_RECEIVED.search(text))


def test_received_fails_in_linear_time_without_its_tail() -> None:
    error = Exception(f"{failures._NOT_A_COMPLETION[0]}. " + "Received: " * (WORST // 10))
    reply = failures.malformed_reply(error, "chat")
    assert reply is not None and not reply.quoted  # litellm's words, no quoted body


LOCATION_TABLE = [
    'Parser Error: syntax error at or near "FORM"\n\nLINE 1: EXPLAIN SELECT * FORM spans\n                         ^',
    "Binder Error: x\nLINE 2: ... WHERE y\n               ^^^^^  \n",
    "LINE 1: x\n^",
    "\n\n\nLINE 3: a\n  ^\nmore",
    "no location",
]


@pytest.mark.parametrize("message", LOCATION_TABLE)
def test_location_is_read_as_before(message: str) -> None:
    assert found(trajectory_db._LOCATION, message) == found(OLD_LOCATION, message)


@settings(max_examples=200, deadline=None)
@given(texts(*LOCATION_PIECES))
def test_location_agrees_with_the_old_pattern_on_generated_messages(message: str) -> None:
    assert found(trajectory_db._LOCATION, message) == found(OLD_LOCATION, message)


def test_location_fails_in_linear_time_on_a_run_of_newlines() -> None:
    message = "Conversion Error: Could not convert string '" + "\n" * WORST + "' to INT32"
    assert trajectory_db._located(message, "SELECT 1").line is None


INTEGER_TABLE = ['[1234, "5678"]', '{"a": -12345}', '"\\"1234" 99999', "123-4567", "1234", '"12345', "12 -34567 8"]


@pytest.mark.parametrize("text", INTEGER_TABLE)
def test_long_integers_are_found_as_before(text: str) -> None:
    assert found(new_long_integer(4), text) == found(old_long_integer(4), text)


@settings(max_examples=200, deadline=None)
@given(texts(*INTEGER_PIECES), st.integers(min_value=1, max_value=5))
def test_long_integer_agrees_with_the_old_pattern_on_generated_files(text: str, digits: int) -> None:
    assert found(new_long_integer(digits), text) == found(old_long_integer(digits), text)


def test_long_integer_is_read_from_each_run_once() -> None:
    limit = 100_000  # the old pattern scanned a run of digits to its end from each of its digits
    saved = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(limit)
    try:
        with pytest.raises(file_text._InvalidJson, match=f"an integer of {limit + 1:,} digits at line 1, column"):
            file_text._parse_json("[" + "1" * limit + ", " + "1" * (limit + 1) + "]", strict=True)
    finally:
        sys.set_int_max_str_digits(saved)


LITELLM_TABLE = [
    "litellm.RateLimitError: RateLimitError: OpenAIException - slow down",
    "litellm.APIError: APIError: Error code: 500",
    "  Error:   Exception - x",
    "NotFoundError - gone",
    "plain text Error: kept",
    "ErrorError: x",
    "Error:",
]


@pytest.mark.parametrize("text", LITELLM_TABLE)
def test_litellm_prefixes_are_removed_as_before(text: str) -> None:
    assert client._LITELLM_PREFIXES.sub("", text, count=1) == old_without_litellm_prefixes(text)


@settings(max_examples=200, deadline=None)
@given(texts(*LITELLM_PIECES))
def test_litellm_prefixes_agree_with_the_old_loop_on_generated_errors(text: str) -> None:
    assert client._LITELLM_PREFIXES.sub("", text, count=1) == old_without_litellm_prefixes(text)


def test_litellm_prefixes_go_in_one_pass() -> None:
    request = client.JudgeRequest(model="openai/judge", prompt="p", cache_text="p", api_base="http://127.0.0.1:9/v1")
    message = client.failure_message(Exception("Error: " * (WORST // 7) + "kept"), request, attempts=1)
    assert message.endswith(": kept") and "Error:" not in message


# byte sizes (--max-request-bytes, --mapping-batch-bytes, their environment variables): \s* on both sides of an
# optional unit split a run of spaces every way before failing
OLD_SIZE = re.compile(r"^\s*(\d+)\s*([kmg]i?b?|b)?\s*$", re.IGNORECASE)
SIZE_PIECES = ("1", "6", " ", "\t", "k", "M", "i", "B", "b", "g", "x", "-")


@settings(max_examples=300, deadline=None)
@given(texts(*SIZE_PIECES))
def test_byte_sizes_are_read_as_before(text: str) -> None:
    assert first(settings_module._SIZE.match(text)) == first(OLD_SIZE.match(text))


def test_a_byte_size_fails_in_linear_time_on_a_run_of_spaces() -> None:
    with pytest.raises(ValueError, match="is not a size"):
        settings_module.parse_byte_size("1" + " " * WORST + "x")
