from __future__ import annotations

import os
import string
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tracely_sdk.errors import StoreError
from tracely_sdk.store import (
    CaseFileError,
    InvalidCase,
    SQLiteStore,
    export_cases,
    import_cases,
    read_case_file,
    reseal_case_file,
    slugify,
    validate_case_id,
)
from tracely_sdk.store._files import CASE_FILE_FORMAT

from ._helpers import make_bundle, make_recording, trace_id


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    s = SQLiteStore(tmp_path / "src.db")
    s.put_recording(make_recording(1))
    s.put_recording(make_recording(2, output="better", tools=2))
    s.put_recording(make_recording(3, city="Lyon", output="Cloudy"))
    s.promote(
        trace_id(1), name="Paris weather", entrypoint="weather_agent:run", tags=["smoke", "eu"]
    )
    s.recapture("paris-weather", trace_id(2), note="after the fix")
    s.promote(trace_id(3), name="Lyon", tags=[])
    yield s
    s.close()


def _snapshot(s: SQLiteStore) -> list[tuple[object, object]]:
    return [(c, s.case_history(c.id)) for c in s.list_cases()]


def test_round_trip(store: SQLiteStore, tmp_path: Path) -> None:
    paths = export_cases(store, tmp_path / "cases")
    assert [p.name for p in paths] == ["lyon.json", "paris-weather.json"]
    with SQLiteStore(tmp_path / "dst.db") as dst:
        imported = import_cases(dst, tmp_path / "cases")
        assert [c.id for c in imported] == ["lyon", "paris-weather"]
        assert _snapshot(dst) == _snapshot(store)
        assert [v.version for v in dst.case_history("paris-weather")] == [1, 2]
        assert [c.id for c in dst.list_cases(tag="smoke")] == ["paris-weather"]
        # Importing again replaces, never duplicates.
        import_cases(dst, tmp_path / "cases")
        assert _snapshot(dst) == _snapshot(store)


def test_export_is_stable(store: SQLiteStore, tmp_path: Path) -> None:
    first = {p.name: p.read_bytes() for p in export_cases(store, tmp_path / "a")}
    mtimes = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "a").iterdir()}
    second = {p.name: p.read_bytes() for p in export_cases(store, tmp_path / "a")}
    other = {p.name: p.read_bytes() for p in export_cases(store, tmp_path / "b")}
    assert first == second == other
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "a").iterdir()} == mtimes
    data = first["paris-weather.json"]
    assert data.endswith(b"}\n") and not data.endswith(b"\n\n")
    doc = orjson.loads(data)
    assert list(doc) == sorted(doc)
    assert data.startswith(b'{\n  "checksum": {\n    "entrypoint": ')  # 2-space indent, sorted
    assert doc["format"] == CASE_FILE_FORMAT
    assert [v["version"] for v in doc["history"]] == [1, 2]
    assert doc["history"][1]["note"] == "after the fix"
    # Through a store and back, byte for byte.
    with SQLiteStore(tmp_path / "dst.db") as dst:
        import_cases(dst, tmp_path / "a")
        again = {p.name: p.read_bytes() for p in export_cases(dst, tmp_path / "c")}
    assert again == first


def test_export_selected_cases(store: SQLiteStore, tmp_path: Path) -> None:
    paths = export_cases(store, tmp_path / "one", case_ids=["lyon"])
    assert [p.name for p in paths] == ["lyon.json"]
    with pytest.raises(StoreError, match="nope"):
        export_cases(store, tmp_path / "one", case_ids=["nope"])


