"""Where tracely keeps its files, and cases as plain JSON files that can be committed and reviewed.

``export_cases(store, DIR)`` writes one ``DIR/<case_id>.json`` per case: the case and its full
history, with sorted keys, a 2-space indent and a trailing newline, so exporting twice gives the
same bytes and a recapture shows in review as one appended history entry::

    {
      "created_at": 1718000000000000000,
      "entrypoint": "weather_agent:run",
      "format": "tracely.case/1",
      "history": [
        {"bundle": {...}, "created_at": ..., "expected_output": ..., "input": {...},
         "note": "promoted from trace ...", "source_trace_id": "...", "version": 1}
      ],
      "id": "paris-weather",
      "name": "Paris weather",
      "tags": ["smoke"],
      "checksum": {"entrypoint": "sha256:...", "history[0].bundle": "sha256:...", ...},
      "updated_at": 1718000000000000000,
      "version": 1
    }

The case's current content is its history entry with the case's ``version``. Every file carries
a ``checksum``: a SHA-256 per field replay uses (``id``, ``entrypoint``, ``version`` and each
history entry's ``version``, ``input``, ``expected_output`` and ``bundle``; see ``_seal``). A
file without one, or with one that does not match, is refused naming the file and the field; a
deliberate hand edit is sealed with ``tracely cases reseal FILE``, which prints the fields that
changed; an edit inside a recording (a history entry's ``bundle``, which carries a checksum of
its own) only with ``--accept-recording-edit``, which also shows what changed in it. A hand-written file needs only ``format``, ``id``, ``name`` and ``history`` entries
with ``version``, ``input`` and ``bundle``, and then a reseal; the rest defaults. ``import_cases`` reads every ``*.json`` in the directory, checks
them all first and writes nothing if any is malformed (:class:`CaseFileError` names the file and
the field); each case is then stored with exactly the file's history, replacing a stored case of
the same id. Exporting never deletes files of cases that are no longer in the store.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from tracely_otel import BundleFormatError, bundle_checksum, validate_bundle, value_problem
from tracely_otel import seal as seal_bundle
from tracely_sdk.errors import StoreError
from tracely_sdk.store._model import (
    MAX_STORED_INT,
    Case,
    CaseVersion,
    InvalidCase,
    normalise_tags,
    now_ns,
    validate_case_id,
    validate_entrypoint,
)
from tracely_sdk.store._seal import broken_fields, case_file_fields, seal

if TYPE_CHECKING:
    from tracely_sdk.store._base import Store

__all__ = [
    "CASE_FILE_FORMAT",
    "CaseFileError",
    "case_document",
    "case_file_bytes",
    "export_cases",
    "import_cases",
    "project_root",
    "read_case_file",
    "reseal_case_file",
    "tracely_dir",
]

CASE_FILE_FORMAT = "tracely.case/1"
_CASE_KEYS = frozenset(
    {
        "format",
        "id",
        "name",
        "entrypoint",
        "tags",
        "version",
        "created_at",
        "updated_at",
        "history",
        "checksum",
    }
)
_VERSION_KEYS = frozenset(
    {"version", "input", "expected_output", "bundle", "source_trace_id", "created_at", "note"}
)
_MARKERS = ("pyproject.toml", ".git")


def project_root(start: str | os.PathLike[str] | None = None) -> Path:
    """The nearest ancestor of ``start`` (default: the cwd) holding ``pyproject.toml`` or ``.git``.

    Falls back to ``start`` itself when no ancestor has either.
    """
    here = Path(start if start is not None else os.getcwd()).absolute()
    for directory in (here, *here.parents):
        if any((directory / marker).exists() for marker in _MARKERS):
            return directory
    return here


def tracely_dir(start: str | os.PathLike[str] | None = None) -> Path:
    """The project's ``.tracely`` directory (not created here)."""
    return project_root(start) / ".tracely"


class CaseFileError(StoreError, ValueError):
    """A case file is malformed; ``path`` and ``field`` say where."""

    def __init__(self, path: Path, field: str | None, problem: str) -> None:
        where = f"{path}: {field}" if field else str(path)
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.field = field
        self.problem = problem


