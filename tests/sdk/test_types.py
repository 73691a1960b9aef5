"""The value codec: encoding recorded outputs and rebuilding them into the live types."""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import enum
import functools
import math
import pickle
import socket
import sys
import threading
import uuid
from collections.abc import Awaitable, Coroutine, Mapping, Sequence
from decimal import Decimal
from pathlib import Path, PurePosixPath
from typing import (
    Annotated,
    Any,
    Generic,
    Literal,
    NamedTuple,
    NewType,
    NotRequired,
    TypedDict,
    TypeVar,
    Union,
)

import orjson
import pydantic
import pytest
import typing_extensions
import wrapt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tracely_sdk._types import (
    MARKER_KEY,
    NO_ANNOTATION,
    Encoded,
    RebuildError,
    dumps,
    encode_value,
    json_default,
    rebuild,
    return_annotation,
    type_tag,
)

# --------------------------------------------------------------------------------------------
# Types the tests record and replay (module level so annotations resolve)
# --------------------------------------------------------------------------------------------


class Currency(enum.Enum):
    EUR = "EUR"
    USD = "USD"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Item(pydantic.BaseModel):
    name: str
    price: int
    discount: float | None = None


class Order(pydantic.BaseModel):
    id: uuid.UUID
    items: list[Item]
    note: str | None = None
    created: dt.datetime
    shipped: dt.date | None = None


