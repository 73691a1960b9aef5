"""What the pages read of a recording: a page of its calls and a list's summaries, read from a
real store without decoding whole recordings.

Written against the ``store`` fixture (SQLite here); ``tests/server/test_pg_store.py`` runs
the same functions against PostgreSQL. What a store decodes is counted at its decoders
(the outline's and the rows'), through the real store and its real engine.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.sdk.store._helpers import trace_id
from tracely_otel._bundle import FORMAT, seal
from tracely_sdk._html._views import CALL_SHOWN, Pages, Viewer, _short, _steps
from tracely_sdk._replay import recorded_calls
from tracely_sdk.store import (
    Cut,
    RecordedCalls,
    Recording,
    SQLiteStore,
    SQLStore,
    _outline,
    _sqlite,
)
from tracely_sdk.store._model import dumps_json


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "t.db")
    yield s
    s.close()


def _migrated_again(store: SQLStore) -> SQLStore:
    """The store's database migrated again, as opening it does (SQLite: another store object
    on the file; PostgreSQL: the store's next new connection)."""
    if isinstance(store, SQLiteStore):
        return SQLiteStore(store.path or ":memory:")
    store._migrated = False  # type: ignore[attr-defined]
    store._connect().close()
    return store


def mixed_bundle(tid: str) -> dict[str, Any]:
    """Calls of tools and models under awkward names, with and without ``seq``, times, usage,
    an error, and values that JSON escapes."""
    bundle: dict[str, Any] = {
        "format": FORMAT,
        "trace_id": tid,
        "service": "svc",
        "started_at": 1_000,
        "agent": {
            "name": "a",
            "input": {"args": [], "kwargs": {}},
            "output": "ok",
            "ended_at": 9_000,
        },
        "tools": {
            "get.weather": [
                {"seq": 0, "args": {"city": "Paris"}, "output": {"temp": 20}},
                {"seq": 4, "args": {"city": "Oslo"}, "output": {"temp": -3}},
                {
                    "seq": 8,
                    "args": {"city": "Rome"},
                    "error": {"type": "Timeout", "message": "slow"},
                },
            ],
            'say "hi"': [
                {
                    "seq": 2,
                    "args": {"to": "ann"},
                    "output": "hi ann",
                    "started_at": 2_000,
                    "ended_at": 2_500,
                },
                {"seq": 5, "args": {"to": "bob"}, "output": "hi bob"},
            ],
            "émoji ☃": [
                {"seq": 6, "args": {}, "output": 'line\nbreak "quoted" \u2028 ☃ \\ end'},
            ],
        },
        "llm": {
            "gpt-4o": [
                {
                    "seq": 1,
                    "input": [{"role": "user", "content": "hi"}],
                    "output": "Hello",
                    "usage": [10, 5],
                },
                {
                    "seq": 3,
                    "input": [{"role": "user", "content": "more"}],
                    "output": "More",
                    "usage": [12, 7],
                    "started_at": 3_000,
                    "ended_at": 4_000,
                },
            ],
            "other-model": [
                {"seq": 7, "input": "plain text", "output": {"b": 2, "a": [1, 2.5, None, True]}},
            ],
        },
        "incomplete": [],
    }
    return seal(bundle)


def big_bundle(tid: str, calls: int, size: int) -> dict[str, Any]:
    """A trace of ``calls`` tool calls, each with ``size`` characters in and out."""
    entries = [
        {
            "seq": i,
            "args": {"q": f"{i}:" + "x" * size},
            "output": f"{i}:" + "y" * size,
            "started_at": 1_000 + i,
            "ended_at": 1_001 + i,
        }
        for i in range(calls)
    ]
    return seal(
        {
            "format": FORMAT,
            "trace_id": tid,
            "service": "svc",
            "started_at": 1_000,
            "agent": {"name": "big", "input": {"args": [calls], "kwargs": {}}, "output": "done"},
            "tools": {"fetch": entries},
            "incomplete": [],
        }
    )