# export ---------------------------------------------------------------------------------


def case_document(case: Case, history: Iterable[CaseVersion]) -> dict[str, Any]:
    """The JSON object a case file holds, sealed with its ``checksum``."""
    doc: dict[str, Any] = {
        "format": CASE_FILE_FORMAT,
        "id": case.id,
        "name": case.name,
        "entrypoint": case.entrypoint,
        "tags": list(case.tags),
        "version": case.version,
        "created_at": case.created_at,
        "updated_at": case.updated_at,
        "history": [v.to_dict() for v in sorted(history, key=lambda v: v.version)],
    }
    doc["checksum"] = seal(case_file_fields(doc))
    return doc


def case_file_bytes(case: Case, history: Iterable[CaseVersion]) -> bytes:
    """The exact bytes of a case file: sorted keys, 2-space indent, trailing newline."""
    return orjson.dumps(
        case_document(case, history),
        option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE,
    )


def _case_path(directory: Path, case_id: str) -> Path:
    validate_case_id(case_id)
    path = directory / f"{case_id}.json"
    if path.resolve().parent != directory.resolve():  # pragma: no cover - the id rules forbid it
        raise InvalidCase(f"case id {case_id!r} does not name a file inside {directory}")
    return path


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def export_cases(
    store: Store,
    directory: str | os.PathLike[str],
    *,
    case_ids: Iterable[str] | None = None,
) -> list[Path]:
    """Write ``DIR/<case_id>.json`` for every case (or those in ``case_ids``); returns the paths.

    A file whose content is already identical is left untouched.
    """
    target = Path(directory)
    target.mkdir(parents=True, exist_ok=True)
    cases = (
        [store.get_case(cid) for cid in case_ids] if case_ids is not None else store.list_cases()
    )
    written = []
    for case in cases:
        if case.problem is not None:  # sealing it in a file would vouch for what was changed
            raise StoreError(f"cannot export {case.id}: {case.problem}")
    for case in cases:
        path = _case_path(target, case.id)
        data = case_file_bytes(case, store.case_history(case.id))
        try:
            unchanged = path.read_bytes() == data
        except OSError:
            unchanged = False
        if not unchanged:
            _write_atomically(path, data)
        written.append(path)
    return written


# import ---------------------------------------------------------------------------------


def _int(path: Path, field: str, value: Any, *, minimum: int = 0) -> int:
    if (
        not isinstance(value, int)
        or isinstance(value, bool)
        or not minimum <= value <= MAX_STORED_INT
    ):
        raise CaseFileError(
            path, field, f"must be an integer from {minimum} to {MAX_STORED_INT}, got {value!r}"
        )
    return value


