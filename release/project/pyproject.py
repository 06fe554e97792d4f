"""What a pyproject.toml and a setup.cfg say: the build requirements (a torch pin,
scikit-build-core), the build backend and where it lives (`backend-path`), and [project]'s
name, version, `dynamic`, requires-python and Python classifiers, each with its line. Pure:
text in, records out.
"""

from __future__ import annotations

import configparser
import re
from dataclasses import dataclass

from packaging.requirements import InvalidRequirement, Requirement

from release import pep508
from release.fsutil import UnreadableDocument, toml_document
from release.project.places import Place, Said, TomlPlaces, ini_line

PYPROJECT = "pyproject.toml"
SETUP_CFG = "setup.cfg"
SCIKIT_BUILD = "scikit-build-core"
_PYTHON_CLASSIFIER = re.compile(r"^Programming Language :: Python :: (3\.\d{1,3})$")
# the tables whose keys a PyProject places at their lines
_PLACED = (
    "build-system",
    "project",
    "tool.setuptools.dynamic",
    "tool.setuptools.package-data",
    "tool.scikit-build",
    "tool.scikit-build.wheel",
)


@dataclass(frozen=True, kw_only=True)
class BuildRequirement:
    requirement: Requirement
    place: Place


@dataclass(frozen=True, kw_only=True)
class PyProject:
    requires: tuple[BuildRequirement, ...]
    build_backend: Said | None
    backend_path: tuple[str, ...]
    has_project: bool  # a [project] table
    name: Said | None
    version: Said | None  # a literal, or `dynamic` (expression "dynamic") where it is there
    requires_python: Said | None
    pythons: tuple[str, ...]  # the Python 3.X classifiers
    version_attr: Said | None  # [tool.setuptools.dynamic] version = {attr = "pkg.__version__"}
    problem: str | None = None
    version_from: Said | None = None  # [tool.setuptools.dynamic] version = {file = "pkg/VERSION"}
    package_data: tuple[Said, ...] = ()  # [tool.setuptools.package-data]: "pkg/include/**/*"
    dependencies: tuple[Said, ...] = ()  # [project] dependencies
    # [tool.scikit-build] wheel.cmake = false: scikit-build-core packages, never runs CMake
    cmake_off: Place | None = None

    def requirement(self, name: str) -> BuildRequirement | None:
        """The build requirement on `name` (canonical compare), if any."""
        wanted = name.lower().replace("_", "-")
        for found in self.requires:
            if found.requirement.name.lower().replace("_", "-") == wanted:
                return found
        return None


@dataclass(frozen=True, kw_only=True)
class SetupCfg:
    name: Said | None
    version: Said | None  # `attr: pkg.__version__` and `file:` are expressions
    python_requires: Said | None
    limited_api_floor: Said | None  # [bdist_wheel] py_limited_api
    problem: str | None = None


def read_pyproject(text: str) -> PyProject:
    try:
        data = toml_document(text, PYPROJECT)
    except UnreadableDocument as error:
        return _broken(str(error))
    places = TomlPlaces(text, _PLACED)  # every line found in one pass
    system = _table(data.get("build-system"))
    project = _table(data.get("project"))
    for key in ("name", "version"):
        if key in project and not isinstance(project[key], str):
            line = places.line("project", key)
            return _broken(
                f"{PYPROJECT}{f':{line}' if line else ''}: [project] {key} must be a string, "
                f"not {type(project[key]).__name__} {project[key]!r}"
            )
    parsed = []
    for entry in _list(system.get("requires")):
        if not isinstance(entry, str):
            continue
        try:
            parsed.append(pep508.requirement(entry))
        except InvalidRequirement:
            continue
    lines = places.lines("build-system", "requires", [r.name for r in parsed])
    requires = [
        BuildRequirement(requirement=r, place=_at(line))
        for r, line in zip(parsed, lines, strict=True)
    ]
    dependencies = [d for d in _list(project.get("dependencies")) if isinstance(d, str)]
    backend = system.get("build-backend")
    paths = _list(system.get("backend-path"))
    dynamic = _list(project.get("dynamic"))
    return PyProject(
        requires=tuple(requires),
        build_backend=_said(places, "build-system", "build-backend", backend),
        backend_path=tuple(p for p in paths if isinstance(p, str)),
        has_project="project" in data,
        name=_said(places, "project", "name", project.get("name")),
        version=_version(places, project, dynamic),
        requires_python=_said(places, "project", "requires-python", project.get("requires-python")),
        pythons=_classifier_pythons(project.get("classifiers")),
        version_attr=_version_attr(places, data),
        version_from=_version_from(places, data),
        package_data=_package_data(places, data),
        cmake_off=_cmake_off(places, data),
        dependencies=tuple(
            Said(place=_at(line), value=d)
            for d, line in zip(
                dependencies,
                places.lines("project", "dependencies", dependencies),
                strict=True,
            )
        ),
    )