class Decoded:
    """The bytes of JSON text a store hands its decoders."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.bytes = 0
        outline_decode, row_decode = _outline.decode, _sqlite._l

        def counted_outline(text: Any) -> Any:
            self.bytes += len(text)
            return outline_decode(text)

        def counted_row(text: Any) -> Any:
            self.bytes += len(text) if text is not None else 0
            return row_decode(text)

        monkeypatch.setattr(_outline, "decode", counted_outline)
        monkeypatch.setattr(_sqlite, "_l", counted_row)


def _page(found: RecordedCalls) -> list[Any]:
    """The calls of a page read from the store, as the page shows them."""
    return _steps(found.outline[found.offset : found.offset + len(found.entries)], found.entries)


def _expected(bundle: dict[str, Any], offset: int, limit: int) -> list[Any]:
    return recorded_calls(bundle)[offset : offset + limit]


def test_a_page_of_calls_reads_back_as_the_recording_has_them(store: SQLStore) -> None:
    bundle = mixed_bundle(trace_id("mixed"))
    store.put_recording(Recording.from_bundle(bundle))
    whole = recorded_calls(bundle)
    for offset, limit in ((0, 20), (0, 3), (3, 3), (8, 5), (9, 1), (20, 5)):
        found = store.recording_calls(trace_id("mixed"), offset, limit)
        assert [f"{c.kind}:{c.name}" for c in found.outline] == [s["label"] for s in whole]
        assert [c.seq for c in found.outline] == [s["seq"] for s in whole]
        assert _page(found) == _expected(bundle, offset, limit)
        assert found.summary.ended_at == 9_000
        assert found.summary.input == {"args": [], "kwargs": {}}
    # The same as a store that reads the whole recording gives.
    whole_store = _outline.calls_of(store.get_recording(trace_id("mixed")), 2, 4)
    assert whole_store == store.recording_calls(trace_id("mixed"), 2, 4)


def test_a_trace_page_shows_its_calls_cut_with_links_to_each_value(store: SQLStore) -> None:
    tid = trace_id("page")
    store.put_recording(Recording.from_bundle(big_bundle(tid, 45, 5_000)))
    pages = Pages(store)
    html = pages.trace(tid, Viewer(), {"calls": "40"})
    assert "Calls (45)" in html and "calls 41 to 45 of 45" in html
    assert "40:" + "y" * 100 in html and "39:" + "y" * 100 not in html
    assert "y" * CALL_SHOWN not in html  # each value cut
    assert f"/ui/traces/{tid}/calls/41/output" in html
    assert f"/ui/traces/{tid}/calls/45/input" in html
    body, kind = pages.call_value("traces", tid, "45", "output")
    assert (body.decode(), kind) == ("44:" + "y" * 5_000, "text/plain; charset=utf-8")
    body, kind = pages.call_value("traces", tid, "1", "input")
    assert kind == "application/json" and body.decode().replace(" ", "").replace("\n", "") == (
        '{"q":"0:' + "x" * 5_000 + '"}'
    )


def test_one_value_of_a_mixed_recording_is_read_whole(store: SQLStore) -> None:
    bundle = mixed_bundle(trace_id("mixed"))
    store.put_recording(Recording.from_bundle(bundle))
    pages = Pages(store)
    assert pages.call_value("traces", trace_id("mixed"), "7", "output")[0].decode() == (
        'line\nbreak "quoted" \u2028 ☃ \\ end'
    )
    assert b'"Timeout"' in pages.call_value("traces", trace_id("mixed"), "9", "error")[0]
    with pytest.raises(ValueError, match="this recording has 9 calls, no call 10"):
        pages.call_value("traces", trace_id("mixed"), "10", "output")
    with pytest.raises(ValueError, match="call 9 recorded no 'output'"):
        pages.call_value("traces", trace_id("mixed"), "9", "output")


def test_a_page_of_many_large_calls_decodes_only_the_calls_shown(
    store: SQLStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 calls of 20 kB each way are 8 MB of recording: a page of 20 of them, or one of its
    values, decodes those (under 1 MB), the same as from a recording of 50 such calls."""
    decoded = Decoded(monkeypatch)
    pages = Pages(store)
    spent = {}
    for calls in (50, 200):
        tid = trace_id(f"big-{calls}")
        store.put_recording(Recording.from_bundle(big_bundle(tid, calls, 20_000)))
        decoded.bytes = 0
        html = pages.trace(tid, Viewer(), {"calls": str(calls - 20)})
        assert f"calls {calls - 19} to {calls} of {calls}" in html
        spent[calls] = decoded.bytes
        decoded.bytes = 0
        body, _ = pages.call_value("traces", tid, str(calls), "output")
        assert body.decode() == f"{calls - 1}:" + "y" * 20_000
        assert decoded.bytes < 100_000  # its entry, and a few numbers per call
    assert spent[200] < 1_000_000
    assert spent[200] - spent[50] < 20_000  # the outline of 150 more calls, a few numbers each