class StrictEvent(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(strict=True)
    at: dt.datetime
    ref: uuid.UUID


@dataclasses.dataclass
class Money:
    amount: Decimal
    currency: Currency


@dataclasses.dataclass(frozen=True)
class Line:
    sku: str
    qty: int
    price: Money


@dataclasses.dataclass
class Invoice:
    id: uuid.UUID
    issued: dt.datetime
    due: dt.date
    lines: list[Line]
    total: Money
    tags: set[str]
    priority: Priority = Priority.LOW
    _internal: int = 0
    computed: str = dataclasses.field(init=False, default="")

    def __post_init__(self) -> None:
        self.computed = f"{len(self.lines)} lines"


@dataclasses.dataclass(slots=True)
class Slotted:
    x: int
    _y: int = 5


T = TypeVar("T")


@dataclasses.dataclass
class Box(Generic[T]):
    value: T
    history: list[T]


@dataclasses.dataclass
class Cat:
    name: str


@dataclasses.dataclass
class Dog:
    name: str


class Weather(TypedDict):
    city: str
    temp: float
    at: dt.datetime
    alerts: NotRequired[list[Priority]]


class BackportedWeather(typing_extensions.TypedDict):
    city: str
    at: dt.datetime


class Point(NamedTuple):
    x: int
    y: int
    label: str = ""


class Segment(NamedTuple):
    start: Point
    end: Point


UserId = NewType("UserId", int)


NOW = dt.datetime(2024, 5, 17, 12, 30, 45, 123456, tzinfo=dt.timezone.utc)
UID = uuid.UUID("12345678-1234-5678-1234-567812345678")


def roundtrip(value: Any, annotation: Any = NO_ANNOTATION) -> Any:
    return rebuild(orjson.loads(dumps(value)), type_tag=type_tag(value), annotation=annotation)


def sample_order() -> Order:
    return Order(
        id=UID,
        items=[Item(name="a", price=3), Item(name="b", price=4, discount=0.5)],
        note=None,
        created=NOW,
        shipped=dt.date(2024, 5, 18),
    )


def sample_invoice() -> Invoice:
    eur = Money(Decimal("12.50"), Currency.EUR)
    return Invoice(
        id=UID,
        issued=NOW,
        due=dt.date(2024, 6, 1),
        lines=[Line("x-1", 2, eur), Line("y-2", 1, Money(Decimal("0.10"), Currency.USD))],
        total=Money(Decimal("25.10"), Currency.EUR),
        tags={"b", "a"},
        priority=Priority.HIGH,
        _internal=7,
    )


# --------------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------------

ROUND_TRIPS: list[tuple[str, Any, Any]] = [
    ("pydantic nested", sample_order(), Order),
    ("pydantic list of models", [Item(name="a", price=1), Item(name="b", price=2)], list[Item]),
    ("pydantic optional model", None, Union[Item, None]),
    ("pydantic optional model set", Item(name="z", price=9), Union[Item, None]),
    ("pydantic strict", StrictEvent(at=NOW, ref=UID), StrictEvent),
    ("dataclass nested", sample_invoice(), Invoice),
    ("dataclass slots and private field", Slotted(1, 9), Slotted),
    ("dataclass generic", Box(Point(1, 2), [Point(0, 0)]), Box[Point]),
    ("dict of dataclasses", {"a": Money(Decimal("1"), Currency.USD)}, dict[str, Money]),
    ("typeddict", Weather(city="Oslo", temp=3, at=NOW, alerts=[Priority.HIGH]), Weather),
    ("typeddict missing optional", Weather(city="Oslo", temp=3.5, at=NOW), Weather),
    ("typeddict backport", BackportedWeather(city="x", at=NOW), BackportedWeather),
    ("namedtuple", Point(1, 2, "p"), Point),
    ("namedtuple nested", Segment(Point(0, 0), Point(3, 4)), Segment),
    ("tuple variadic", (1, 2, 3), tuple[int, ...]),
    ("tuple fixed", (1, "a", NOW), tuple[int, str, dt.datetime]),
    ("tuple empty", (), tuple[()]),
    ("list of tuples", [(1, 2), (3, 4)], list[tuple[int, int]]),
    ("set", {1, 2, 3}, set[int]),
    ("frozenset", frozenset({"a", "b"}), frozenset[str]),
    ("set of tuples", {(1, 2), (3, 4)}, set[tuple[int, int]]),
    ("bytes", b"\x00\xffbinary", bytes),
    ("bytearray", bytearray(b"abc"), bytearray),
    ("datetime", NOW, dt.datetime),
    ("naive datetime", dt.datetime(2020, 1, 2, 3, 4, 5), dt.datetime),
    ("date", dt.date(2020, 2, 29), dt.date),
    ("time", dt.time(23, 59, 1, 5), dt.time),
    ("timedelta", dt.timedelta(days=2, seconds=5, microseconds=7), dt.timedelta),
    ("decimal", Decimal("3.14159265358979323846"), Decimal),
    ("uuid", UID, uuid.UUID),
    ("enum", Currency.USD, Currency),
    ("int enum", Priority.HIGH, Priority),
    ("literal", "b", Literal["a", "b"]),
    ("literal enum", Currency.EUR, Literal[Currency.EUR]),
    ("union first", 5, Union[int, str]),
    ("union second", "5", Union[int, str]),
    ("pep604 union models", Cat("tom"), Cat | Item),
    ("optional none", None, Union[int, None]),
    ("datetime or date", dt.date(2020, 1, 1), Union[dt.datetime, dt.date]),
    ("dict int keys", {1: "a", 2: "b"}, dict[int, str]),
    ("dict uuid keys", {UID: 1}, dict[uuid.UUID, int]),
    ("dict enum keys", {Priority.LOW: [1.5]}, dict[Priority, list[float]]),
    ("dict date keys", {dt.date(2020, 1, 1): True}, Mapping[dt.date, bool]),
    ("annotated", Decimal("1.5"), Annotated[Decimal, "money"]),
    ("newtype", UserId(5), UserId),
    ("any", {"a": [1, 2]}, Any),
    ("abstract sequence keeps tuple", (1, 2), Sequence[int]),
    ("ordered dict", collections.OrderedDict(a=1), collections.OrderedDict[str, int]),
    ("deque", collections.deque([1, 2]), collections.deque[int]),
    ("path", Path("/tmp/x.txt"), Path),
    ("float annotation keeps int", 3, float),
]


@pytest.mark.parametrize(
    ("value", "annotation"),
    [pytest.param(v, a, id=name) for name, v, a in ROUND_TRIPS],
)
def test_round_trip(value: Any, annotation: Any) -> None:
    rebuilt = roundtrip(value, annotation)
    assert rebuilt == value
    assert type(rebuilt) is type(value)


def test_round_trip_nested_types_are_real_objects() -> None:
    rebuilt = roundtrip(sample_invoice(), Invoice)
    assert isinstance(rebuilt.lines[0], Line)
    assert isinstance(rebuilt.lines[0].price.amount, Decimal)
    assert rebuilt.lines[1].price.currency is Currency.USD
    assert rebuilt.priority is Priority.HIGH
    assert rebuilt.issued.tzinfo is not None
    assert rebuilt.tags == {"a", "b"}
    assert rebuilt.computed == "2 lines"

    order = roundtrip(sample_order(), Order)
    assert isinstance(order.items[1], Item)
    assert order.id == UID


@pytest.mark.parametrize(
    "value",
    [
        (1, 2),
        {1, 2},
        frozenset({3}),
        b"xy",
        NOW,
        dt.date(2020, 1, 1),
        dt.time(1, 2),
        dt.timedelta(seconds=1.5),
        Decimal("2.50"),
        UID,
        ((1, 2), [3]),
    ],
)
def test_builtin_tags_rebuild_without_annotation(value: Any) -> None:
    rebuilt = roundtrip(value)
    assert type(rebuilt) is type(value)
    if isinstance(value, tuple) and value and isinstance(value[0], tuple):
        assert rebuilt == ([1, 2], [3])  # tags describe the top level only
    else:
        assert rebuilt == value


def test_set_of_tuples_without_annotation_is_hashable() -> None:
    assert roundtrip({(1, 2), (3, 4)}) == {(1, 2), (3, 4)}


def test_any_at_top_level_still_uses_builtin_tag() -> None:
    assert roundtrip((1, 2), Any) == (1, 2)
    assert roundtrip(NOW, object) == NOW
    assert rebuild({"a": [1]}, annotation=dict[str, Any]) == {"a": [1]}


def test_union_prefers_member_named_by_tag() -> None:
    assert type(roundtrip(Dog("rex"), Cat | Dog)) is Dog
    assert type(roundtrip(Cat("tom"), Cat | Dog)) is Cat
    # Without a tag the members are tried in order.
    assert type(rebuild({"name": "rex"}, annotation=Cat | Dog)) is Cat
    assert roundtrip(dt.datetime(2020, 1, 1), Union[str, dt.datetime]) == dt.datetime(2020, 1, 1)
    assert roundtrip("2020-01-01T00:00:00", Union[str, dt.datetime]) == "2020-01-01T00:00:00"
    # A plain-JSON value has no tag, so the first member that fits wins.
    assert roundtrip("2020-01-01T00:00:00", Union[dt.datetime, str]) == dt.datetime(2020, 1, 1)


def test_abstract_annotation_takes_container_from_tag() -> None:
    assert roundtrip((1, 2), Sequence[int]) == (1, 2)
    assert roundtrip({1, 2}, Sequence[int]) == {1, 2}
    assert roundtrip([1, 2], Sequence[int]) == [1, 2]


def test_live_objects_pass_through() -> None:
    order = sample_order()
    assert rebuild(order, annotation=Order) is order
    assert rebuild(NOW, annotation=dt.datetime) is NOW


def test_typeddict_is_a_plain_dict_with_rebuilt_values() -> None:
    value = Weather(city="Oslo", temp=3.0, at=NOW)
    rebuilt = roundtrip(value, Weather)
    assert type(rebuilt) is dict
    assert rebuilt["at"] == NOW
    # TypedDicts are not enforced at run time: extra and missing keys stay as recorded.
    assert rebuild({"city": "x", "extra": 1}, annotation=Weather) == {"city": "x", "extra": 1}


def test_namedtuple_from_mapping_and_defaults() -> None:
    assert rebuild({"x": 1, "y": 2}, annotation=Point) == Point(1, 2)
    assert rebuild([1, 2], annotation=Point) == Point(1, 2, "")


def test_dataclass_ignores_unknown_keys() -> None:
    assert rebuild({"name": "tom", "legacy": 1}, annotation=Cat) == Cat("tom")


# --------------------------------------------------------------------------------------------
# Fallbacks to plain JSON
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "tag_prefix"),
    [
        (sample_order(), "pydantic:"),
        (sample_invoice(), "dataclass:"),
        (Currency.EUR, "enum:"),
        (Point(1, 2), "namedtuple:"),
        (Path("/x"), "object:"),
    ],
)
def test_class_tag_without_annotation_gives_plain_json(value: Any, tag_prefix: str) -> None:
    tag = type_tag(value)
    assert tag is not None
    assert tag.startswith(tag_prefix)
    loaded = orjson.loads(dumps(value))
    assert rebuild(loaded, type_tag=tag) == loaded
    assert type(rebuild(loaded, type_tag=tag)) is type(loaded)


