"""AWS event streams (``application/vnd.amazon.eventstream``): what Bedrock's streaming APIs send.

A stream is a run of binary messages, each framed as::

    total length (u32) | headers length (u32) | prelude CRC32 (u32)
    headers | payload | message CRC32 (u32)

a header being ``name length (u8) | name | type (u8) | value``. Reading uses botocore's own
parser (``botocore.eventstream.EventStreamBuffer``, which checks both CRCs), so a recording holds
what botocore read. A message is recorded (``_exchange.eventstream_events``) as its headers and
its payload (``data`` when JSON, else ``text``, else ``base64``)::

    {"headers": {":event-type": "contentBlockDelta", ":message-type": "event", ...},
     "data": {"contentBlockIndex": 0, "delta": {"text": "Hello"}}}

A header value is kept as botocore gives it: text, a boolean, an integer (any of the wire's
integer and timestamp types), or bytes (a byte array or UUID) as ``{"base64": ...}``.
Serialising writes each type back as the widest of its kind (an integer as a 64-bit long,
bytes as a byte array): the values botocore reads back are the same.
"""

from __future__ import annotations

import base64
import importlib.util
import struct
import zlib
from collections.abc import Mapping
from typing import Any

CONTENT_TYPE = "application/vnd.amazon.eventstream"

# The wire's header value types (what botocore's EventStreamHeaderParser reads).
_TRUE, _FALSE, _LONG, _BYTES, _STRING = 0, 1, 5, 6, 7
_MAX_HEADERS = 128 * 1024  # botocore's limits: a message beyond them is refused when read
_MAX_PAYLOAD = 24 * 1024 * 1024


def is_eventstream(content_type: str) -> bool:
    return content_type.split(";", 1)[0].strip().lower() == CONTENT_TYPE


def readable() -> bool:
    """Whether streams can be read into events here: botocore is installed. Without it (a
    client other than boto3's met one), a stream is recorded as its bytes, served the same."""
    return importlib.util.find_spec("botocore") is not None


# --------------------------------------------------------------------------- reading


def messages(content: bytes) -> list[tuple[dict[str, Any], bytes]]:
    """The (headers, payload) of each whole message of a stream, read by botocore (its
    ParserError, a ValueError here, for bytes that are not an event stream). A message cut
    short at the end (a stream the reader closed early) is not one: it is left out."""
    from botocore.eventstream import EventStreamBuffer, ParserError  # optional: see readable()

    buffer = EventStreamBuffer()
    buffer.add_data(content)
    try:
        read = [(dict(m.headers), bytes(m.payload)) for m in buffer]
    except ParserError as exc:
        raise ValueError(f"not an AWS event stream: {exc}") from exc
    return read


# --------------------------------------------------------------------------- writing


def _crc(data: bytes, start: int = 0) -> int:
    return zlib.crc32(data, start) & 0xFFFFFFFF


def _header_bytes(name: str, value: Any) -> bytes:
    raw_name = name.encode("utf-8")
    if not 0 < len(raw_name) < 256:
        raise ValueError(f"an event header name is 1 to 255 bytes, not {name!r}")
    head = struct.pack("!B", len(raw_name)) + raw_name
    if value is True:
        return head + struct.pack("!B", _TRUE)
    if value is False:
        return head + struct.pack("!B", _FALSE)
    if isinstance(value, int):
        return head + struct.pack("!Bq", _LONG, value)
    if isinstance(value, Mapping) and isinstance(value.get("base64"), str):
        data = base64.b64decode(value["base64"], validate=True)
        return head + struct.pack("!BH", _BYTES, len(data)) + data
    if isinstance(value, (bytes, bytearray)):
        return head + struct.pack("!BH", _BYTES, len(value)) + bytes(value)
    if isinstance(value, str):
        text = value.encode("utf-8")
        return head + struct.pack("!BH", _STRING, len(text)) + text
    raise ValueError(
        f"event header {name!r}: {value!r} is not text, a boolean, an integer or "
        '{"base64": ...} bytes'
    )


def header_value(value: Any) -> Any:
    """A header value as a recording keeps it: bytes as ``{"base64": ...}``, the rest as is."""
    if isinstance(value, (bytes, bytearray)):
        return {"base64": base64.b64encode(value).decode()}
    return value


def encode(headers: Mapping[str, Any], payload: bytes) -> bytes:
    """One event-stream message: ``headers`` (values as :func:`recorded_events` keeps them,
    or bytes) and ``payload``, framed with both CRC32s."""
    header_bytes = b"".join(_header_bytes(str(k), v) for k, v in headers.items())
    if len(header_bytes) > _MAX_HEADERS or len(payload) > _MAX_PAYLOAD:
        raise ValueError("an event-stream message's headers or payload are beyond AWS's limits")
    total = 12 + len(header_bytes) + len(payload) + 4
    prelude = struct.pack("!II", total, len(header_bytes))
    prelude += struct.pack("!I", _crc(prelude))
    message = prelude + header_bytes + payload
    return message + struct.pack("!I", _crc(message))


__all__ = ["CONTENT_TYPE", "encode", "header_value", "is_eventstream", "messages", "readable"]