def test_hand_written_case_file(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    (cases / "refund.json").write_text(
        """{"format": "tracely.case/1", "id": "refund", "name": "Refund flow",
            "history": [{"version": 1, "input": {"args": [7], "kwargs": {}},
                         "expected_output": "refunded",
                         "bundle": {"tools": {"get_order": [{"args": {"order_id": 7},
                                                             "output": {"status": "shipped"}}]}}}]}"""
    )
    assert "history[0].bundle" in reseal_case_file(cases / "refund.json")
    with SQLiteStore(tmp_path / "d.db") as s:
        (case,) = import_cases(s, cases)
        assert (case.id, case.version, case.tags, case.entrypoint) == ("refund", 1, (), None)
        assert case.expected_output == "refunded"
        assert case.created_at == case.updated_at > 0
        assert s.case_history("refund")[0].bundle == case.bundle


def _deep(levels: int) -> list:
    value: list = []
    for _ in range(levels - 1):
        value = [value]
    return value


def _good_doc(store: SQLiteStore, tmp_path: Path) -> dict:
    export_cases(store, tmp_path / "ok", case_ids=["paris-weather"])
    return orjson.loads((tmp_path / "ok" / "paris-weather.json").read_bytes())


@pytest.mark.parametrize(
    ("mutate", "field"),
    [
        (lambda d: d.pop("name"), "name"),
        (lambda d: d.update(format="other/1"), "format"),
        (lambda d: d.update(id="Paris-Weather"), "id"),
        (lambda d: d.update(id="lyon"), "id"),  # not the file's name
        (lambda d: d.update(entrypoint="nope"), "entrypoint"),
        (lambda d: d.update(tags=["a b"]), "tags"),
        (lambda d: d.update(tags="smoke"), "tags"),
        (lambda d: d.update(version=5), "version"),
        (lambda d: d.update(history=[]), "history"),
        (lambda d: d.update(extra=1), "extra"),
        (lambda d: d["history"][1].pop("bundle"), "history[1].bundle"),
        (
            lambda d: d["history"][1]["bundle"]["tools"].update(x=[{"args": {}}]),
            "history[1].bundle",
        ),
        (lambda d: d["history"][0]["bundle"].update(checksum="sha256:00"), "history[0].bundle"),
        (lambda d: d["history"][0].update(input=None), "history[0].input"),
        (lambda d: d["history"][0].update(version="1"), "history[0].version"),
        (lambda d: d["history"][1].update(version=1), "history[1].version"),
        (lambda d: d["history"][0].update(note=3), "history[0].note"),
        (lambda d: d["history"][0].update(created_at=-1), "history[0].created_at"),
        # integers past what the store holds (signed 64 bits)
        (lambda d: d["history"][0].update(created_at=2**63), "history[0].created_at"),
        (lambda d: d["history"][1].update(version=2**63), "history[1].version"),
        (lambda d: d.update(version=2**64 - 1), "version"),
        (lambda d: d.update(created_at=2**63), "created_at"),
        (lambda d: d.update(updated_at=2**63), "updated_at"),
        # values JSON tools cannot write back: too deep
        (
            lambda d: d["history"][0].update(input={"args": [_deep(100)], "kwargs": {}}),
            "history[0].input",
        ),
        (
            lambda d: d["history"][1].update(expected_output=_deep(200)),
            "history[1].expected_output",
        ),
        (lambda d: d["history"][0].update(colour="red"), "history[0].colour"),
        (lambda d: d.update(history=[1]), "history[0]"),
    ],
)
def test_malformed_file_names_file_and_field_and_imports_nothing(
    store: SQLiteStore, tmp_path: Path, mutate, field: str
) -> None:
    doc = _good_doc(store, tmp_path)
    mutate(doc)
    cases = tmp_path / "cases"
    cases.mkdir()
    export_cases(store, cases, case_ids=["lyon"])  # a good file beside the bad one
    bad = cases / "paris-weather.json"
    bad.write_bytes(orjson.dumps(doc))
    with SQLiteStore(tmp_path / "dst.db") as dst:
        with pytest.raises(CaseFileError) as info:
            import_cases(dst, cases)
        assert info.value.path == bad
        assert info.value.field == field
        assert str(bad) in str(info.value) and field in str(info.value)
        assert dst.list_cases() == []  # nothing imported, not even the good file


def test_not_json_and_not_an_object(tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("{not json")
    with pytest.raises(CaseFileError, match=r"a\.json: is not JSON"):
        read_case_file(tmp_path / "a.json")
    (tmp_path / "b.json").write_text("[1, 2]")
    with pytest.raises(CaseFileError, match=r"b\.json: must hold a JSON object"):
        read_case_file(tmp_path / "b.json")
    with SQLiteStore(tmp_path / "x.db") as s, pytest.raises(StoreError, match="no case file"):
        import_cases(s, tmp_path / "missing")


def test_import_a_single_file(store: SQLiteStore, tmp_path: Path) -> None:
    export_cases(store, tmp_path / "cases")
    with SQLiteStore(tmp_path / "d.db") as s:
        import_cases(s, tmp_path / "cases" / "lyon.json")
        assert [c.id for c in s.list_cases()] == ["lyon"]


def test_hidden_and_other_files_are_ignored(store: SQLiteStore, tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    export_cases(store, cases, case_ids=["lyon"])
    (cases / ".editor-backup.json").write_text("junk")
    (cases / "README.md").write_text("cases")
    with SQLiteStore(tmp_path / "d.db") as s:
        assert [c.id for c in import_cases(s, cases)] == ["lyon"]


# --- ids as file names ------------------------------------------------------------------

_ID_ALPHABET = string.ascii_letters + string.digits + "._-/\\:~ $%*?\x00é"


@settings(max_examples=200, deadline=None)
@given(
    st.text(alphabet=_ID_ALPHABET, max_size=140)
    | st.from_regex(r"[a-z0-9][a-z0-9._-]{0,130}", fullmatch=True)
)
def test_accepted_ids_are_plain_file_names(candidate: str) -> None:
    try:
        case_id = validate_case_id(candidate)
    except InvalidCase:
        return
    assert "/" not in case_id and "\\" not in case_id and os.sep not in case_id
    assert ".." not in case_id
    assert case_id not in (".", "") and not case_id.startswith(".")
    root = Path("/tmp/export-root").resolve()
    target = (root / f"{case_id}.json").resolve()
    assert target.parent == root
    assert target.name == f"{case_id}.json"


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_slugify_always_gives_a_valid_id(name: str) -> None:
    case_id = slugify(name)
    assert validate_case_id(case_id) == case_id


def test_export_uses_only_the_case_directory(store: SQLiteStore, tmp_path: Path) -> None:
    out = tmp_path / "out"
    export_cases(store, out)
    assert {p.parent for p in out.rglob("*")} == {out}
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["out", "src.db", "src.db-shm", "src.db-wal"]
    )


def test_bundle_of_case_file_must_be_valid(store: SQLiteStore, tmp_path: Path) -> None:
    doc = _good_doc(store, tmp_path)
    doc["history"][1]["bundle"] = make_bundle(trace_id(9)) | {"tools": "oops"}
    path = tmp_path / "paris-weather.json"
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(CaseFileError, match=r"history\[1\]\.bundle: invalid fixture bundle"):
        read_case_file(path)


# --- case files prove what they hold -------------------------------------------------------


def test_a_file_without_a_checksum_is_refused_until_resealed(
    store: SQLiteStore, tmp_path: Path
) -> None:
    doc = _good_doc(store, tmp_path)
    del doc["checksum"]
    del doc["history"][1]["bundle"]["checksum"]  # the bundle's own covers only the bundle
    doc["history"][1]["bundle"]["tools"]["get_weather"] = [{"output": "forged"}]
    path = tmp_path / "cases" / "paris-weather.json"
    path.parent.mkdir()
    path.write_bytes(orjson.dumps(doc))
    with SQLiteStore(tmp_path / "dst.db") as dst:
        with pytest.raises(CaseFileError) as info:
            import_cases(dst, path.parent)
        assert (info.value.path, info.value.field) == (path, "checksum")
        assert f"tracely cases reseal {path}" in str(info.value)
        assert dst.list_cases() == []


@pytest.mark.parametrize(
    ("edit", "field"),
    [
        (
            lambda d: d["history"][1].update(input={"args": ["Rome"], "kwargs": {}}),
            "history[1].input",
        ),
        (
            lambda d: d["history"][1].update(expected_output="anything"),
            "history[1].expected_output",
        ),
        (lambda d: d.update(entrypoint="evil_module:run"), "entrypoint"),
        (
            lambda d: d["history"][0].update(
                bundle={"tools": {"get_weather": [{"output": "forged"}]}}
            ),
            "history[0].bundle",
        ),
    ],
)
def test_a_field_changed_after_sealing_is_refused_by_path_and_field(
    store: SQLiteStore, tmp_path: Path, edit, field: str
) -> None:
    doc = _good_doc(store, tmp_path)
    edit(doc)
    path = tmp_path / "paris-weather.json"
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(CaseFileError) as info:
        read_case_file(path)
    assert (info.value.path, info.value.field) == (path, field)
    assert "does not match the file's checksum" in str(info.value)

    # A deliberate edit is resealed, and the reseal says what changed.
    assert reseal_case_file(path) == [field]
    read_case_file(path)
    assert reseal_case_file(path) == []


def test_reseal_checks_the_file_as_an_import_would(store: SQLiteStore, tmp_path: Path) -> None:
    doc = _good_doc(store, tmp_path)
    doc["history"][0]["input"] = None
    path = tmp_path / "paris-weather.json"
    path.write_bytes(orjson.dumps(doc))
    with pytest.raises(CaseFileError, match=r"history\[0\]\.input"):
        reseal_case_file(path)
    assert orjson.loads(path.read_bytes()) == doc  # left as it was


def test_a_stored_case_changed_outside_tracely_is_refused(
    store: SQLiteStore, tmp_path: Path
) -> None:
    import sqlite3

    conn = sqlite3.connect(tmp_path / "src.db")
    with conn:
        conn.execute("UPDATE cases SET entrypoint = 'evil_module:run' WHERE id = 'paris-weather'")
        conn.execute(
            "UPDATE case_versions SET expected_output = '\"forged\"' "
            "WHERE case_id = 'lyon' AND version = 1"
        )
    conn.close()
    tampered = store.get_case("paris-weather")
    assert tampered.problem is not None
    assert tampered.problem.startswith("case paris-weather: entrypoint does not match")
    assert store.get_case("lyon").problem is None  # its current row is intact
    with pytest.raises(StoreError, match="version 1 of case lyon: expected_output does not"):
        store.case_history("lyon")
    # Exporting would seal what was changed into a file that vouches for it.
    with pytest.raises(StoreError, match="cannot export paris-weather: case paris-weather"):
        export_cases(store, tmp_path / "out", case_ids=["paris-weather"])

    from tracely_sdk._runner import load_cases

    replayed = {c.id: c for c in load_cases(store=store)}
    assert replayed["paris-weather"].problem is not None
    assert "so the agent was not run" in replayed["paris-weather"].problem


def test_cases_stored_before_checksums_are_sealed_by_the_migration(tmp_path: Path) -> None:
    import sqlite3

    from tracely_sdk.store import _migrations

    path = tmp_path / "old.db"
    conn = sqlite3.connect(path, isolation_level=None)
    _migrations.migrate(conn, _migrations.SQLITE, migrations=_migrations.MIGRATIONS[:2])
    bundle = orjson.dumps(make_bundle(trace_id(1))).decode()
    conn.execute(
        "INSERT INTO cases (id, name, entrypoint, input, expected_output, bundle, "
        "source_trace_id, version, tags, created_at, updated_at) "
        "VALUES ('old', 'Old', NULL, '{\"args\":[1],\"kwargs\":{}}', '\"ok\"', ?, NULL, 1, "
        "'[]', 1, 1)",
        (bundle,),
    )
    conn.execute(
        "INSERT INTO case_versions (case_id, version, input, expected_output, bundle, "
        "source_trace_id, created_at, note) "
        "VALUES ('old', 1, '{\"args\":[1],\"kwargs\":{}}', '\"ok\"', ?, NULL, 1, NULL)",
        (bundle,),
    )
    conn.close()
    with SQLiteStore(path) as s:
        assert s.get_case("old").expected_output == "ok"
        assert [v.version for v in s.case_history("old")] == [1]