def test_a_recording_without_its_outline_is_read_by_the_engine(
    store: SQLStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row whose outline is gone (changed outside tracely) is read with the engine's JSON
    functions: the same calls, still without decoding the rest."""
    mixed = mixed_bundle(trace_id("mixed"))
    big = big_bundle(trace_id("big"), 200, 20_000)
    store.put_recordings([Recording.from_bundle(mixed), Recording.from_bundle(big)])
    with store._write() as conn:
        conn.execute("UPDATE recordings SET outline = NULL")
    for offset, limit in ((0, 20), (3, 3), (8, 5)):
        found = store.recording_calls(trace_id("mixed"), offset, limit)
        assert _page(found) == _expected(mixed, offset, limit)
        assert found.summary.ended_at == 9_000
    decoded = Decoded(monkeypatch)
    found = store.recording_calls(trace_id("big"), 180, 20)
    assert _page(found) == _expected(big, 180, 20)
    assert decoded.bytes < 1_000_000


def test_an_outline_the_bundle_does_not_bear_out_is_not_trusted(store: SQLStore) -> None:
    """A bundle changed outside tracely after its outline was written: the page shows what
    the bundle holds, never what lies where the outline pointed."""
    bundle = big_bundle(trace_id("edited"), 30, 1_000)
    store.put_recording(Recording.from_bundle(bundle))
    edited = dict(
        bundle,
        tools={"fetch": [dict(e, output=e["output"] + "!!") for e in bundle["tools"]["fetch"]]},
    )
    with store._write() as conn:
        conn.execute(
            store._q("UPDATE recordings SET bundle = ? WHERE trace_id = ?"),
            (dumps_json(edited), trace_id("edited")),
        )
    found = store.recording_calls(trace_id("edited"), 10, 5)
    assert [e["output"] for e in found.entries] == [
        f"{i}:" + "y" * 1_000 + "!!" for i in range(10, 15)
    ]


def test_recordings_stored_before_outlines_are_outlined_by_the_migration(
    store: SQLStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    mixed = mixed_bundle(trace_id("mixed"))
    big = big_bundle(trace_id("big"), 200, 20_000)
    store.put_recordings([Recording.from_bundle(mixed), Recording.from_bundle(big)])
    store.promote(trace_id("big"), case_id="big", name="big")
    with store._write() as conn:  # the database as schema version 6 left it
        conn.execute("ALTER TABLE recordings DROP COLUMN outline")
        conn.execute("ALTER TABLE cases DROP COLUMN outline")
        conn.execute("DELETE FROM tracely_schema WHERE version = 7")
    again = _migrated_again(store)
    try:
        assert _page(again.recording_calls(trace_id("mixed"), 0, 20)) == _expected(mixed, 0, 20)
        assert again.get_recording(trace_id("big")).bundle == big  # nothing else changed
        assert again.get_case("big").problem is None  # its seal holds
        decoded = Decoded(monkeypatch)
        found = again.recording_calls(trace_id("big"), 0, 20)
        assert _page(found) == _expected(big, 0, 20)
        outline, entries = again.case_calls("big", 150, 1)
        assert entries == [big["tools"]["fetch"][150]] and len(outline) == 200
        assert decoded.bytes < 1_000_000
    finally:
        again.close()


def test_a_list_of_traces_reads_their_summaries_only(
    store: SQLStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listed traces are cut as the list shows them, from the store's first characters of each
    value, whatever their size: the same words as from the whole recordings."""
    inputs: list[Any] = [
        {"args": ["Paris"], "kwargs": {}},
        {"args": ['é\n"☃\\' * 40_000], "kwargs": {}},
        'a string "of" ☃ \\ and more ' * 5_000,
        ["x" * 90],
    ]
    recordings = []
    for n, value in enumerate(inputs):
        bundle = big_bundle(trace_id(f"list-{n}"), 20, 20_000)
        bundle["agent"]["input"] = value
        bundle["agent"]["name"] = "agent " * (n * 400)
        bundle["started_at"] = 1_000 + n
        recordings.append(Recording.from_bundle(seal(bundle)))
    store.put_recordings(recordings)
    decoded = Decoded(monkeypatch)
    listed = store.recording_summaries(limit=10)
    assert decoded.bytes < 20_000
    assert [s.trace_id for s in listed] == [r.trace_id for r in reversed(recordings)]
    for summary, recording in zip(listed, reversed(recordings), strict=True):
        assert _short(summary.input) == _short(recording.input)
        assert _short(summary.output) == _short(recording.output)
        assert _short(summary.agent_name) == _short(recording.agent_name)
        assert summary.status == recording.status and summary.started_at == recording.started_at
    assert isinstance(listed[1].input, Cut) and listed[3].input == inputs[0]
    decoded.bytes = 0
    html = Pages(store).traces({}, Viewer())
    assert decoded.bytes < 20_000
    assert trace_id("list-2") in html


def test_one_value_of_a_case_is_read_alone(
    store: SQLStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A case's call value: the case's seal is checked on its row's text, and only that call
    is decoded; the whole recording of 200 calls of 20 kB is not."""
    big = big_bundle(trace_id("big"), 200, 20_000)
    store.put_recording(Recording.from_bundle(big))
    store.promote(trace_id("big"), case_id="big", name="big")
    pages = Pages(store)
    decoded = Decoded(monkeypatch)
    body, kind = pages.call_value("cases", "big", "200", "output")
    assert (body.decode(), kind) == ("199:" + "y" * 20_000, "text/plain; charset=utf-8")
    assert decoded.bytes < 100_000  # its entry, and a few numbers per call
    outline, entries = store.case_calls("big", 10, 3)
    assert entries == big["tools"]["fetch"][10:13]
    assert [c.seq for c in outline] == list(range(200))
    with pytest.raises(ValueError, match="this recording has 200 calls, no call 201"):
        pages.call_value("cases", "big", "201", "output")


def test_a_case_whose_seal_does_not_hold_is_read_whole(store: SQLStore) -> None:
    """Changed outside tracely: the value is what the case's row holds, read as a whole
    case is (which names the broken seal), never what lies where the outline pointed."""
    bundle = big_bundle(trace_id("edited"), 30, 1_000)
    store.put_recording(Recording.from_bundle(bundle))
    store.promote(trace_id("edited"), case_id="edited", name="edited")
    fetch = bundle["tools"]["fetch"]
    edited = dict(bundle, tools={"fetch": [dict(e, output=e["output"] + "!!") for e in fetch]})
    with store._write() as conn:
        conn.execute(
            store._q("UPDATE cases SET bundle = ? WHERE id = ?"), (dumps_json(edited), "edited")
        )
    assert store.get_case("edited").problem is not None
    _, entries = store.case_calls("edited", 10, 2)
    assert [e["output"] for e in entries] == [f"{i}:" + "y" * 1_000 + "!!" for i in (10, 11)]
