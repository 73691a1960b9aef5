"""Reading cases for replay (``Store.cases_for_replay``): a row whose stored seal is the seal of
its bytes is built straight into the runner's case; any other row is read as ``get_case`` reads
it, and refused the same way.

The functions taking ``store`` run on PostgreSQL too (tests/server/test_pg_store.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.sdk.store._helpers import make_bundle, trace_id
from tracely_sdk.errors import NotFound, StoreError
from tracely_sdk.store import Case, CaseVersion, SQLiteStore
from tracely_sdk.store._sqlite import CASE_COLUMNS, SQLStore, sealed_case

FIELDS = ("id", "name", "version", "entrypoint", "input", "expected_output", "bundle", "tags")
FIELDS += ("source_trace_id",)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "t.db")
    yield s
    s.close()


def put(store: SQLStore, case_id: str = "paris", **fields: Any) -> Case:
    """A case written as tracely writes one (sealed), with ``fields`` as given."""
    tid = trace_id(case_id)
    values: dict[str, Any] = {
        "id": case_id,
        "name": "Paris weather",
        "entrypoint": "weather_agent:run",
        "input": {"args": ["Paris"], "kwargs": {}},
        "expected_output": "Sunny in Paris",
        "bundle": make_bundle(tid),
        "source_trace_id": tid,
        "version": 1,
        "tags": ("smoke",),
        "created_at": 1_700_000_000_000_000_000,
        "updated_at": 1_700_000_000_000_000_000,
    } | fields
    case = Case(**values)
    version = CaseVersion(
        case.id,
        case.version,
        case.input,
        case.expected_output,
        case.bundle,
        case.source_trace_id,
        case.created_at,
    )
    return store.put_case(case, [version])


def as_read(case: Case) -> dict[str, Any]:
    """What ``make`` is given for a case read whole."""
    return {name: getattr(case, name) for name in FIELDS}


def edit(store: SQLStore, statement: str, *params: Any) -> None:
    """A change made to the database outside tracely."""
    with store._write() as conn:
        conn.execute(store._q(statement), params)


def read_row(store: SQLStore, case_id: str) -> tuple[Any, ...]:
    """The case's row as the read for replay gets it: the sealed texts as UTF-8 bytes."""
    with store._read() as conn:
        row = conn.execute(
            store._q(f"SELECT {CASE_COLUMNS} FROM cases WHERE id = ?"), (case_id,)
        ).fetchone()
    return tuple(c.encode() if i in (3, 4, 5) and c is not None else c for i, c in enumerate(row))


# -- a sound row ------------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(blacklist_categories=("Cs",))),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(st.characters(blacklist_categories=("Cs",)), max_size=8), inner)
    ),
    max_leaves=12,
)
# PostgreSQL's text holds no NUL (a JSON value holds it escaped), its INTEGER no more than 2**31-1.
texts = st.text(
    st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
    min_size=1,
    max_size=40,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    input=json_values.filter(lambda v: v is not None),
    expected=json_values,
    city=texts,
    name=texts.filter(lambda t: t.strip() != ""),
    tags=st.lists(st.from_regex(r"[a-z0-9:_-]{1,12}", fullmatch=True), max_size=3),
    version=st.integers(1, 2**31 - 1),
)
def test_a_sound_row_is_built_straight_into_the_case_replay_runs_equal_to_the_case_read_whole(
    store: SQLStore,
    input: Any,
    expected: Any,
    city: str,
    name: str,
    tags: list[str],
    version: int,
) -> None:
    tid = trace_id(city)
    put(
        store,
        "c1",
        name=name,
        input=input,
        expected_output=expected,
        bundle=make_bundle(tid, city=city, output=expected),
        source_trace_id=tid,
        version=version,
        tags=tuple(tags),
    )
    (made,) = store.cases_for_replay(dict)
    assert isinstance(made, dict)  # built from the row, not read as a Case
    assert made == as_read(store.get_case("c1"))
    assert store.cases_for_replay(dict, case_id="c1") == [made]


def test_cases_for_replay_selects_by_tag_and_by_id_as_list_cases_and_get_case_do(
    store: SQLStore,
) -> None:
    put(store, "oslo", tags=("nightly",))
    put(store, "paris", tags=("smoke", "nightly"))
    put(store, "lisbon", expected_output=None, entrypoint=None)
    assert store.cases_for_replay(dict) == [as_read(c) for c in store.list_cases()]
    assert [c["id"] for c in store.cases_for_replay(dict)] == ["lisbon", "oslo", "paris"]
    assert [c["id"] for c in store.cases_for_replay(dict, tag="nightly")] == ["oslo", "paris"]
    assert store.cases_for_replay(dict, tag="nope") == []
    assert store.cases_for_replay(dict, case_id="lisbon") == [as_read(store.get_case("lisbon"))]
    with pytest.raises(NotFound, match="no case 'rome'"):
        store.cases_for_replay(dict, case_id="rome")