def test_unknown_tag_gives_plain_json() -> None:
    assert rebuild([1, 2], type_tag="no-such-tag") == [1, 2]
    assert rebuild({"a": 1}) == {"a": 1}


def test_marker_values_are_returned_as_is() -> None:
    lock = threading.Lock()
    recorded = orjson.loads(dumps({"lock": lock, "n": 1}))
    assert rebuild(recorded, annotation=dict[str, int]) is recorded
    assert rebuild(recorded, type_tag="tuple") is recorded
    deep = orjson.loads(dumps([1, [2, [lock]]]))
    assert rebuild(deep, annotation=list[int]) is deep


# --------------------------------------------------------------------------------------------
# RebuildError
# --------------------------------------------------------------------------------------------


def test_rebuild_error_names_the_field_of_a_pydantic_model() -> None:
    data = orjson.loads(dumps(sample_order()))
    data["items"].append({"name": "c", "price": "not a number"})
    with pytest.raises(RebuildError) as info:
        rebuild(data, annotation=Order)
    assert str(info.value).startswith("output.items[2].price: ")
    assert "got str" in str(info.value)
    assert info.value.path == "output.items[2].price"
    assert isinstance(info.value, TypeError)


def test_rebuild_error_names_the_field_of_a_dataclass() -> None:
    data = orjson.loads(dumps(sample_invoice()))
    data["lines"][1]["qty"] = "two"
    with pytest.raises(RebuildError, match=r"^output\.lines\[1\]\.qty: expected int, got str$"):
        rebuild(data, annotation=Invoice)
    data = orjson.loads(dumps(sample_invoice()))
    data["total"]["currency"] = "GBP"
    with pytest.raises(RebuildError, match=r"^output\.total\.currency: 'GBP' is not a valid"):
        rebuild(data, annotation=Invoice)
    del data["due"]
    with pytest.raises(RebuildError, match=r"^output\.due: missing field of Invoice"):
        rebuild(data, annotation=Invoice)


