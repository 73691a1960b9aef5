"""Regular expressions and JSON Schemas from a scenario file, run at a bounded cost.

A scenario file is untrusted, and so is the reply it is checked against: a backtracking
engine (Python's ``re``) takes exponential time on ``^(a+)+$`` against ``"a"*34 + "!"``. Every
pattern a file gives (``regex``, ``json_path.regex``, a schema's ``pattern`` and
``patternProperties``) runs on RE2, which matches in time linear in the text; a pattern RE2
cannot run (backreferences, lookaround) is refused when the file is read.

A ``json_schema`` may refer only inside itself (``#/$defs/…``, ``#anchor``): a ``$ref`` to a
URL or a file would make the runner fetch or read it, so it is refused when the file is read,
and the validator is given a registry that retrieves nothing.
"""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Final

from tracely_sdk.errors import MissingDependency

__all__ = [
    "LOOP",
    "PatternError",
    "compile_pattern",
    "schema_problem",
    "schema_validator",
    "search",
]

_REFS: Final = ("$ref", "$dynamicRef", "$recursiveRef")


LOOP: Final = "the schema's $refs lead back to themselves without reading the value (a loop)"


class PatternError(ValueError):
    """A pattern RE2 cannot run; the message says why."""


def _re2() -> Any:
    try:
        import re2
    except ImportError as exc:
        raise MissingDependency(
            "google-re2 (regular expressions in scenario files)", "scenarios"
        ) from exc
    return re2


@functools.lru_cache(maxsize=256)
def compile_pattern(pattern: str) -> Any:
    """``pattern`` compiled by RE2, or :class:`PatternError` naming what RE2 cannot do."""
    re2 = _re2()
    options = re2.Options()
    options.log_errors = False  # the error is raised to the caller, not written to stderr
    try:
        return re2.compile(pattern, options)
    except re2.error as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise PatternError(
            f"{reason}; patterns run on RE2, in linear time: backreferences and lookaround "
            "are not available"
        ) from None


def search(pattern: str, text: str) -> bool:
    """Whether ``pattern`` matches somewhere in ``text`` (like ``re.search``), in linear time."""
    return compile_pattern(pattern).search(text) is not None


# -- JSON Schema ---------------------------------------------------------------------------


def _walk(node: Any, at: str = "") -> Iterator[tuple[str, str, Any]]:
    """Every (location, key, value) of a schema's mappings, at any depth.

    Values of data keywords (``const``, ``enum``) are walked too: telling a keyword from a
    property of that name needs the draft's rules, and refusing a URL in data costs nothing."""
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield at, str(key), value
            yield from _walk(value, f"{at}/{key}")
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _walk(value, f"{at}/{i}")


def _pointer(schema: Any, fragment: str) -> bool:
    """Whether the JSON pointer ``fragment`` (after ``#``) names a place in ``schema``."""
    node = schema
    for raw in urllib.parse.unquote(fragment).split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return False
    return True


def schema_problem(schema: Mapping[str, Any]) -> str | None:
    """Why ``schema`` cannot be used as a scenario's ``json_schema``, or ``None``."""
    try:
        import jsonschema
    except ImportError as exc:
        raise MissingDependency("jsonschema (for json_schema checks)", "scenarios") from exc
    if "$schema" in schema:
        declared = schema["$schema"]
        if not isinstance(declared, str) or (
            jsonschema.validators.validator_for(schema, default=None) is None
        ):
            return f"unknown $schema {declared!r}; leave it out or name a JSON Schema draft"
    cls = jsonschema.validators.validator_for(schema)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        where = "".join(f"/{p}" for p in exc.absolute_path) or "/"
        return f"not a valid JSON Schema at {where}: {exc.message}"
    anchors = {
        v for _, k, v in _walk(schema) if k in ("$anchor", "$dynamicAnchor") and isinstance(v, str)
    }
    has_pattern_properties = False
    for at, key, value in _walk(schema):
        where = at or "/"
        if key in _REFS and isinstance(value, str):
            if not value.startswith("#"):
                return (
                    f"{key} {value!r} at {where} points outside the file; a scenario's schema "
                    "refers only inside itself (#/$defs/NAME)"
                )
            fragment = value[1:]
            found = fragment in anchors if fragment and not fragment.startswith("/") else None
            if found is False or (found is None and not _pointer(schema, fragment)):
                return f"{key} {value!r} at {where} names nothing in the schema"
        elif key in ("$id", "id") and isinstance(value, str) and at:
            if key == "$id" or ":" in value or "/" in value:
                return f"{key} at {where}: a scenario's schema has no nested identifiers"
        elif key == "pattern" and isinstance(value, str):
            try:
                compile_pattern(value)
            except PatternError as exc:
                return f"pattern at {where}: {exc}"
        elif key == "patternProperties" and isinstance(value, Mapping):
            has_pattern_properties = True
            for name in value:
                try:
                    compile_pattern(str(name))
                except PatternError as exc:
                    return f"patternProperties {name!r} at {where}: {exc}"
    if has_pattern_properties and any(k == "unevaluatedProperties" for _, k, _ in _walk(schema)):
        return "patternProperties with unevaluatedProperties is not supported in scenario schemas"
    validator = schema_validator(schema)
    probes: tuple[Any, ...] = (None, {}, [], "", 0, 0.5, True)
    try:
        for probe in probes:
            validator.is_valid(probe)
    except RecursionError:
        return LOOP
    return None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, properties: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in properties.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    known = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = [k for k in instance if k not in known and not any(search(p, k) for p in patterns)]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        names = ", ".join(repr(e) for e in sorted(extras))
        if patterns:
            verb = "does" if len(extras) == 1 else "do"
            shown = ", ".join(repr(p) for p in sorted(patterns))
            yield ValidationError(f"{names} {verb} not match any of the regexes: {shown}")
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(
                f"Additional properties are not allowed ({names} {verb} unexpected)"
            )


@functools.lru_cache(maxsize=16)
def _safe_class(cls: Any) -> Any:
    import jsonschema

    keywords: dict[str, Callable[..., Iterator[Any]]] = {"pattern": _pattern}
    if "patternProperties" in cls.VALIDATORS:
        keywords["patternProperties"] = _pattern_properties
    if "additionalProperties" in cls.VALIDATORS:
        keywords["additionalProperties"] = _additional_properties
    return jsonschema.validators.extend(cls, keywords)


def schema_validator(schema: Mapping[str, Any]) -> Any:
    """A validator for a schema :func:`schema_problem` accepted: RE2 for patterns, and a
    registry that retrieves nothing, so no reference can fetch a URL or read a file."""
    import jsonschema
    import referencing

    cls = _safe_class(jsonschema.validators.validator_for(schema))
    return cls(schema, registry=referencing.Registry())