# -- a row that is not what was written -------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("entrypoint", "weather_agent:run_broken"),
        ("version", 2),
        ("input", '{"args":["Oslo"],"kwargs":{}}'),
        ("expected_output", '"Rain in Paris"'),
        ("expected_output", None),
        ("bundle", "{}"),
    ],
)
def test_a_changed_sealed_column_is_not_read_on_the_fast_path_but_as_get_case_reads_it(
    store: SQLStore, column: str, value: Any
) -> None:
    put(store)
    edit(store, f"UPDATE cases SET {column} = ? WHERE id = ?", value, "paris")
    (read,) = store.cases_for_replay(dict)
    assert isinstance(read, Case)
    assert read.problem is not None
    assert f"case paris: {column} does not match the checksum stored with it" in read.problem
    assert read == store.get_case("paris") and read.problem == store.get_case("paris").problem


def test_a_hand_edited_seal_is_not_read_on_the_fast_path(store: SQLStore) -> None:
    put(store)
    edit(store, "UPDATE cases SET checksum = ? WHERE id = ?", '{"bundle":"sha256:0"}', "paris")
    (read,) = store.cases_for_replay(dict)
    assert isinstance(read, Case) and read.problem is not None
    assert "does not match the checksum" in read.problem


def test_the_same_value_written_as_other_json_text_is_still_the_case(store: SQLStore) -> None:
    # The seal is over the text tracely writes; other text of the same value is not the fast
    # path's to decide, and the full check finds each field's value is what was sealed.
    put(store)
    edit(
        store,
        "UPDATE cases SET input = ? WHERE id = ?",
        '{ "kwargs": {}, "args": ["Paris"] }',
        "paris",
    )
    (read,) = store.cases_for_replay(dict, case_id="paris")
    assert isinstance(read, Case) and read.problem is None
    assert read == store.get_case("paris")


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("name", " "),
        ("tags", '["two words"]'),
        ("tags", "not json"),
        ("created_at", -1),
    ],
)
def test_an_unsealed_column_a_case_refuses_is_refused_with_the_error_list_cases_raises(
    store: SQLStore, column: str, value: Any
) -> None:
    put(store)
    edit(store, f"UPDATE cases SET {column} = ? WHERE id = ?", value, "paris")
    with pytest.raises((StoreError, ValueError)) as whole:
        store.list_cases()
    with pytest.raises(type(whole.value)) as for_replay:
        store.cases_for_replay(dict)
    assert str(for_replay.value) == str(whole.value)


# -- the seal over the row's bytes ------------------------------------------------------------


def test_a_sound_row_is_sealed_and_each_sealed_field_and_the_seal_count(store: SQLStore) -> None:
    put(store)
    row = read_row(store, "paris")
    assert sealed_case(row, dict) == as_read(store.get_case("paris"))
    changes = [
        (0, "paris2"),  # id
        (2, "weather_agent:run_broken"),  # entrypoint
        (3, b'{"args":["Oslo"],"kwargs":{}}'),  # input
        (4, b'"Rain"'),  # expected_output
        (4, None),  # expected_output, NULL
        (5, row[5].replace(b"Paris", b"Pariz")),  # bundle
        (7, 2),  # version
        (11, row[11].replace("sha256:", "sha256:0", 1)),  # the seal itself
    ]
    for where, value in changes:
        changed = list(row)
        changed[where] = value
        assert sealed_case(tuple(changed), dict) is None, (where, value)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(column=st.sampled_from([3, 4, 5]), data=st.data())
def test_any_changed_byte_of_a_sealed_text_is_caught_by_the_seal(
    store: SQLStore, column: int, data: st.DataObject
) -> None:
    if not store.list_cases():
        put(store)
    row = read_row(store, "paris")
    text = row[column]
    at = data.draw(st.integers(0, len(text) - 1), label="at")
    byte = data.draw(st.integers(0, 255).filter(lambda b: b != text[at]), label="byte")
    changed = list(row)
    changed[column] = text[:at] + bytes([byte]) + text[at + 1 :]
    assert sealed_case(tuple(changed), dict) is None


def test_a_row_whose_columns_are_of_another_type_is_left_to_the_full_read(
    store: SQLStore,
) -> None:
    put(store)
    row = read_row(store, "paris")
    for where, value in ((7, "1"), (7, True), (5, 42), (11, None), (8, None)):
        changed = list(row)
        changed[where] = value
        assert sealed_case(tuple(changed), dict) is None, (where, value)


def test_the_fast_read_keeps_the_case_problem_as_the_runner_reports_it(store: SQLStore) -> None:
    from tracely_sdk._runner import ReplayCase, load_cases

    put(store, "oslo")
    put(store, "paris")
    edit(store, "UPDATE cases SET bundle = ? WHERE id = ?", "{}", "paris")
    oslo, paris = load_cases(store=store)
    assert oslo == ReplayCase.of(store.get_case("oslo"), validated=True) and oslo.validated
    assert paris.problem is not None and not paris.validated
    assert paris.problem.startswith("the stored case cannot be loaded, so the agent was not run")
    assert paris == ReplayCase.of(store.get_case("paris"))