@pytest.mark.parametrize(
    ("value", "annotation", "message"),
    [
        ([1, "x"], list[int], r"^output\[1\]: expected int, got str$"),
        ({"a": 1}, list[int], r"^output: expected list\[int\], got dict$"),
        ("x", int, r"^output: expected int, got str$"),
        (1, bool, r"^output: expected bool, got int$"),
        (True, float, r"^output: expected float, got bool$"),
        (None, int, r"^output: expected int, got None$"),
        (1, None, r"^output: expected None, got int$"),
        ([1, 2, 3], tuple[int, int], r"^output: expected tuple\[int, int\], got 3 items$"),
        ({"k": "v"}, dict[int, str], r"^output\['k'\]: key 'k' is not a int$"),
        ("c", Literal["a", "b"], r"^output: expected Literal\['a', 'b'\], got str 'c'$"),
        ("not-a-date", dt.datetime, r"^output: expected datetime, got str"),
        ("%%%", bytes, r"^output: expected bytes \(base64\)"),
        ([[1]], set[list[int]], r"^output: set\[list\[int\]\] items are not hashable$"),
        ([1, 2, 3, 4], Point, r"^output: expected 3 items for Point, got 4$"),
        ({"name": 1}, Cat, r"^output\.name: expected str, got int$"),
        ([1], Cat, r"^output: expected Cat, got list$"),
        ({"a": 1}, threading.Event, r"^output: expected Event, got dict$"),
        ([1.5], Union[int, str], r"^output: expected Union\[int, str\], got list"),
        ({"x": "1"}, Box[int], r"^output\.x: missing field|^output\.value: missing field"),
        ({"value": "1", "history": []}, Box[int], r"^output\.value: expected int, got str$"),
    ],
)
def test_rebuild_error_messages(value: Any, annotation: Any, message: str) -> None:
    with pytest.raises(RebuildError, match=message):
        rebuild(value, annotation=annotation)


