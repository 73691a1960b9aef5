"""Checksums over everything replay uses, so that a case proves what it holds.

A seal maps each field replay uses to the SHA-256 of its canonical JSON (sorted keys, compact).
A digest per field, rather than one over all of them, lets a refusal name the field that was
changed and lets ``tracely cases reseal`` say what a hand edit changed.

- A stored case row is sealed over ``id``, ``entrypoint``, ``version``, ``input``,
  ``expected_output`` and ``bundle``; a stored version row over ``case_id``, ``version``,
  ``input``, ``expected_output`` and ``bundle``. The store seals on every write and checks on
  every read; a read for replay compares the stored seal with the seal of the row's texts
  (``seals_texts``) and checks field by field only when the two differ.
- A case file is sealed (its ``checksum`` object) over ``id``, ``entrypoint``, ``version`` and
  each history entry's ``version``, ``input``, ``expected_output`` and ``bundle``, named by path
  (``history[0].input``). Reading a file without a checksum, or with one that does not match,
  is refused; ``tracely cases reseal FILE`` seals a deliberate edit.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Mapping
from typing import Any

from tracely_sdk.store._model import dumps_json, dumps_json_bytes

__all__ = [
    "broken_fields",
    "case_file_fields",
    "case_row_fields",
    "seal",
    "seals_texts",
    "version_row_fields",
]

_VERSION_FIELDS = ("version", "input", "expected_output", "bundle")


def _digest(value: Any) -> str:
    # Every stored case is checked on every read: the bytes, not text decoded and encoded again.
    return _digest_of(dumps_json_bytes(value))


def _digest_of(text: bytes) -> str:
    if len(text) <= _SMALL:
        return _small_digest(text)
    return "sha256:" + hashlib.sha256(text).hexdigest()


# The cases of a suite share most of their small fields (an entrypoint, a version, a few
# inputs and outputs), and starting a hash costs more than hashing a few bytes: each small
# text is hashed once.
_SMALL = 512


@functools.lru_cache(maxsize=4096)
def _small_digest(text: bytes) -> str:
    return "sha256:" + hashlib.sha256(text).hexdigest()


def seal(fields: Mapping[str, Any]) -> dict[str, str]:
    """The seal of ``fields``: each field's name and the digest of its value."""
    return {name: _digest(value) for name, value in fields.items()}


def broken_fields(
    stored: Any, fields: Mapping[str, Any], texts: Mapping[str, str | None] | None = None
) -> list[str]:
    """The fields of ``fields`` that ``stored`` (a seal) does not vouch for, in order; fields
    the seal names that are not there any more come last. Empty when the seal matches.

    ``texts`` holds the JSON text a store read a field's value from, where it has it. The store
    wrote that text with ``dumps_json``, the encoding a digest is over, and such text reads
    back to a value that encodes to the same text: a digest that matches the text is the
    value's, so the value is not encoded again. Text that does not match (edited outside
    tracely, say, or cut short) is decided by the value, as without it.
    """
    if not isinstance(stored, Mapping):
        return list(fields) or ["checksum"]
    texts = texts or {}
    broken = []
    for name, value in fields.items():
        expected = stored.get(name)
        text = texts.get(name)
        if isinstance(text, str) and expected == _text_digest(text):
            continue
        if expected != _digest(value):
            broken.append(name)
    broken.extend(sorted(name for name in stored if name not in fields))
    return broken


def seals_texts(checksum: Any, texts: Mapping[str, str | bytes]) -> bool:
    """Whether ``checksum`` (a stored seal, as the store wrote it) is, byte for byte, the seal
    of fields whose JSON texts are ``texts``: one comparison over the row as read, nothing
    decoded. True proves each field holds the text its digest was taken over. False decides
    nothing (a field was changed, or the seal was written in another form, by hand or by an
    older tracely): the reader then checks the row field by field, with ``broken_fields``,
    which says what is wrong.
    """
    if not isinstance(checksum, str):
        return False
    digests = {}
    for name, text in texts.items():
        if isinstance(text, str):
            digests[name] = _text_digest(text)
        elif isinstance(text, bytes):
            digests[name] = _digest_of(text)
        else:
            return False
    return dumps_json(digests) == checksum


def _text_digest(text: str) -> str:
    return _digest_of(text.encode("utf-8", "surrogatepass"))


def case_row_fields(
    case_id: Any, entrypoint: Any, version: Any, input: Any, expected_output: Any, bundle: Any
) -> dict[str, Any]:
    """What a stored case row is sealed over."""
    return {
        "id": case_id,
        "entrypoint": entrypoint,
        "version": version,
        "input": input,
        "expected_output": expected_output,
        "bundle": bundle,
    }


def version_row_fields(
    case_id: str, version: Any, input: Any, expected_output: Any, bundle: Any
) -> dict[str, Any]:
    """What a stored version row is sealed over."""
    return {
        "case_id": case_id,
        "version": version,
        "input": input,
        "expected_output": expected_output,
        "bundle": bundle,
    }


def case_file_fields(doc: Mapping[str, Any]) -> dict[str, Any]:
    """What a case file is sealed over, by path, as the file holds it."""
    fields: dict[str, Any] = {
        "id": doc.get("id"),
        "entrypoint": doc.get("entrypoint"),
        "version": doc.get("version"),
    }
    history = doc.get("history")
    for i, entry in enumerate(history if isinstance(history, list) else ()):
        for name in _VERSION_FIELDS:
            fields[f"history[{i}].{name}"] = entry.get(name) if isinstance(entry, Mapping) else None
    return fields
