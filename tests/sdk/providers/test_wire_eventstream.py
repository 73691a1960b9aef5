"""AWS event streams: tracely's encoder against botocore's own parser (``providers.http._eventstream``),
and recorded events written back as the same bytes (``_exchange.eventstream_events`` / ``_pieces``)."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tracely_sdk.providers.http import _eventstream
from tracely_sdk.providers.http._exchange import eventstream_events, eventstream_pieces

names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40).filter(
    lambda n: len(n.encode()) < 256
)
values = st.one_of(
    st.text(st.characters(blacklist_categories=("Cs",)), max_size=200),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.binary(max_size=200),
)
messages = st.lists(
    st.tuples(st.dictionaries(names, values, max_size=6), st.binary(max_size=2000)), max_size=6
)


@given(messages)
def test_what_botocore_reads_of_an_encoded_stream_is_what_was_encoded(
    sent: list[tuple[dict[str, Any], bytes]],
) -> None:
    wire = b"".join(_eventstream.encode(headers, payload) for headers, payload in sent)
    assert _eventstream.messages(wire) == sent


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**9), 10**9) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
recorded = st.lists(
    st.fixed_dictionaries(
        {
            "headers": st.dictionaries(
                names,
                st.one_of(st.text(max_size=30), st.booleans(), st.integers(0, 2**40)),
                max_size=4,
            ),
            "data": st.dictionaries(st.text(max_size=8), json_values, max_size=4),
        }
    ),
    max_size=5,
)


@given(recorded)
def test_recorded_events_are_served_as_bytes_that_read_back_as_the_same_events(
    events: list[dict[str, Any]],
) -> None:
    assert eventstream_events(b"".join(eventstream_pieces(events))) == events


def test_a_byte_header_is_recorded_as_base64_and_written_back_as_bytes() -> None:
    wire = _eventstream.encode({":id": b"\x00\xffab"}, b"not json \xff")
    (event,) = eventstream_events(wire)
    assert event == {"headers": {":id": {"base64": "AP9hYg=="}}, "base64": "bm90IGpzb24g/w=="}
    assert eventstream_pieces([event]) == [wire]


def test_a_message_whose_crc_does_not_match_is_refused_naming_the_stream() -> None:
    wire = bytearray(_eventstream.encode({":event-type": "messageStart"}, b'{"role":"user"}'))
    wire[-1] ^= 0xFF
    with pytest.raises(ValueError, match="not an AWS event stream"):
        _eventstream.messages(bytes(wire))


def test_a_message_cut_short_at_the_end_is_left_out() -> None:
    first = _eventstream.encode({":event-type": "messageStart"}, b"{}")
    second = _eventstream.encode({":event-type": "messageStop"}, b"{}")
    assert _eventstream.messages(first + second[:-5]) == [({":event-type": "messageStart"}, b"{}")]


def test_the_frame_is_awss_prelude_headers_payload_and_crcs() -> None:
    wire = _eventstream.encode({"a": "b"}, b"xy")
    total, headers_length = struct.unpack("!II", wire[:8])
    assert total == len(wire) == 12 + headers_length + 2 + 4
    assert wire[12 : 12 + headers_length] == b"\x01a\x07\x00\x01b"


@pytest.mark.parametrize(
    ("headers", "problem"),
    [({"": "x"}, "1 to 255 bytes"), ({"a": 1.5}, "is not text"), ({"a": None}, "is not text")],
)
def test_a_header_that_cannot_be_framed_is_refused_with_what_is_wrong(
    headers: dict[str, Any], problem: str
) -> None:
    with pytest.raises(ValueError, match=problem):
        _eventstream.encode(headers, b"")


def test_a_recorded_event_without_headers_is_refused() -> None:
    with pytest.raises(ValueError, match="headers as an object"):
        eventstream_pieces([{"data": {}}])