def test_bad_builtin_tag_data_raises() -> None:
    with pytest.raises(RebuildError, match=r"^output: expected datetime, got int$"):
        rebuild(5, type_tag="datetime")


def test_rebuild_error_pickles() -> None:
    err = RebuildError("output.a", "expected int, got str")
    clone = pickle.loads(pickle.dumps(err))
    assert str(clone) == str(err)
    assert clone.path == "output.a"


# --------------------------------------------------------------------------------------------
# Encoding: json_default, markers, never raising
# --------------------------------------------------------------------------------------------


def test_json_default_conversions() -> None:
    assert json_default(Decimal("1.10")) == "1.10"
    assert json_default({3, 1, 2}) == [1, 2, 3]
    assert json_default(frozenset({"b", "a"})) == ["a", "b"]
    assert json_default(b"\x00\x01") == "AAE="
    assert json_default(Currency.EUR) == "EUR"
    assert json_default(dt.timedelta(minutes=1, microseconds=500000)) == 60.5
    assert json_default(PurePosixPath("/a/b")) == "/a/b"
    assert json_default(Item(name="a", price=1)) == {"name": "a", "price": 1, "discount": None}
    assert json_default(Slotted(1, 2)) == {"x": 1, "_y": 2}
    mixed = json_default({1, "a"})
    assert sorted(mixed, key=str) == [1, "a"]


def test_dumps_is_compact_and_keeps_non_str_keys() -> None:
    assert dumps({"a": [1, 2]}) == b'{"a":[1,2]}'
    assert dumps({1: "x", UID: 2}) == b'{"1":"x","12345678-1234-5678-1234-567812345678":2}'


def test_encode_value_of_plain_and_tagged_values() -> None:
    assert encode_value({"a": 1}) == Encoded('{"a":1}', None, False)
    assert encode_value((1, 2)) == Encoded("[1,2]", "tuple", False)
    enc = encode_value(sample_order())
    assert enc.type_tag == f"pydantic:{__name__}.Order"
    assert not enc.unserialisable
    assert orjson.loads(enc.json)["items"][1]["discount"] == 0.5


class FakeSocket:
    """Socket-like: a file descriptor and methods, nothing JSON could hold."""

    def fileno(self) -> int:
        return 3

    def recv(self, n: int) -> bytes:
        raise AssertionError("encoding must never call methods")

    def __repr__(self) -> str:
        return "<FakeSocket fd=3>"


class BrokenRepr:
    def __repr__(self) -> str:
        raise RuntimeError("boom")


class HugeRepr:
    def __repr__(self) -> str:
        return "x" * 10_000


def _marker_of(value: Any) -> dict[str, Any]:
    enc = encode_value(value)
    assert enc.unserialisable
    data = orjson.loads(enc.json)
    if isinstance(data, dict) and MARKER_KEY in data:
        return data
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if MARKER_KEY in item:
                return item
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    raise AssertionError(f"no marker in {enc.json}")


def test_marker_for_a_lock() -> None:
    marker = _marker_of({"lock": threading.Lock(), "n": 1})
    assert marker[MARKER_KEY] == "_thread.lock"
    assert "lock" in marker["repr"]
    assert orjson.loads(dumps({"lock": threading.Lock(), "n": 1}))["n"] == 1


def test_marker_for_sockets() -> None:
    marker = _marker_of([FakeSocket()])
    assert marker == {MARKER_KEY: f"{__name__}.FakeSocket", "repr": "<FakeSocket fd=3>"}
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        assert _marker_of(sock)[MARKER_KEY] == "socket.socket"