def _broken(problem: str) -> PyProject:
    return PyProject(
        requires=(),
        build_backend=None,
        backend_path=(),
        has_project=False,
        name=None,
        version=None,
        requires_python=None,
        pythons=(),
        version_attr=None,
        problem=problem,
    )


def _table(value: object) -> dict[str, object]:
    return value if isinstance(value, dict) else {}


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def _at(line: int | None, file: str = PYPROJECT) -> Place:
    return Place(file=file, line=line)


def _said(places: TomlPlaces, table: str, key: str, value: object) -> Said | None:
    if value is None:
        return None
    place = _at(places.line(table, key))
    if isinstance(value, str):
        return Said(place=place, value=value)
    return Said(place=place, expression=repr(value))


def _version(places: TomlPlaces, project: dict[str, object], dynamic: object) -> Said | None:
    if "version" in project:
        return _said(places, "project", "version", project["version"])
    if isinstance(dynamic, list) and "version" in dynamic:
        return Said(place=_at(places.line("project", "dynamic")), expression="dynamic")
    return None


def _version_attr(places: TomlPlaces, data: dict[str, object]) -> Said | None:
    tool = _table(_table(_table(data.get("tool")).get("setuptools")).get("dynamic"))
    version = _table(tool.get("version"))
    attr = version.get("attr")
    if not isinstance(attr, str):
        return None
    return Said(place=_at(places.line("tool.setuptools.dynamic", "version")), value=attr)


def _version_from(places: TomlPlaces, data: dict[str, object]) -> Said | None:
    tool = _table(_table(_table(data.get("tool")).get("setuptools")).get("dynamic"))
    found = _table(tool.get("version")).get("file")
    if isinstance(found, list) and len(found) == 1:
        found = found[0]
    if not isinstance(found, str):
        return None
    return Said(place=_at(places.line("tool.setuptools.dynamic", "version")), value=found)


def _package_data(places: TomlPlaces, data: dict[str, object]) -> tuple[Said, ...]:
    """Each pattern of [tool.setuptools.package-data], under its package's directory."""
    table = _table(_table(_table(data.get("tool")).get("setuptools")).get("package-data"))
    found = []
    for package, patterns in table.items():
        place = _at(places.line("tool.setuptools.package-data", package))
        base = package.replace(".", "/") + "/" if package not in ("", "*") else ""
        found += [Said(place=place, value=base + p) for p in _list(patterns) if isinstance(p, str)]
    return tuple(found)


def _cmake_off(places: TomlPlaces, data: dict[str, object]) -> Place | None:
    """Where [tool.scikit-build] says `wheel.cmake = false`, if it does."""
    wheel = _table(_table(_table(data.get("tool")).get("scikit-build")).get("wheel"))
    if wheel.get("cmake") is not False:
        return None
    line = places.line("tool.scikit-build", "wheel.cmake") or places.line(
        "tool.scikit-build.wheel", "cmake"
    )
    return _at(line)


def _classifier_pythons(classifiers: object) -> tuple[str, ...]:
    if not isinstance(classifiers, list):
        return ()
    found = [
        m.group(1) for c in classifiers if isinstance(c, str) and (m := _PYTHON_CLASSIFIER.match(c))
    ]
    return tuple(sorted(set(found), key=lambda v: int(v.split(".")[1])))


def read_setup_cfg(text: str) -> SetupCfg:
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read_string(text)
    except configparser.Error as error:
        return SetupCfg(
            name=None,
            version=None,
            python_requires=None,
            limited_api_floor=None,
            problem=f"{SETUP_CFG}: not an INI file: {error}".splitlines()[0],
        )

    def said(section: str, key: str) -> Said | None:
        value = parser.get(section, key, fallback=None)
        if value is None:
            return None
        place = Place(file=SETUP_CFG, line=ini_line(text, section, key))
        value = value.strip()
        if value.startswith(("attr:", "file:")):
            return Said(place=place, expression=value)
        return Said(place=place, value=value)

    return SetupCfg(
        name=said("metadata", "name"),
        version=said("metadata", "version"),
        python_requires=said("options", "python_requires"),
        limited_api_floor=said("bdist_wheel", "py_limited_api"),
    )
