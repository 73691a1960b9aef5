"""The value codec: how recorded call outputs are encoded as JSON and rebuilt on replay.

Every tool/LLM output is recorded as JSON text (``dumps``/``encode_value``) together with a
*type tag* naming its top-level type. On replay ``rebuild`` turns the JSON back into a value of
the type the live call returned, guided by the function's return annotation
(``return_annotation``) and, failing that, by the tag.

A recording is untrusted data. Nothing in it is executed or imported: there is no pickle, and a
class is never looked up by the name written in a tag. Classes come only from the annotation the
replaying code itself supplies; the tag may *choose between* classes the annotation already
names (the members of a union), never add one.

Encoding (``dumps``) never raises. orjson writes the JSON; ``json_default`` handles pydantic
models (``model_dump(mode="json")``), dataclasses (every field, including ``_private`` ones),
Decimal (string), set/frozenset (list, sorted when the items are all numbers or all strings),
deque (list),
bytes (base64), Enum (its value), timedelta (seconds as a float) and paths (string). Anything
else becomes a marker object ``{"__tracely_unserialisable__": "<module>.<qualname>", "repr":
"<at most 200 chars>"}``; so do integers outside 64 bits, strings that are not valid UTF-8 and
the repeated part of a self-referential structure. A dict key that cannot be a JSON key is
written as its short repr. ``Encoded.unserialisable`` is True whenever something was replaced.
NaN and infinities are written as ``null`` (JSON has no spelling for them).

What falls back to plain JSON on replay, and why:

* A class tag (``pydantic:``, ``dataclass:``, ``enum:``, ``namedtuple:``, ``object:``) with no
  annotation: the only way to get the class would be to import it by the recorded name, which
  would let a recording run code. The JSON form (dict/list/scalar) is returned instead.
* A value containing an unserialisable marker: the original object could not be recorded, so
  there is nothing faithful to rebuild; the marker is returned as is and the caller decides.
* ``Any``/``object`` (and unresolved forward references) inside an annotation: they say nothing
  about what the value was, so the JSON is returned as is. At the top level the builtin tag
  still applies, so ``-> Any`` returning a tuple replays a tuple.
* Below the top level, builtin types JSON cannot spell (tuple, set, datetime, ...) are rebuilt
  only when the annotation names them: tags describe the top-level value only.

Without an annotation only the builtin tags of a fixed table are rebuilt: tuple, set, frozenset,
bytes, datetime, date, time, timedelta, decimal, uuid.

With an annotation, data that does not fit raises ``RebuildError`` naming the place, e.g.
``output.items[2].price: expected int, got str``. Scalars are kept as recorded where JSON already
holds them exactly (an ``int`` recorded under a ``float`` annotation stays the int the live call
returned). TypedDicts are not enforced at run time, so missing or extra keys are kept as
recorded; dataclasses ignore keys that are not fields; unions try their members in order (the
top-level tag, when given, moves the member it names to the front).
"""

from __future__ import annotations

import base64
import collections
import collections.abc as cabc
import dataclasses
import datetime as dt
import decimal
import enum
import functools
import reprlib
import sys
import types
import typing
import uuid
import weakref
from collections.abc import Callable, Mapping
from pathlib import PurePath
from typing import Any, Final, NamedTuple

import orjson

from tracely_otel import MAX_NESTING

__all__ = [
    "MARKER_KEY",
    "is_lossy",
    "NO_ANNOTATION",
    "Encoded",
    "RebuildError",
    "dumps",
    "encode_value",
    "json_default",
    "rebuild",
    "return_annotation",
    "type_tag",
]


class _NoAnnotation:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_ANNOTATION"

    def __reduce__(self) -> str:
        return "NO_ANNOTATION"


NO_ANNOTATION: Final[object] = _NoAnnotation()
"""Sentinel: the function has no usable return annotation (nothing to rebuild into)."""

MARKER_KEY: Final[str] = "__tracely_unserialisable__"

# A key spelled this way in orjson output can only be a real object key: inside a JSON string
# the quote characters would be escaped.
_MARKER_PATTERN: Final[str] = f'"{MARKER_KEY}":'

_REPR_LIMIT: Final[int] = 200
_SLOW_MAX_DEPTH: Final[int] = 200
_INT_MIN: Final[int] = -(2**63)
_INT_MAX: Final[int] = 2**64 - 1


class Encoded(NamedTuple):
    """A recorded value: its JSON text, its top-level type tag, whether anything was lost."""

    json: str
    type_tag: str | None
    unserialisable: bool