def test_marker_for_recursive_structures() -> None:
    looped: list[Any] = [1]
    looped.append(looped)
    enc = encode_value(looped)
    assert enc.unserialisable
    assert MARKER_KEY in enc.json
    mapping: dict[str, Any] = {"a": 1}
    mapping["self"] = mapping
    assert encode_value(mapping).unserialisable
    node = Cat("x")
    node.name = node  # type: ignore[assignment]
    assert encode_value(node).unserialisable


def test_marker_repr_is_limited_and_safe() -> None:
    huge = _marker_of(HugeRepr())["repr"]
    assert "..." in huge
    assert len(huge) <= 200
    assert "BrokenRepr" in _marker_of(BrokenRepr())["repr"]


def test_values_orjson_refuses_are_encoded_around() -> None:
    big = encode_value({"big": 2**80, "ok": 1})
    assert big.unserialisable
    assert orjson.loads(big.json)["ok"] == 1
    assert orjson.loads(big.json)["big"][MARKER_KEY] == "builtins.int"
    bad_text = encode_value(["\ud800", "fine"])
    assert bad_text.unserialisable
    assert orjson.loads(bad_text.json)[1] == "fine"
    tuple_keys = encode_value({(1, 2): "a"})
    assert orjson.loads(tuple_keys.json) == {"(1, 2)": "a"}
    aware = encode_value(dt.time(1, 2, tzinfo=dt.timezone.utc))
    assert orjson.loads(aware.json) == "01:02:00+00:00"
    assert not aware.unserialisable


def test_deep_nesting_does_not_crash() -> None:
    deep: Any = []
    for _ in range(5000):
        deep = [deep]
    enc = encode_value(deep)
    assert enc.unserialisable
    orjson.loads(enc.json)


def test_marker_key_in_user_string_is_not_a_marker() -> None:
    enc = encode_value({"text": f'"{MARKER_KEY}":'})
    assert not enc.unserialisable


def test_types_and_functions_become_markers() -> None:
    enc = encode_value({"cls": Order, "fn": len, "gen": (i for i in range(3))})
    assert enc.unserialisable
    data = orjson.loads(enc.json)
    assert data["gen"][MARKER_KEY] == "builtins.generator"


class ExplodingModel:
    """Duck-typed model whose dump fails: becomes a marker, not an exception."""

    def model_dump(self, **_: Any) -> Any:
        raise ValueError("nope")


def test_failing_model_dump_becomes_marker() -> None:
    assert _marker_of(ExplodingModel())[MARKER_KEY] == f"{__name__}.ExplodingModel"


# --------------------------------------------------------------------------------------------
# type_tag
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "tag"),
    [
        ({}, None),
        ([], None),
        ("s", None),
        (1, None),
        (1.5, None),
        (True, None),
        (None, None),
        (collections.OrderedDict(), None),
        ((1,), "tuple"),
        ({1}, "set"),
        (frozenset(), "frozenset"),
        (b"", "bytes"),
        (bytearray(), "bytes"),
        (NOW, "datetime"),
        (dt.date.today(), "date"),
        (dt.time(), "time"),
        (dt.timedelta(), "timedelta"),
        (Decimal(1), "decimal"),
        (UID, "uuid"),
        (Item(name="a", price=1), f"pydantic:{__name__}.Item"),
        (Cat("a"), f"dataclass:{__name__}.Cat"),
        (Currency.EUR, f"enum:{__name__}.Currency"),
        (Priority.LOW, f"enum:{__name__}.Priority"),
        (Point(1, 2), f"namedtuple:{__name__}.Point"),
        (threading.Lock(), "object:_thread.lock"),
    ],
)
def test_type_tag(value: Any, tag: str | None) -> None:
    assert type_tag(value) == tag


