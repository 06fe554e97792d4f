"""`state.json`, the nightly channel's one small state object under the destination's prefix.

Everything a publish needs to know about the channel, so that publishing a commit costs a
bounded number of requests however long the history: no listing, no HEAD per file. It
holds the pointer (the commit `/nightly/` serves, its files, and the ETag each `/nightly/`
page has once written), the commits kept, those being uploaded, those being pruned, the
shapes their filenames are made from, and a generation counter. It is only ever written
by compare-and-swap (If-Match on the ETag it was read with), so two runs cannot both
change it from one state.

Per commit the record is short (`[commit, time, shape]`): a shape is a version's base
(`0.1.1`) and the wheel filenames with `{version}` in them, shared by every commit of one
matrix, from which each commit's keys are derived (release.nightly.pages).

The writer and the reader sit together; `from_bytes` checks every field (a state that is
not one is a PublishError naming the key, never trusted).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from packaging.utils import canonicalize_name

from release.errors import PublishError
from release.fsutil import UnreadableDocument, json_document
from release.wheelfile import NotAWheel, WheelName, is_wheel_name

STATE_SCHEMA = 1
MAX_STATE_BYTES = 16 * 2**20  # about 200,000 kept commits: far past matrix.yaml's keep limit
VERSION_FIELD = "{version}"
_SHA = re.compile(r"^[0-9a-f]{40}$")
_HEX64 = re.compile(r"^[0-9a-f]{64}$")
_MD5 = re.compile(r"^[0-9a-f]{32}(-[0-9]+)?$")


@dataclass(frozen=True, kw_only=True)
class Shape:
    """The filenames of one matrix: its version's base and each wheel's filename with
    `{version}` where the version goes (`k3_kernels-{version}+cu129-py3-none-...whl`)."""

    base: str
    wheels: tuple[str, ...]

    @property
    def id(self) -> str:
        text = json.dumps([self.base, sorted(self.wheels)], separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:12]

    def version(self, time: int) -> str:
        return f"{self.base}.dev{time}"

    def wheel_names(self, time: int) -> tuple[str, ...]:
        version = self.version(time)
        return tuple(w.replace(VERSION_FIELD, version) for w in self.wheels)

    @property
    def labels(self) -> tuple[str, ...]:
        """The local labels of its wheels ("" for the default variant), sorted."""
        found = set()
        for name in self.wheel_names(1):
            found.add(WheelName.parse(name).local_label or "")
        return tuple(sorted(found))


@dataclass(frozen=True, kw_only=True)
class Kept:
    """A commit whose whole matrix is uploaded and verified."""

    commit: str
    time: int
    shape: str

    @property
    def order(self) -> tuple[int, str]:
        """Newer sorts higher: by commit time, a tie broken by the commit id."""
        return (self.time, self.commit)


@dataclass(frozen=True, kw_only=True)
class Uploading:
    """A commit a run registered before uploading its files (`started`: that run's clock)."""

    commit: str
    time: int
    shape: str
    started: int


@dataclass(frozen=True, kw_only=True)
class Pruning:
    """A commit that fell out of retention; its objects are archived or deleted."""

    commit: str
    time: int
    shape: str
    action: Literal["archive", "delete"]


@dataclass(frozen=True, kw_only=True)
class NightlyFile:
    """A wheel as /nightly/ lists it."""

    filename: str
    sha256: str
    size: int
    metadata_sha256: str
    requires_python: str | None = None


@dataclass(frozen=True, kw_only=True)
class Pointer:
    """What /nightly/ serves: a commit, the generation that promoted it, the commit it
    replaced, its files, and each /nightly/ page's ETag (the MD5 of its bytes) once
    written."""

    commit: str
    time: int
    version: str
    generation: int
    previous: str | None
    files: tuple[NightlyFile, ...]
    pages: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class NightlyState:
    project: str
    generation: int = 0
    nightly: Pointer | None = None
    kept: tuple[Kept, ...] = ()  # newest first
    uploading: tuple[Uploading, ...] = ()
    pruning: tuple[Pruning, ...] = ()
    shapes: Mapping[str, Shape] = field(default_factory=dict)
    roots: tuple[str, ...] = ()  # the labels whose /nightly/ root pages are written

    def kept_commit(self, commit: str) -> Kept | None:
        return next((k for k in self.kept if k.commit == commit), None)

    def uploading_commit(self, commit: str) -> Uploading | None:
        return next((u for u in self.uploading if u.commit == commit), None)


# --- Writing. ---


def to_bytes(state: NightlyState) -> bytes:
    """The state as compact JSON: about 70 bytes a kept commit."""
    document: dict[str, Any] = {
        "schema": STATE_SCHEMA,
        "project": state.project,
        "generation": state.generation,
        "nightly": None if state.nightly is None else _pointer_json(state.nightly),
        "kept": [[k.commit, k.time, k.shape] for k in state.kept],
        "uploading": [
            {"commit": u.commit, "time": u.time, "shape": u.shape, "started": u.started}
            for u in state.uploading
        ],
        "pruning": [
            {"commit": p.commit, "time": p.time, "shape": p.shape, "action": p.action}
            for p in state.pruning
        ],
        "shapes": {
            key: {"base": s.base, "wheels": list(s.wheels)} for key, s in state.shapes.items()
        },
        "roots": list(state.roots),
    }
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


def _pointer_json(pointer: Pointer) -> dict[str, Any]:
    return {**asdict(pointer), "pages": dict(pointer.pages)}


# --- Reading. ---


def from_bytes(data: bytes, where: str, *, project: str | None = None) -> NightlyState:
    """The state in `data`; PublishError naming `where` and the bad key otherwise (any
    input, however large, deep or mistyped, gives one line). `project`: the state must be
    that project's, in this layout (its wheel names of that project), or it is refused."""
    if len(data) > MAX_STATE_BYTES:
        reason = f"{len(data)} bytes, more than the {MAX_STATE_BYTES} a state may have"
        raise PublishError(f"{where} is not a nightly state ({reason})", hint=_RESTORE)
    try:
        state = _state(json_document(data, where))
    except (ValueError, TypeError, KeyError) as error:
        reason = error.reason if isinstance(error, UnreadableDocument) else str(error)[:200]
        raise PublishError(f"{where} is not a nightly state ({reason})", hint=_RESTORE) from None
    if project is not None:
        require_project(state, project, where)
    return state


_RESTORE = (
    "it is written by `release publish --channel nightly` only: restore it from the "
    "bucket's versioning, or remove it to start the channel again"
)


def require_project(state: NightlyState, project: str, where: str) -> None:
    """PublishError unless `state` is `project`'s in this layout: its project and every
    wheel name of its shapes (another project's state is never acted on)."""
    wanted = canonicalize_name(project)
    try:
        found = {canonicalize_name(state.project)} | {
            WheelName.parse(name).project
            for shape in state.shapes.values()
            for name in shape.wheel_names(1)
        }
    except NotAWheel as error:  # a shape whose base is no version
        reason = f"a wheel name of its shapes is {error}"
        raise PublishError(f"{where} is not a nightly state ({reason})", hint=_RESTORE) from None
    others = sorted(found - {wanted})
    if others:
        raise PublishError(
            f"{where} is the nightly state of {others[0][:60]!r}, not of {project!r}: "
            "nothing was changed",
            hint="each project needs its own prefix: fix the destination's bucket or prefix "
            "in matrix.yaml",
        )


def _int(value: object, key: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{key}: not a whole number")
    return value


def _str(value: object, key: str, pattern: re.Pattern[str] | None = None) -> str:
    if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
        raise ValueError(f"{key}: not a valid value")
    return value


def _list(value: object, key: str) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError(f"{key}: not a list")
    return value


def _dict(value: object, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{key}: not an object")
    return value


def _state(document: object) -> NightlyState:
    root = _dict(document, "state")
    if root.get("schema") != STATE_SCHEMA:
        raise ValueError(f"schema: not {STATE_SCHEMA}")
    shapes = {
        _str(key, "shapes"): _shape(raw, f"shapes.{key}")
        for key, raw in _dict(root.get("shapes"), "shapes").items()
    }
    for key, shape in shapes.items():
        if shape.id != key:
            raise ValueError(f"shapes.{key}: its id is {shape.id}")

    def shape_of(value: object, key: str) -> str:
        name = _str(value, key)
        if name not in shapes:
            raise ValueError(f"{key}: no shape {name[:20]!r}")
        return name

    kept = []
    for index, raw in enumerate(_list(root.get("kept"), "kept")):
        row = _list(raw, f"kept[{index}]")
        if len(row) != 3:
            raise ValueError(f"kept[{index}]: not [commit, time, shape]")
        commit, time, shape = row
        kept.append(
            Kept(
                commit=_str(commit, f"kept[{index}]", _SHA),
                time=_int(time, f"kept[{index}]"),
                shape=shape_of(shape, f"kept[{index}]"),
            )
        )
    uploading = []
    for i, raw in enumerate(_list(root.get("uploading"), "uploading")):
        u = _dict(raw, f"uploading[{i}]")
        uploading.append(
            Uploading(
                commit=_str(u.get("commit"), f"uploading[{i}].commit", _SHA),
                time=_int(u.get("time"), f"uploading[{i}].time"),
                shape=shape_of(u.get("shape"), f"uploading[{i}].shape"),
                started=_int(u.get("started"), f"uploading[{i}].started"),
            )
        )
    pruning = []
    for i, raw in enumerate(_list(root.get("pruning"), "pruning")):
        p = _dict(raw, f"pruning[{i}]")
        action = p.get("action")
        if action not in ("archive", "delete"):
            raise ValueError(f"pruning[{i}].action: not archive or delete")
        pruning.append(
            Pruning(
                commit=_str(p.get("commit"), f"pruning[{i}].commit", _SHA),
                time=_int(p.get("time"), f"pruning[{i}].time"),
                shape=shape_of(p.get("shape"), f"pruning[{i}].shape"),
                action=action,
            )
        )
    raw_pointer = root.get("nightly")
    return NightlyState(
        project=_str(root.get("project"), "project"),
        generation=_int(root.get("generation"), "generation"),
        nightly=None if raw_pointer is None else _pointer(raw_pointer),
        kept=tuple(kept),
        uploading=tuple(uploading),
        pruning=tuple(pruning),
        shapes=shapes,
        roots=tuple(_str(r, "roots") for r in _list(root.get("roots"), "roots")),
    )


def _shape(raw: object, key: str) -> Shape:
    data = _dict(raw, key)
    wheels = tuple(_str(w, f"{key}.wheels") for w in _list(data.get("wheels"), f"{key}.wheels"))
    for name in wheels:
        if VERSION_FIELD not in name or "/" in name:
            raise ValueError(f"{key}.wheels: {name[:40]!r} is not a wheel filename template")
        try:
            WheelName.parse(name.replace(VERSION_FIELD, "0.dev1"))
        except NotAWheel:
            raise ValueError(f"{key}.wheels: {name[:40]!r} is not a wheel filename") from None
    return Shape(base=_str(data.get("base"), f"{key}.base"), wheels=wheels)


def _pointer(raw: object) -> Pointer:
    data = _dict(raw, "nightly")
    files = []
    for index, item in enumerate(_list(data.get("files"), "nightly.files")):
        f = _dict(item, f"nightly.files[{index}]")
        requires = f.get("requires_python")
        filename = _str(f.get("filename"), f"nightly.files[{index}].filename")
        if not is_wheel_name(filename):
            raise ValueError(f"nightly.files[{index}].filename is not a wheel's name")
        files.append(
            NightlyFile(
                filename=filename,
                sha256=_str(f.get("sha256"), f"nightly.files[{index}].sha256", _HEX64),
                size=_int(f.get("size"), f"nightly.files[{index}].size"),
                metadata_sha256=_str(
                    f.get("metadata_sha256"), f"nightly.files[{index}].metadata_sha256", _HEX64
                ),
                requires_python=requires if isinstance(requires, str) else None,
            )
        )
    previous = data.get("previous")
    return Pointer(
        commit=_str(data.get("commit"), "nightly.commit", _SHA),
        time=_int(data.get("time"), "nightly.time"),
        version=_str(data.get("version"), "nightly.version"),
        generation=_int(data.get("generation"), "nightly.generation"),
        previous=None if previous is None else _str(previous, "nightly.previous", _SHA),
        files=tuple(files),
        pages={
            _str(k, "nightly.pages"): _str(v, f"nightly.pages.{k}", _MD5)
            for k, v in _dict(data.get("pages"), "nightly.pages").items()
        },
    )
