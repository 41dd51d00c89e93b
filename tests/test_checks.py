"""Bad input, read the same way everywhere (issue 39, section 5; explorer.checks): link numbers in ASCII digits
only, a component's JSON within bounds before it is parsed, and Streamlit's own parse of a component's message
replaced by that bounded one (explorer.ui.messages)."""

from __future__ import annotations

import json

import pytest
from streamlit.proto.WidgetStates_pb2 import WidgetState

from explorer.checks import json_depth, message_value, whole_number

DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("7", 7),
        ("007", 7),
        ("123456", 123456),
        ("²", None),  # "²".isdigit() is True; int("²") raises
        ("٣", None),  # an Arabic-Indic three: int() reads it, a link's slide number is ASCII
        ("1234567", None),  # more digits than asked for
        ("9" * 5_000, None),  # int() refuses more than 4,300 digits
        ("", None),
        ("-1", None),
        (" 1", None),
        ("1.0", None),
        (None, None),
        (5, None),
    ],
)
def test_a_whole_number_is_a_few_ascii_digits(text, number):
    assert whole_number(text) == number


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"pressed": {"slide": 3, "seq": 1}}', {"pressed": {"slide": 3, "seq": 1}}),
        ('{"a": "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["}', {"a": "[" * 36}),  # brackets in a string do not nest
        ("{bad", None),  # malformed
        ('{"pressed": ', None),  # cut short
        (DEEP, None),  # 100,000 deep: a RecursionError inside json.loads
        ('{"a": ' * 20 + "1" + "}" * 20, None),  # deeper than a component's messages go
        ('"' + "x" * 70_000 + '"', None),  # longer than a component's messages go
        ("1" * 5_000, None),  # an int of 5,000 digits: json.loads raises ValueError
        (b'{"a": 1}', None),  # not text
        (None, None),
    ],
)
def test_a_component_message_is_parsed_within_bounds_or_reads_as_none(text, value):
    assert message_value(text) == value


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("1", 0),
        ("[[1], {}]", 2),
        ('["]]]", "\\"[[[["]', 1),  # an escaped quote does not end the string
        ('["\\\\", [[]]]', 3),  # an escaped backslash does not escape the quote after it
        (DEEP, 100_000),
    ],
)
def test_json_depth_counts_brackets_outside_strings(text, depth):
    assert json_depth(text) == depth


def unpacked(field: str, text: str):
    """What Streamlit's session state hands a widget's deserializer for a component's message."""
    from streamlit.runtime.state import session_state

    import explorer.ui  # noqa: F401  (installs the guard, as every page does)

    state = WidgetState(id="component")
    setattr(state, field, text)
    return session_state.unpack_widget_state_value(state)


@pytest.mark.parametrize("text", ["{bad", DEEP, '{"pressed": ' + "[" * 5_000 + "]" * 5_000 + "}"])
def test_streamlit_reads_a_components_bad_message_as_none(text):
    assert unpacked("json_value", text) is None
    assert unpacked("json_trigger_value", text) is None


def test_streamlit_reads_a_components_good_message_as_before():
    message = '{"pressed": {"slide": 3, "seq": 1}}'
    assert unpacked("json_value", message) == json.loads(message)
    assert unpacked("json_trigger_value", message) == message  # its deserializer parses it
    assert unpacked("string_value", "text") == "text"  # every other widget: Streamlit's own unpacking