# --------------------------------------------------------------------------------------------
# Nothing from a recording is imported or executed
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "tag",
    [
        "object:os.system",
        "pydantic:os.system",
        "dataclass:antigravity.fly",
        "namedtuple:this.s",
        "enum:tracely_never_imported_module.Evil",
        "object:builtins.eval",
        "pydantic:subprocess.Popen",
    ],
)
def test_rebuild_never_imports_or_looks_up_a_tagged_class(tag: str) -> None:
    assert "antigravity" not in sys.modules
    assert "tracely_never_imported_module" not in sys.modules
    before = set(sys.modules)
    recorded = {"args": ["echo", "pwned"], "cmd": "rm -rf /"}
    result = rebuild(recorded, type_tag=tag)
    assert result == recorded
    assert type(result) is dict
    assert set(sys.modules) == before
    assert rebuild(["echo"], type_tag=tag) == ["echo"]
    assert set(sys.modules) == before


def test_tag_cannot_add_a_class_to_an_annotation() -> None:
    # A tag naming a class outside the annotation's union changes nothing.
    result = rebuild({"name": "tom"}, type_tag="dataclass:os.system", annotation=Cat | Dog)
    assert type(result) is Cat


# --------------------------------------------------------------------------------------------
# return_annotation
# --------------------------------------------------------------------------------------------


def returns_order() -> Order:
    return sample_order()


def returns_none() -> None:
    return None


def unannotated():  # type: ignore[no-untyped-def]
    return 1


async def async_order() -> Order:
    return sample_order()


def awaitable_int() -> Awaitable[int]:
    raise NotImplementedError


def coroutine_str() -> Coroutine[Any, Any, str]:
    raise NotImplementedError


def bad_forward_ref() -> DoesNotExist:  # type: ignore[name-defined]  # noqa: F821
    raise NotImplementedError


def bad_param_good_return(x: AlsoMissing) -> int:  # type: ignore[name-defined]  # noqa: F821
    return 1


def string_return() -> list[Point]:
    return []


def two_args(a: int, b: str) -> dict[str, int]:
    return {b: a}


class Service:
    def get(self) -> Invoice:
        return sample_invoice()

    @classmethod
    def make(cls) -> Cat:
        return Cat("a")

    @staticmethod
    def static() -> Dog:
        return Dog("a")


class CallableTool:
    def __call__(self, order_id: int) -> Item:
        return Item(name=str(order_id), price=1)


def plain_decorator(fn: Any) -> Any:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return fn(*args, **kwargs)

    return wrapper


@plain_decorator
@plain_decorator
def decorated_twice() -> Point:
    return Point(1, 2)