def _opt_str(path: Path, field: str, value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise CaseFileError(path, field, f"must be a string or null, got {value!r}")
    return value


def _read_version(path: Path, field: str, case_id: str, raw: Any, default_ns: int) -> CaseVersion:
    if not isinstance(raw, Mapping):
        raise CaseFileError(path, field, "each history entry must be an object")
    unknown = sorted(set(raw) - _VERSION_KEYS)
    if unknown:
        raise CaseFileError(
            path, f"{field}.{unknown[0]}", f"unknown field (allowed: {sorted(_VERSION_KEYS)})"
        )
    for key in ("version", "input", "bundle"):
        if key not in raw:
            raise CaseFileError(path, f"{field}.{key}", "is required")
    version = _int(path, f"{field}.version", raw["version"], minimum=1)
    if raw["input"] is None:
        raise CaseFileError(path, f"{field}.input", "must be the recorded agent input, not null")
    for key in ("input", "expected_output"):
        problem = value_problem(raw.get(key))
        if problem is not None:
            raise CaseFileError(path, f"{field}.{key}", problem)
    try:
        bundle = validate_bundle(raw["bundle"])
    except BundleFormatError as exc:
        raise CaseFileError(path, f"{field}.bundle", str(exc)) from None
    return CaseVersion(
        case_id=case_id,
        version=version,
        input=raw["input"],
        expected_output=raw.get("expected_output"),
        bundle=bundle,
        source_trace_id=_opt_str(path, f"{field}.source_trace_id", raw.get("source_trace_id")),
        created_at=_int(path, f"{field}.created_at", raw.get("created_at", default_ns)),
        note=_opt_str(path, f"{field}.note", raw.get("note")),
    )


def _load_doc(path: Path) -> Mapping[str, Any]:
    try:
        doc = orjson.loads(path.read_bytes())
    except OSError as exc:
        raise CaseFileError(path, None, f"cannot be read: {exc}") from None
    except orjson.JSONDecodeError as exc:
        raise CaseFileError(path, None, f"is not JSON: {exc}") from None
    if not isinstance(doc, Mapping):
        raise CaseFileError(path, None, "must hold a JSON object")
    unknown = sorted(set(doc) - _CASE_KEYS)
    if unknown:
        raise CaseFileError(path, unknown[0], f"unknown field (allowed: {sorted(_CASE_KEYS)})")
    if doc.get("format") != CASE_FILE_FORMAT:
        raise CaseFileError(
            path, "format", f"must be {CASE_FILE_FORMAT!r}, got {doc.get('format')!r}"
        )
    return doc


def _check_seal(path: Path, doc: Mapping[str, Any]) -> None:
    if "checksum" not in doc:
        raise CaseFileError(
            path,
            "checksum",
            "is missing, so nothing shows the file holds what was exported: if you wrote or "
            f"edited it on purpose, review it and run `tracely cases reseal {path}`",
        )
    broken = broken_fields(doc["checksum"], case_file_fields(doc))
    if broken:
        raise CaseFileError(
            path,
            broken[0],
            "does not match the file's checksum: it was changed after the file was sealed"
            + (f" (so were {', '.join(broken[1:])})" if broken[1:] else "")
            + f"; if the change is deliberate, review it and run `tracely cases reseal {path}`",
        )


def read_case_file(path: str | os.PathLike[str]) -> tuple[Case, list[CaseVersion]]:
    """Parse and check one case file; :class:`CaseFileError` names the field at fault.

    A file without a ``checksum``, or whose checksum does not match what replay would use, is
    refused (see :func:`reseal_case_file`).
    """
    path = Path(path)
    doc = _load_doc(path)
    parsed = _parse_doc(path, doc)
    _check_seal(path, doc)
    return parsed


def edited_recordings(path: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """The recordings (history bundles) of a case file that were changed after they were
    recorded, by field (``history[0].bundle``): each is well formed but no longer matches its
    own checksum. A recording edited by hand is not one tracely made, so reseal refuses it
    unless asked to accept it."""
    return _edited(_load_doc(Path(path)))


def _edited(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    history = doc.get("history")
    edited: dict[str, dict[str, Any]] = {}
    for i, entry in enumerate(history if isinstance(history, list) else ()):
        bundle = entry.get("bundle") if isinstance(entry, Mapping) else None
        if not isinstance(bundle, Mapping) or "checksum" not in bundle:
            continue
        content = {k: v for k, v in bundle.items() if k != "checksum"}
        try:
            validate_bundle(content)
            if bundle_checksum(content) == bundle["checksum"]:
                continue
        except BundleFormatError:
            continue  # not a recording at all: the import check names what is wrong
        edited[f"history[{i}].bundle"] = content
    return edited


def reseal_case_file(
    path: str | os.PathLike[str], *, accept_recording_edit: bool = False
) -> list[str]:
    """Seal a case file edited by hand: check it as an import would, then write its new
    ``checksum``. Returns the fields whose content changed since the last seal (every field
    when the file had none); an empty list leaves the file untouched.

    A recording changed inside (see :func:`edited_recordings`) is refused, naming the field,
    unless ``accept_recording_edit``: then it is sealed as it now is, too."""
    path = Path(path)
    doc = dict(_load_doc(path))
    edited = _edited(doc)
    if edited and not accept_recording_edit:
        field = next(iter(edited))
        raise CaseFileError(
            path,
            field,
            "the recording was changed after it was recorded (it no longer matches its own "
            "checksum); if that edit is deliberate, run `tracely cases reseal "
            f"--accept-recording-edit {path}`, which shows what changed in it and seals it",
        )
    if edited:
        history = [dict(entry) for entry in doc["history"]]
        for field, content in edited.items():
            index = int(field[len("history[") : field.index("]")])
            history[index]["bundle"] = seal_bundle(validate_bundle(content))
        doc["history"] = history
    _parse_doc(path, doc)
    fields = case_file_fields(doc)
    changed = broken_fields(doc.get("checksum"), fields) if "checksum" in doc else list(fields)
    if changed:
        sealed = {**doc, "checksum": seal(fields)}
        _write_atomically(
            path,
            orjson.dumps(
                sealed,
                option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS | orjson.OPT_APPEND_NEWLINE,
            ),
        )
    return changed


def _parse_doc(path: Path, doc: Mapping[str, Any]) -> tuple[Case, list[CaseVersion]]:
    case_id = doc.get("id")
    try:
        validate_case_id(case_id)
    except InvalidCase as exc:
        raise CaseFileError(path, "id", str(exc)) from None
    assert isinstance(case_id, str)
    if path.name != f"{case_id}.json":
        raise CaseFileError(path, "id", f"case {case_id!r} must be in a file named {case_id}.json")
    name = doc.get("name")
    if not isinstance(name, str) or not name.strip():
        raise CaseFileError(path, "name", f"must be a non-empty string, got {name!r}")
    try:
        entrypoint = validate_entrypoint(doc.get("entrypoint"))
    except InvalidCase as exc:
        raise CaseFileError(path, "entrypoint", str(exc)) from None
    try:
        tags = normalise_tags(doc.get("tags", []))
    except (InvalidCase, TypeError) as exc:
        raise CaseFileError(path, "tags", str(exc)) from None
    raw_history = doc.get("history")
    if not isinstance(raw_history, list) or not raw_history:
        raise CaseFileError(path, "history", "must be a non-empty list of versions")
    now = now_ns()
    history = [
        _read_version(path, f"history[{i}]", case_id, raw, now) for i, raw in enumerate(raw_history)
    ]
    by_version: dict[int, CaseVersion] = {}
    for i, v in enumerate(history):
        if v.version in by_version:
            raise CaseFileError(path, f"history[{i}].version", f"version {v.version} appears twice")
        by_version[v.version] = v
    latest = max(by_version)
    version = _int(path, "version", doc.get("version", latest), minimum=1)
    if version != latest:
        raise CaseFileError(
            path, "version", f"is {version} but the history's latest version is {latest}"
        )
    current = by_version[version]
    created_at = _int(path, "created_at", doc.get("created_at", min(v.created_at for v in history)))
    updated_at = _int(path, "updated_at", doc.get("updated_at", current.created_at))
    case = Case(
        id=case_id,
        name=name,
        entrypoint=entrypoint,
        input=current.input,
        expected_output=current.expected_output,
        bundle=current.bundle,
        source_trace_id=current.source_trace_id,
        version=version,
        tags=tags,
        created_at=created_at,
        updated_at=updated_at,
    )
    return case, sorted(history, key=lambda v: v.version)


def import_cases(store: Store, source: str | os.PathLike[str]) -> list[Case]:
    """Import every ``*.json`` case file in the directory ``source`` (or the one file ``source``).

    Every file is checked before anything is written: a malformed file raises
    :class:`CaseFileError` and no case is imported.
    """
    source = Path(source)
    if source.is_file():
        files = [source]
    elif source.is_dir():
        files = sorted(
            p for p in source.glob("*.json") if p.is_file() and not p.name.startswith(".")
        )
    else:
        raise StoreError(f"no case file or directory at {source}")
    parsed = [read_case_file(p) for p in files]
    return [store.put_case(case, history) for case, history in parsed]