class RebuildError(TypeError):
    """Recorded data does not fit the annotation; the message says where and how.

    ``path`` is where in the value it happened (``output.items[2].price``).
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message

    def __reduce__(self) -> tuple[type[RebuildError], tuple[str, str]]:
        return (type(self), (self.path, self.message))


_MISS: Final[object] = object()


class _WeakCache:
    """A cache keyed by object identity holding only weak references to its keys.

    A hit is one dict lookup and one weakref call (``WeakKeyDictionary`` makes a new weakref
    per lookup, which costs more than the work it saves on this path). An entry goes away
    with its key.
    """

    __slots__ = ("_data",)

    def __init__(self) -> None:
        self._data: dict[int, tuple[weakref.ref[Any], Any]] = {}

    def get(self, key: Any) -> Any:
        entry = self._data.get(id(key))
        if entry is not None and entry[0]() is key:
            return entry[1]
        return _MISS

    def put(self, key: Any, value: Any) -> None:
        ident = id(key)
        data = self._data

        def drop(ref: weakref.ref[Any]) -> None:
            entry = data.get(ident)
            if entry is not None and entry[0] is ref:
                data.pop(ident, None)

        try:
            data[ident] = (weakref.ref(key, drop), value)
        except TypeError:  # not weakly referenceable: not cached
            pass


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------

_repr = reprlib.Repr()
_repr.maxstring = _REPR_LIMIT
_repr.maxother = _REPR_LIMIT
_repr.maxlevel = 4


def _qualname(cls: type) -> str:
    module = getattr(cls, "__module__", None)
    name = getattr(cls, "__qualname__", None)
    if not isinstance(name, str):
        name = getattr(cls, "__name__", "?")
    return f"{module}.{name}" if isinstance(module, str) else str(name)


def _short_repr(obj: Any) -> str:
    try:
        text = _repr.repr(obj)
    except BaseException:  # a broken __repr__ must not break recording
        text = f"<unrepresentable {_qualname(type(obj))}>"
    if not isinstance(text, str):
        text = f"<unrepresentable {_qualname(type(obj))}>"
    if len(text) > _REPR_LIMIT:
        text = text[: _REPR_LIMIT - 3] + "..."
    return text


def _marker(obj: Any) -> dict[str, str]:
    return {MARKER_KEY: _qualname(type(obj)), "repr": _short_repr(obj)}


def _b64(obj: Any) -> str:
    return base64.b64encode(bytes(obj)).decode("ascii")


def _set_items(obj: Any) -> list[Any]:
    items = list(obj)
    kinds = {type(item) for item in items}
    # Sorting calls __lt__; only do it where that is a builtin comparison.
    if kinds and (kinds <= {int, float, bool} or kinds == {str}):
        try:
            items.sort()
        except TypeError:
            pass
    return items


def _dataclass_dict(obj: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for field in dataclasses.fields(obj):
        try:
            out[field.name] = getattr(obj, field.name)
        except AttributeError:  # an init=False field that was never set
            continue
    return out


_EXACT_DEFAULTS: Final[dict[type, Callable[[Any], Any]]] = {
    decimal.Decimal: str,
    set: _set_items,
    frozenset: _set_items,
    bytes: _b64,
    bytearray: _b64,
    memoryview: _b64,
    dt.timedelta: dt.timedelta.total_seconds,
    collections.deque: list,
}


def json_default(obj: Any) -> Any:
    """The orjson ``default=`` hook: a JSON-able stand-in for ``obj``; never raises."""
    try:
        handler = _EXACT_DEFAULTS.get(type(obj))
        if handler is not None:
            return handler(obj)
        cls = type(obj)
        if isinstance(obj, type):
            return _marker(obj)
        if getattr(cls, "model_dump", None) is not None:
            try:
                return obj.model_dump(mode="json")
            except Exception:
                try:
                    return obj.model_dump()
                except Exception:
                    return _marker(obj)
        if getattr(cls, "__dataclass_fields__", None) is not None:
            return _dataclass_dict(obj)
        if isinstance(obj, enum.Enum):
            return obj.value
        if isinstance(obj, tuple):
            return list(obj)
        if isinstance(obj, (set, frozenset)):
            return _set_items(obj)
        if isinstance(obj, decimal.Decimal):
            return str(obj)
        if isinstance(obj, (bytes, bytearray)):
            return _b64(obj)
        if isinstance(obj, dt.timedelta):
            return obj.total_seconds()
        if isinstance(obj, PurePath):
            return str(obj)
        if isinstance(obj, dt.time) and obj.tzinfo is not None:
            return obj.isoformat()
        if isinstance(obj, float):
            return float(obj)
        if isinstance(obj, int):
            return int(obj)
    except Exception:
        pass
    return _marker(obj)


_OPTIONS: Final[int] = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS
_NATIVE_LEAVES: Final[tuple[type, ...]] = (dt.datetime, dt.date, uuid.UUID)
_NATIVE_KEYS: Final[tuple[type, ...]] = (float, bool, type(None), dt.datetime, dt.date, uuid.UUID)


def _utf8_ok(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _slow_key(key: Any) -> Any:
    if isinstance(key, str):
        return key if _utf8_ok(key) else _short_repr(key)
    if isinstance(key, enum.Enum):
        return _slow_key(key.value)
    if isinstance(key, int) and not isinstance(key, bool):
        return key if _INT_MIN <= key <= _INT_MAX else _short_repr(key)
    if isinstance(key, _NATIVE_KEYS) or (isinstance(key, dt.time) and key.tzinfo is None):
        return key
    return _short_repr(key)


def _slow(obj: Any, depth: int, active: set[int]) -> Any:
    """A structure orjson can write without help: the careful path, when the fast one failed."""
    if obj is None or isinstance(obj, (bool, float)):
        return obj
    if isinstance(obj, str):
        return obj if _utf8_ok(obj) else _marker(obj)
    if isinstance(obj, enum.Enum):
        obj = obj.value
        if obj is None or isinstance(obj, (bool, float)):
            return obj
    if isinstance(obj, int):
        return obj if _INT_MIN <= obj <= _INT_MAX else _marker(obj)
    if isinstance(obj, _NATIVE_LEAVES) or (isinstance(obj, dt.time) and obj.tzinfo is None):
        return obj
    if depth >= _SLOW_MAX_DEPTH or id(obj) in active:
        return _marker(obj)
    active.add(id(obj))
    try:
        if isinstance(obj, dict):
            return {_slow_key(k): _slow(v, depth + 1, active) for k, v in obj.items()}
        if type(obj) is tuple or isinstance(obj, list):
            return [_slow(v, depth + 1, active) for v in obj]
        converted = json_default(obj)
        if isinstance(converted, dict) and MARKER_KEY in converted:
            return converted
        return _slow(converted, depth + 1, active)
    finally:
        active.discard(id(obj))


def dumps(value: Any) -> bytes:
    """``value`` as compact JSON bytes, the way tracely records it; never raises."""
    try:
        return orjson.dumps(value, default=json_default, option=_OPTIONS)
    except Exception:
        pass
    try:
        return orjson.dumps(_slow(value, 0, set()), default=json_default, option=_OPTIONS)
    except Exception:
        pass
    try:
        return orjson.dumps(_marker(value))
    except Exception:
        return orjson.dumps({MARKER_KEY: "?", "repr": "<unrepresentable>"})


_new_tuple = tuple.__new__


def encode_value(value: Any) -> Encoded:
    """``value`` encoded for a span attribute: JSON text, top-level type tag, lossiness."""
    text = dumps(value).decode("utf-8")
    return _new_tuple(Encoded, (text, type_tag(value), _MARKER_PATTERN in text))


def is_lossy(text: str) -> bool:
    """True when JSON ``text`` from :func:`dumps` holds an unserialisable marker."""
    return _MARKER_PATTERN in text


# --------------------------------------------------------------------------------------------
# Type tags
# --------------------------------------------------------------------------------------------

_FAST_TAGS: Final[dict[type, Any]] = {
    dict: None,
    list: None,
    str: None,
    int: None,
    float: None,
    bool: None,
    type(None): None,
    tuple: "tuple",
    set: "set",
    frozenset: "frozenset",
    bytes: "bytes",
    bytearray: "bytes",
    memoryview: "bytes",
    dt.datetime: "datetime",
    dt.date: "date",
    dt.time: "time",
    dt.timedelta: "timedelta",
    decimal.Decimal: "decimal",
    uuid.UUID: "uuid",
}

# Subclasses of builtins, most specific first (datetime is a date).
_BUILTIN_BASES: Final[tuple[tuple[type, str | None], ...]] = (
    (bool, None),
    (dt.datetime, "datetime"),
    (dt.date, "date"),
    (dt.time, "time"),
    (dt.timedelta, "timedelta"),
    (decimal.Decimal, "decimal"),
    (uuid.UUID, "uuid"),
    (frozenset, "frozenset"),
    (set, "set"),
    (tuple, "tuple"),
    (bytes, "bytes"),
    (bytearray, "bytes"),
    (dict, None),
    (list, None),
    (str, None),
    (int, None),
    (float, None),
)

_CLASS_TAGS: Final[_WeakCache] = _WeakCache()


def _class_tag(cls: type) -> str | None:
    name = _qualname(cls)
    if issubclass(cls, enum.Enum):
        return f"enum:{name}"
    if callable(getattr(cls, "model_dump", None)):
        return f"pydantic:{name}"
    if getattr(cls, "__dataclass_fields__", None) is not None:
        return f"dataclass:{name}"
    if issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple):
        return f"namedtuple:{name}"
    for base, tag in _BUILTIN_BASES:
        if issubclass(cls, base):
            return tag
    return f"object:{name}"


def type_tag(value: Any) -> str | None:
    """The top-level type tag of ``value``: None for plain JSON types."""
    cls = type(value)
    tag: str | None = _FAST_TAGS.get(cls, _MISS)
    if tag is not _MISS:
        return tag
    cached: str | None = _CLASS_TAGS.get(cls)
    if cached is not _MISS:
        return cached
    try:
        computed = _class_tag(cls)
    except Exception:
        computed = f"object:{_qualname(cls)}"
    _CLASS_TAGS.put(cls, computed)
    return computed


# --------------------------------------------------------------------------------------------
# Return annotations
# --------------------------------------------------------------------------------------------

_ANNOTATIONS: Final[_WeakCache] = _WeakCache()
_UNWRAP_LIMIT: Final[int] = 64
_AWAITABLE_ORIGINS: Final[frozenset[Any]] = frozenset({cabc.Awaitable, cabc.Coroutine})


_UNRESOLVED: Final[_WeakCache] = _WeakCache()
_NEVER: Final[tuple[Any, ...]] = tuple(
    form
    for form in (getattr(typing, "NoReturn", None), getattr(typing, "Never", None))
    if form is not None
)


class _Unresolved(Exception):
    """The annotation exists but cannot be evaluated now (a forward reference)."""


def _unwrap_callable(fn: Any) -> Any:
    """The function whose annotations describe what calling ``fn`` returns (or a class)."""
    seen: set[int] = set()
    for _ in range(_UNWRAP_LIMIT):
        if id(fn) in seen:
            break
        seen.add(id(fn))
        if isinstance(fn, functools.partial):
            fn = fn.func
            continue
        if isinstance(fn, (types.MethodType, staticmethod, classmethod)):
            fn = fn.__func__
            continue
        try:
            wrapped = getattr(fn, "__wrapped__", None)
        except Exception:
            wrapped = None
        if wrapped is not None and wrapped is not fn:
            fn = wrapped
            continue
        if isinstance(fn, (types.FunctionType, type, types.BuiltinFunctionType)):
            break
        try:
            call = type(fn).__call__
        except AttributeError:
            break
        if isinstance(call, (types.WrapperDescriptorType, types.MethodWrapperType)):
            break
        fn = call
    return fn


def _raw_return(fn: Any) -> Any:
    try:
        annotations = fn.__annotations__
    except Exception:
        return NO_ANNOTATION
    if not isinstance(annotations, Mapping) or "return" not in annotations:
        return NO_ANNOTATION
    try:
        hints = typing.get_type_hints(fn)
    except Exception:
        # Some other parameter may be the unresolvable one: evaluate the return alone.
        shim = types.SimpleNamespace(
            __annotations__={"return": annotations["return"]},
            __globals__=getattr(fn, "__globals__", {}),
        )
        try:
            hints = typing.get_type_hints(shim)
        except Exception as exc:
            raise _Unresolved from exc
    return hints.get("return", NO_ANNOTATION)


def _finish_annotation(ann: Any) -> Any:
    if ann is NO_ANNOTATION:
        return ann
    if typing.get_origin(ann) in _AWAITABLE_ORIGINS:
        args = typing.get_args(ann)
        ann = args[-1] if args else NO_ANNOTATION
    if ann is None or ann is type(None) or ann in _NEVER:
        return NO_ANNOTATION
    if isinstance(ann, (str, typing.ForwardRef)):
        return NO_ANNOTATION
    return ann


def return_annotation(fn: Any) -> Any:
    """What calling ``fn`` returns, per its annotation, without calling it; else NO_ANNOTATION.

    Looks through partials, bound methods, ``__wrapped__`` chains (functools.wraps, wrapt) and
    callable instances. ``async def f() -> X`` and ``-> Awaitable[X]`` give ``X``; ``-> None``,
    lambdas, unannotated and unresolvable annotations give NO_ANNOTATION. Never raises.
    """
    try:
        if type(fn) is types.FunctionType and "__wrapped__" not in fn.__dict__:
            target: Any = fn
            # __name__, not __code__: reading __code__ is an audit event, and strict replay's
            # network guard has an audit hook installed (lambdas have no annotations either way).
            if fn.__name__ == "<lambda>" and not fn.__annotations__:
                return NO_ANNOTATION
        else:
            target = _unwrap_callable(fn)
        if isinstance(target, type):
            return NO_ANNOTATION if target is type(None) else target
        cached = _ANNOTATIONS.get(target)
        if cached is not _MISS:
            return cached
        # A failed resolution is retried only once the module has gained names (the class
        # may be defined further down the module than the first call).
        module_size = len(getattr(target, "__globals__", ()))
        if _UNRESOLVED.get(target) == module_size:
            return NO_ANNOTATION
        try:
            result = _finish_annotation(_raw_return(target))
        except _Unresolved:
            _UNRESOLVED.put(target, module_size)
            return NO_ANNOTATION
        _ANNOTATIONS.put(target, result)
        return result
    except Exception:
        return NO_ANNOTATION


# --------------------------------------------------------------------------------------------
# Rebuilding
# --------------------------------------------------------------------------------------------

_TypeVarMap = Mapping[Any, Any]
_NO_TVARS: Final[_TypeVarMap] = types.MappingProxyType({})


def _json_name(value: Any) -> str:
    if value is None:
        return "None"
    return type(value).__name__


def _type_name(tp: Any) -> str:
    if tp is type(None) or tp is None:
        return "None"
    if isinstance(tp, type) and not typing.get_args(tp):
        return str(tp.__qualname__)
    return repr(tp).replace("typing.", "").replace("collections.abc.", "")


def _mismatch(path: str, tp: Any, value: Any) -> RebuildError:
    return RebuildError(path, f"expected {_type_name(tp)}, got {_json_name(value)}")


def _contains_marker(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if MARKER_KEY in item:
                return True
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def _hashable(value: Any, depth: int = 0) -> Any:
    if isinstance(value, list):
        if depth >= MAX_NESTING:
            raise ValueError(f"nests deeper than {MAX_NESTING} levels")
        return tuple(_hashable(v, depth + 1) for v in value)
    return value


def _parse_datetime(value: Any, path: str) -> dt.datetime:
    if not isinstance(value, str) or len(value) <= 10:
        raise _mismatch(path, dt.datetime, value)
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        raise RebuildError(path, f"expected datetime, got str {_short_repr(value)}") from None


def _parse_date(value: Any, path: str) -> dt.date:
    if not isinstance(value, str) or len(value) != 10:
        raise _mismatch(path, dt.date, value)
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise RebuildError(path, f"expected date, got str {_short_repr(value)}") from None


def _parse_time(value: Any, path: str) -> dt.time:
    if not isinstance(value, str):
        raise _mismatch(path, dt.time, value)
    text = value[:-1] + "+00:00" if value.endswith(("Z", "z")) else value
    try:
        return dt.time.fromisoformat(text)
    except ValueError:
        raise RebuildError(path, f"expected time, got str {_short_repr(value)}") from None


def _parse_timedelta(value: Any, path: str) -> dt.timedelta:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _mismatch(path, dt.timedelta, value)
    try:
        return dt.timedelta(seconds=value)
    except (OverflowError, ValueError):
        raise RebuildError(path, f"timedelta out of range: {value!r}") from None


def _parse_decimal(value: Any, path: str) -> decimal.Decimal:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise _mismatch(path, decimal.Decimal, value)
    try:
        return decimal.Decimal(str(value))
    except decimal.InvalidOperation:
        raise RebuildError(path, f"expected Decimal, got str {_short_repr(value)}") from None


def _parse_uuid(value: Any, path: str) -> uuid.UUID:
    if not isinstance(value, str):
        raise _mismatch(path, uuid.UUID, value)
    try:
        return uuid.UUID(value)
    except ValueError:
        raise RebuildError(path, f"expected UUID, got str {_short_repr(value)}") from None


def _parse_bytes(value: Any, path: str) -> bytes:
    if not isinstance(value, str):
        raise _mismatch(path, bytes, value)
    try:
        return base64.b64decode(value, validate=True)
    except ValueError:
        raise RebuildError(path, "expected bytes (base64), got str that is not base64") from None


def _tag_sequence(value: Any, path: str, kind: type) -> Any:
    if not isinstance(value, list):
        raise _mismatch(path, kind, value)
    if kind is tuple:
        return tuple(value)
    try:
        return kind(_hashable(v) for v in value)
    except ValueError as exc:
        raise RebuildError(path, str(exc)) from None
    except TypeError:
        raise RebuildError(path, f"{kind.__name__} items are not hashable") from None


# The fixed table of builtin tags. Nothing else is ever rebuilt without an annotation.
_BUILTIN_TAGS: Final[dict[str, Callable[[Any, str], Any]]] = {
    "tuple": lambda v, p: _tag_sequence(v, p, tuple),
    "set": lambda v, p: _tag_sequence(v, p, set),
    "frozenset": lambda v, p: _tag_sequence(v, p, frozenset),
    "bytes": _parse_bytes,
    "datetime": _parse_datetime,
    "date": _parse_date,
    "time": _parse_time,
    "timedelta": _parse_timedelta,
    "decimal": _parse_decimal,
    "uuid": _parse_uuid,
}

_TAG_TYPES: Final[dict[str, type]] = {
    "tuple": tuple,
    "set": set,
    "frozenset": frozenset,
    "bytes": bytes,
    "datetime": dt.datetime,
    "date": dt.date,
    "time": dt.time,
    "timedelta": dt.timedelta,
    "decimal": decimal.Decimal,
    "uuid": uuid.UUID,
}

_SCALAR_PARSERS: Final[dict[type, Callable[[Any, str], Any]]] = {
    dt.datetime: _parse_datetime,
    dt.date: _parse_date,
    dt.time: _parse_time,
    dt.timedelta: _parse_timedelta,
    decimal.Decimal: _parse_decimal,
    uuid.UUID: _parse_uuid,
    bytes: _parse_bytes,
}

_SEQUENCE_ORIGINS: Final[frozenset[Any]] = frozenset(
    {
        list,
        collections.deque,
        cabc.Sequence,
        cabc.MutableSequence,
        cabc.Iterable,
        cabc.Collection,
        cabc.Reversible,
        cabc.Container,
    }
)
_ABSTRACT_SEQUENCES: Final[frozenset[Any]] = _SEQUENCE_ORIGINS - {list, collections.deque}
_SET_ORIGINS: Final[frozenset[Any]] = frozenset({set, frozenset, cabc.Set, cabc.MutableSet})
_MAPPING_ORIGINS: Final[frozenset[Any]] = frozenset(
    {
        dict,
        collections.OrderedDict,
        collections.defaultdict,
        collections.Counter,
        cabc.Mapping,
        cabc.MutableMapping,
    }
)
_WRAPPER_FORMS: Final[tuple[Any, ...]] = tuple(
    form
    for form in (
        getattr(typing, name, None)
        for name in ("ClassVar", "Final", "Required", "NotRequired", "ReadOnly")
    )
    if form is not None
)
_UNION_ORIGINS: Final[tuple[Any, ...]] = (typing.Union, types.UnionType)

_HINTS: Final[_WeakCache] = _WeakCache()


def _class_hints(cls: type) -> dict[str, Any]:
    """Resolved annotations of a class; a name that cannot be resolved counts as Any."""
    cached: dict[str, Any] = _HINTS.get(cls)
    if cached is not _MISS:
        return cached
    complete = True
    try:
        hints = typing.get_type_hints(cls)
    except Exception:
        complete = False
        hints = {}
        module = sys.modules.get(getattr(cls, "__module__", ""), None)
        globalns = dict(vars(module)) if module is not None else {}
        for klass in reversed(cls.__mro__):
            for name, raw in dict(getattr(klass, "__annotations__", {}) or {}).items():
                shim = types.SimpleNamespace(__annotations__={name: raw}, __globals__=globalns)
                try:
                    hints[name] = typing.get_type_hints(shim)[name]
                except Exception:
                    hints[name] = Any
    if complete:
        _HINTS.put(cls, hints)
    return hints


def _is_typeddict(tp: Any) -> bool:
    if not isinstance(tp, type):
        return False
    if typing.is_typeddict(tp):
        return True
    # Backported TypedDicts (typing_extensions) are their own classes with the same shape.
    return (
        issubclass(tp, dict)
        and isinstance(getattr(tp, "__required_keys__", None), frozenset)
        and isinstance(getattr(tp, "__total__", None), bool)
    )


def _is_namedtuple(tp: Any) -> bool:
    return (
        isinstance(tp, type)
        and issubclass(tp, tuple)
        and isinstance(getattr(tp, "_fields", None), tuple)
    )


def _is_pydantic(tp: Any) -> bool:
    return isinstance(tp, type) and callable(getattr(tp, "model_validate", None))


def _is_dataclass_type(tp: Any) -> bool:
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


def _pydantic_error(exc: Exception, path: str) -> RebuildError:
    errors_fn = getattr(exc, "errors", None)
    try:
        errors = errors_fn() if callable(errors_fn) else None
    except Exception:
        errors = None
    if not errors or not isinstance(errors[0], Mapping):
        return RebuildError(path, f"{type(exc).__name__}: {exc}")
    first = errors[0]
    where = path
    for part in first.get("loc", ()):
        where += f"[{part}]" if isinstance(part, int) else f".{part}"
    message = str(first.get("msg", "invalid"))
    if first.get("type") != "missing" and "input" in first:
        message += f", got {_json_name(first['input'])}"
    extra = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return RebuildError(where, message + extra)


def _rebuild_pydantic(value: Any, tp: type, path: str) -> Any:
    validate_json = getattr(tp, "model_validate_json", None)
    try:
        if callable(validate_json):
            # JSON-mode validation is the exact inverse of model_dump(mode="json"), also for
            # strict models (an ISO string is a valid datetime in JSON mode only).
            return validate_json(orjson.dumps(value))
        return tp.model_validate(value)  # type: ignore[attr-defined]
    except Exception as exc:
        raise _pydantic_error(exc, path) from None


def _rebuild_dataclass(value: Any, tp: type, args: tuple[Any, ...], path: str) -> Any:
    if not isinstance(value, dict):
        raise _mismatch(path, tp, value)
    tvars = _typevar_map(tp, args)
    hints = _class_hints(tp)
    init_kwargs: dict[str, Any] = {}
    late: dict[str, Any] = {}
    for field in dataclasses.fields(tp):
        if field.name not in value:
            if (
                field.init
                and field.default is dataclasses.MISSING
                and field.default_factory is dataclasses.MISSING
            ):
                raise RebuildError(f"{path}.{field.name}", f"missing field of {tp.__qualname__}")
            continue
        hint = hints.get(field.name, Any)
        rebuilt = _rebuild(value[field.name], hint, f"{path}.{field.name}", tvars)
        (init_kwargs if field.init else late)[field.name] = rebuilt
    try:
        obj = tp(**init_kwargs)
        for name, item in late.items():
            object.__setattr__(obj, name, item)
    except RebuildError:
        raise
    except Exception as exc:
        raise RebuildError(path, f"{tp.__qualname__}(...) failed: {exc}") from None
    return obj


def _rebuild_typeddict(value: Any, tp: type, args: tuple[Any, ...], path: str) -> Any:
    if not isinstance(value, dict):
        raise _mismatch(path, tp, value)
    tvars = _typevar_map(tp, args)
    hints = _class_hints(tp)
    return {
        key: _rebuild(item, hints[key], f"{path}.{key}", tvars) if key in hints else item
        for key, item in value.items()
    }


def _rebuild_namedtuple(value: Any, tp: type, args: tuple[Any, ...], path: str) -> Any:
    fields: tuple[str, ...] = tp._fields  # type: ignore[attr-defined]
    defaults: Mapping[str, Any] = getattr(tp, "_field_defaults", {}) or {}
    tvars = _typevar_map(tp, args)
    hints = _class_hints(tp)
    if isinstance(value, dict):
        unknown = [key for key in value if key not in fields]
        if unknown:
            raise RebuildError(f"{path}.{unknown[0]}", f"not a field of {tp.__qualname__}")
        items = {
            name: _rebuild(value[name], hints.get(name, Any), f"{path}.{name}", tvars)
            for name in fields
            if name in value
        }
        missing = [name for name in fields if name not in items and name not in defaults]
        if missing:
            raise RebuildError(f"{path}.{missing[0]}", f"missing field of {tp.__qualname__}")
        try:
            return tp(**items)
        except Exception as exc:
            raise RebuildError(path, f"{tp.__qualname__}(...) failed: {exc}") from None
    if not isinstance(value, list):
        raise _mismatch(path, tp, value)
    required = len([name for name in fields if name not in defaults])
    if not required <= len(value) <= len(fields):
        raise RebuildError(
            path, f"expected {len(fields)} items for {tp.__qualname__}, got {len(value)}"
        )
    positional = [
        _rebuild(item, hints.get(name, Any), f"{path}[{index}]", tvars)
        for index, (name, item) in enumerate(zip(fields, value, strict=False))
    ]
    try:
        return tp(*positional)
    except Exception as exc:
        raise RebuildError(path, f"{tp.__qualname__}(...) failed: {exc}") from None


def _typevar_map(origin: Any, args: tuple[Any, ...]) -> _TypeVarMap:
    params = getattr(origin, "__parameters__", ()) or ()
    if not args or not params:
        return _NO_TVARS
    return dict(zip(params, args, strict=False))


def _rebuild_tuple(value: Any, tp: Any, args: tuple[Any, ...], path: str, tv: _TypeVarMap) -> Any:
    if not isinstance(value, list):
        raise _mismatch(path, tp, value)
    bare = tp is typing.Tuple  # noqa: UP006
    if bare or (not args and typing.get_origin(tp) is None):
        return tuple(value)
    if len(args) == 2 and args[1] is Ellipsis:
        return tuple(_rebuild(v, args[0], f"{path}[{i}]", tv) for i, v in enumerate(value))
    if len(args) == 1 and args[0] == ():
        args = ()
    if len(value) != len(args):
        raise RebuildError(path, f"expected {_type_name(tp)}, got {len(value)} items")
    return tuple(
        _rebuild(v, a, f"{path}[{i}]", tv) for i, (v, a) in enumerate(zip(value, args, strict=True))
    )


def _rebuild_key(key: Any, tp: Any, path: str, tv: _TypeVarMap) -> Any:
    if tp is str or tp is Any:
        return key
    try:
        return _rebuild(key, tp, path, tv)
    except RebuildError:
        if not isinstance(key, str):
            raise
        try:
            parsed = orjson.loads(key)
        except orjson.JSONDecodeError:
            raise RebuildError(path, f"key {key!r} is not a {_type_name(tp)}") from None
        if isinstance(parsed, (dict, list, str)):
            raise RebuildError(path, f"key {key!r} is not a {_type_name(tp)}") from None
        return _rebuild(parsed, tp, path, tv)


def _rebuild_mapping(
    value: Any, tp: Any, origin: Any, args: tuple[Any, ...], path: str, tv: _TypeVarMap
) -> Any:
    if not isinstance(value, dict):
        raise _mismatch(path, tp, value)
    key_tp, value_tp = (args[0], args[1]) if len(args) == 2 else (Any, Any)
    out = {
        _rebuild_key(key, key_tp, f"{path}[{key!r}]", tv): _rebuild(
            item, value_tp, f"{path}[{key!r}]", tv
        )
        for key, item in value.items()
    }
    if origin is collections.defaultdict:
        return collections.defaultdict(None, out)
    if origin in (collections.OrderedDict, collections.Counter):
        return origin(out)
    return out


def _rebuild_collection(
    value: Any, tp: Any, origin: Any, args: tuple[Any, ...], path: str, tv: _TypeVarMap
) -> Any:
    if isinstance(value, str) and origin in _ABSTRACT_SEQUENCES:
        return value  # a str is a Sequence of str
    if not isinstance(value, list):
        raise _mismatch(path, tp, value)
    item_tp = args[0] if args else Any
    items = [_rebuild(v, item_tp, f"{path}[{i}]", tv) for i, v in enumerate(value)]
    if origin in _SET_ORIGINS:
        try:
            return frozenset(items) if origin is frozenset else set(items)
        except TypeError:
            raise RebuildError(path, f"{_type_name(tp)} items are not hashable") from None
    if origin is collections.deque:
        return collections.deque(items)
    return items


def _rebuild_union(value: Any, tp: Any, args: tuple[Any, ...], path: str, tv: _TypeVarMap) -> Any:
    if value is None and type(None) in args:
        return None
    members = [arg for arg in args if arg is not type(None)]
    if len(members) == 1:
        return _rebuild(value, members[0], path, tv)
    failures: list[str] = []
    for member in members:
        try:
            return _rebuild(value, member, path, tv)
        except RebuildError as exc:
            failures.append(str(exc))
    detail = "; ".join(failures[:3])
    raise RebuildError(path, f"expected {_type_name(tp)}, got {_json_name(value)} ({detail})")


def _rebuild_literal(value: Any, tp: Any, args: tuple[Any, ...], path: str) -> Any:
    for arg in args:
        expected = arg.value if isinstance(arg, enum.Enum) else arg
        if type(expected) is type(value) and expected == value:
            return arg
    raise RebuildError(path, f"expected {_type_name(tp)}, got {_json_name(value)} {value!r}")


def _rebuild_enum(value: Any, tp: type[enum.Enum], path: str) -> Any:
    try:
        return tp(value)
    except Exception:
        if isinstance(value, list):
            try:
                return tp(_hashable(value))
            except Exception:
                pass
    raise RebuildError(path, f"{_short_repr(value)} is not a valid {tp.__qualname__}")


def _rebuild_class(value: Any, tp: type, path: str, tv: _TypeVarMap) -> Any:
    if _is_typeddict(tp):
        return _rebuild_typeddict(value, tp, (), path)
    try:
        if isinstance(value, tp):
            return value  # already the type (a bare list/dict, a live object passed back in)
    except TypeError:  # a Protocol that is not runtime-checkable, and the like
        pass
    if issubclass(tp, enum.Enum):
        return _rebuild_enum(value, tp, path)
    if _is_pydantic(tp):
        return _rebuild_pydantic(value, tp, path)
    if _is_dataclass_type(tp):
        return _rebuild_dataclass(value, tp, (), path)
    if _is_namedtuple(tp):
        return _rebuild_namedtuple(value, tp, (), path)
    parser = _SCALAR_PARSERS.get(tp)
    if parser is not None:
        return parser(value, path)
    if tp is float:
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value  # an int recorded under a float annotation stays what was returned
        raise _mismatch(path, tp, value)
    if tp is bytearray:
        return bytearray(_parse_bytes(value, path))
    if issubclass(tp, (list, tuple, set, frozenset, collections.deque)) and isinstance(value, list):
        try:
            return tp(value)
        except Exception as exc:
            raise RebuildError(path, f"{tp.__qualname__}(...) failed: {exc}") from None
    if issubclass(tp, dict) and isinstance(value, dict) and tp is not collections.defaultdict:
        return _rebuild_mapping(value, tp, tp, (), path, tv)
    if issubclass(tp, PurePath) and isinstance(value, str):
        return tp(value)
    if tp is bool:
        raise _mismatch(path, tp, value)
    for base in (str, int, float):
        if issubclass(tp, base) and isinstance(value, base) and not isinstance(value, bool):
            try:
                return tp(value)
            except Exception as exc:
                raise RebuildError(path, f"{tp.__qualname__}(...) failed: {exc}") from None
    raise _mismatch(path, tp, value)


def _rebuild(value: Any, tp: Any, path: str, tv: _TypeVarMap) -> Any:
    while True:
        if tp is Any or tp is object:
            return value
        if isinstance(tp, typing.TypeVar):
            if tp in tv:
                tp = tv[tp]
                continue
            tp = tp.__bound__ if tp.__bound__ is not None else Any
            continue
        if isinstance(tp, typing.NewType):
            tp = tp.__supertype__
            continue
        if type(tp).__name__ == "TypeAliasType" and hasattr(tp, "__value__"):
            tp = tp.__value__
            continue
        origin = typing.get_origin(tp)
        if origin is typing.Annotated:
            tp = typing.get_args(tp)[0]
            continue
        if origin in _WRAPPER_FORMS or origin in _AWAITABLE_ORIGINS:
            args = typing.get_args(tp)
            tp = args[-1] if args else Any
            continue
        break
    if tp is None or tp is type(None):
        if value is None:
            return None
        raise _mismatch(path, type(None), value)
    if isinstance(tp, (str, typing.ForwardRef)):
        return value  # could not be resolved: nothing says what it was
    if origin is None:
        if isinstance(tp, type):
            return _rebuild_class(value, tp, path, tv)
        return value  # a special form with no runtime shape (LiteralString, Self, ...)
    args = typing.get_args(tp)
    if origin in _UNION_ORIGINS:
        return _rebuild_union(value, tp, args, path, tv)
    if origin is typing.Literal:
        return _rebuild_literal(value, tp, args, path)
    if origin is tuple:
        return _rebuild_tuple(value, tp, args, path, tv)
    if origin in _SEQUENCE_ORIGINS or origin in _SET_ORIGINS:
        return _rebuild_collection(value, tp, origin, args, path, tv)
    if origin in _MAPPING_ORIGINS:
        return _rebuild_mapping(value, tp, origin, args, path, tv)
    if _is_typeddict(origin):
        return _rebuild_typeddict(value, origin, args, path)
    if _is_dataclass_type(origin):
        return _rebuild_dataclass(value, origin, args, path)
    if _is_namedtuple(origin):
        return _rebuild_namedtuple(value, origin, args, path)
    if origin is type:
        raise _mismatch(path, tp, value)
    if isinstance(origin, type):
        return _rebuild_class(value, origin, path, tv)
    return value


def _member_class(member: Any) -> Any:
    origin = typing.get_origin(member)
    if origin is typing.Annotated:
        return _member_class(typing.get_args(member)[0])
    return origin if origin is not None else member


def _fits_tag(member: Any, tag: str) -> bool:
    """Whether union member ``member`` is the type the recorded tag describes."""
    cls = _member_class(member)
    if not isinstance(cls, type):
        return False
    builtin = _TAG_TYPES.get(tag)
    if builtin is not None:
        return issubclass(cls, builtin) and _tag_of_class(cls) == tag
    _, _, name = tag.partition(":")
    return bool(name) and _qualname(cls) == name


def _tag_of_class(cls: type) -> str | None:
    tag: str | None = _FAST_TAGS.get(cls, _MISS)
    if tag is not _MISS:
        return tag
    try:
        return _class_tag(cls)
    except Exception:
        return f"object:{_qualname(cls)}"


def _top_annotation(tp: Any, tag: str) -> Any:
    """Refine a top-level annotation with the recorded tag, without adding any class."""
    origin = typing.get_origin(tp)
    if origin in _UNION_ORIGINS:
        members = typing.get_args(tp)
        preferred = [m for m in members if _fits_tag(m, tag)]
        if preferred and preferred[0] is not members[0]:
            rest = [m for m in members if m not in preferred]
            return typing.Union[tuple(preferred + rest)]
        return tp
    if origin in _ABSTRACT_SEQUENCES or origin in (cabc.Set, cabc.MutableSet):
        args = typing.get_args(tp)
        item = args[0] if args else Any
        if tag == "tuple":
            return tuple[item, ...]  # type: ignore[valid-type]
        if tag == "set":
            return set[item]  # type: ignore[valid-type]
        if tag == "frozenset":
            return frozenset[item]  # type: ignore[valid-type]
    return tp


_PLAIN_CONTAINERS: Final = (dict, list, cabc.Mapping, cabc.MutableMapping, cabc.Sequence)
_ANY_LEAVES: Final = (Any, object)


@functools.lru_cache(maxsize=1024)
def _plain_annotation(annotation: Any) -> type | None:
    """The JSON container type an annotation asks for when rebuilding it could only return the
    JSON value itself (``dict[str, Any]``, ``list[Any]``, ``dict``...), else None."""
    if annotation in (dict, list):
        return annotation  # type: ignore[no-any-return]
    origin = typing.get_origin(annotation)
    if origin not in _PLAIN_CONTAINERS:
        return None
    args = typing.get_args(annotation)
    is_map = origin in (dict, cabc.Mapping, cabc.MutableMapping)
    if is_map and args and args[0] is str:
        args = args[1:]  # JSON keys are strings already
    if not all(a in _ANY_LEAVES for a in args):
        return None
    return dict if is_map else list


def _is_plain_json(annotation: Any, value: Any) -> bool:
    try:
        container = _plain_annotation(annotation)
    except TypeError:  # an unhashable annotation: take the general path
        return False
    return container is not None and type(value) is container


def rebuild(value: Any, *, type_tag: str | None = None, annotation: Any = NO_ANNOTATION) -> Any:
    """Turn a recorded JSON value back into the type the live call returned.

    With an ``annotation`` the value is rebuilt into it recursively (``RebuildError`` when the
    data does not fit). Without one, or with ``Any``/``object``, only the fixed table of builtin
    tags applies; a class tag gives the plain JSON back. A value holding an unserialisable
    marker is returned untouched.
    """
    if type_tag is None and (annotation is NO_ANNOTATION or _is_plain_json(annotation, value)):
        return value  # the common case, on every replayed call: plain JSON stays plain JSON
    if _contains_marker(value):
        return value
    if annotation is NO_ANNOTATION or annotation is Any or annotation is object:
        if type_tag is None:
            return value
        rebuild_tag = _BUILTIN_TAGS.get(type_tag)
        return value if rebuild_tag is None else rebuild_tag(value, "output")
    if type_tag is not None:
        annotation = _top_annotation(annotation, type_tag)
    return _rebuild(value, annotation, "output", _NO_TVARS)