@wrapt.decorator
def wrapt_passthrough(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
    return wrapped(*args, **kwargs)


@wrapt_passthrough
def wrapt_decorated() -> Money:
    return Money(Decimal(1), Currency.EUR)


def test_return_annotation_of_plain_functions() -> None:
    assert return_annotation(returns_order) is Order
    assert return_annotation(string_return) == list[Point]
    assert return_annotation(returns_none) is NO_ANNOTATION
    assert return_annotation(unannotated) is NO_ANNOTATION
    assert return_annotation(lambda: 1) is NO_ANNOTATION
    assert return_annotation(len) is NO_ANNOTATION


def test_return_annotation_of_async_and_awaitables() -> None:
    assert return_annotation(async_order) is Order
    assert return_annotation(awaitable_int) is int
    assert return_annotation(coroutine_str) is str


def test_return_annotation_of_partials_and_methods() -> None:
    assert return_annotation(functools.partial(two_args, 1)) == dict[str, int]
    assert (
        return_annotation(functools.partial(functools.partial(two_args, 1), "b")) == dict[str, int]
    )
    assert return_annotation(Service().get) is Invoice
    assert return_annotation(Service.make) is Cat
    assert return_annotation(Service.static) is Dog
    assert return_annotation(CallableTool()) is Item
    assert return_annotation(Cat) is Cat


def test_return_annotation_through_wrappers() -> None:
    assert return_annotation(decorated_twice) is Point
    assert return_annotation(wrapt_decorated) is Money
    wrapper = wrapt.FunctionWrapper(returns_order, lambda w, i, a, k: w(*a, **k))
    assert return_annotation(wrapper) is Order
    proxy = wrapt.ObjectProxy(async_order)
    assert return_annotation(proxy) is Order


def test_return_annotation_unresolvable_is_no_annotation() -> None:
    assert return_annotation(bad_forward_ref) is NO_ANNOTATION
    assert return_annotation(bad_param_good_return) is int

    def local() -> LocalOnly:  # type: ignore[name-defined]  # noqa: F821
        raise NotImplementedError

    assert return_annotation(local) is NO_ANNOTATION


def returns_late_model() -> LateModel:  # type: ignore[name-defined]  # noqa: F821
    raise NotImplementedError


def test_return_annotation_retries_once_the_name_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    assert return_annotation(returns_late_model) is NO_ANNOTATION
    assert return_annotation(returns_late_model) is NO_ANNOTATION
    monkeypatch.setitem(globals(), "LateModel", Item)
    assert return_annotation(returns_late_model) is Item


def test_return_annotation_never_raises() -> None:
    class Weird:
        def __getattr__(self, name: str) -> Any:
            raise RuntimeError(name)

    for thing in (None, 1, "x", object(), Weird(), functools.partial(print)):
        assert return_annotation(thing) is NO_ANNOTATION


def test_return_annotation_is_cached_and_stable() -> None:
    first = return_annotation(returns_order)
    assert all(return_annotation(returns_order) is first for _ in range(3))


def test_annotation_drives_rebuild_end_to_end() -> None:
    live = Service().get()
    enc = encode_value(live)
    replayed = rebuild(
        orjson.loads(enc.json),
        type_tag=enc.type_tag,
        annotation=return_annotation(Service().get),
    )
    assert replayed == live
    assert type(replayed) is Invoice


# --------------------------------------------------------------------------------------------
# Properties
# --------------------------------------------------------------------------------------------

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_ish = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=5)
        | st.tuples(children, children)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=8), children, max_size=5)
    ),
    max_leaves=25,
)


def _lists_for_tuples(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return [_lists_for_tuples(v) for v in value]
    if isinstance(value, dict):
        return {k: _lists_for_tuples(v) for k, v in value.items()}
    return value


def _expected_replay(value: Any) -> Any:
    inner = _lists_for_tuples(value)
    return tuple(inner) if isinstance(value, tuple) else inner


@settings(max_examples=150, deadline=None)
@given(json_ish)
def test_json_ish_values_round_trip(value: Any) -> None:
    enc = encode_value(value)
    assert not enc.unserialisable
    rebuilt = rebuild(orjson.loads(enc.json), type_tag=enc.type_tag)
    expected = _expected_replay(value)
    assert rebuilt == expected
    assert type(rebuilt) is type(expected)


hashable_keys = (
    st.text(max_size=5)
    | st.integers()
    | st.floats()
    | st.booleans()
    | st.none()
    | st.uuids()
    | st.dates()
    | st.tuples(st.integers(), st.text(max_size=3))
    | st.frozensets(st.integers(), max_size=3)
)
anything = st.recursive(
    st.from_type(object) | json_scalars | st.integers() | st.text(alphabet=st.characters()),
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children)
        | st.dictionaries(hashable_keys, children, max_size=4)
        | st.sets(hashable_keys, max_size=3)
    ),
    max_leaves=12,
)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(anything)
def test_dumps_never_raises(value: Any) -> None:
    data = dumps(value)
    orjson.loads(data)
    enc = encode_value(value)
    assert enc.json == data.decode()
    if enc.unserialisable:
        assert MARKER_KEY in enc.json
    rebuilt = rebuild(orjson.loads(data), type_tag=enc.type_tag)
    if not enc.unserialisable and enc.type_tag is None:
        assert rebuilt == orjson.loads(data)


@settings(max_examples=100, deadline=None)
@given(st.floats())
def test_non_finite_floats_encode_as_null(value: float) -> None:
    loaded = orjson.loads(dumps(value))
    if math.isfinite(value):
        assert loaded == value
    else:
        assert loaded is None
