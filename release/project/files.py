"""A kernel project's files, read once (`read_project_files`, the edge), and what they say
together (pure): its name and version (`naming`), as the matrix loader and `release init`
take them.

Name and version come from pyproject.toml's [project] where it has them; a version in
`dynamic` from setup.py's setup(version=...), setup.cfg, or an `attr:` whose module sets
it as a literal (setuptools reads `attr:` the same way before it imports anything); a
project without [project] from setup.py's setup() and setup.cfg's [metadata]. What is
computed is said with its place, for the build backend to answer. A release whose prepare
step writes the version into a file (matrix.yaml's `build.prepare.version-file`) reads a
computed version from that file (`read_version_file`).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

from packaging.utils import InvalidName, canonicalize_name
from packaging.version import Version

from release.errors import ConfigError, FileError, shown
from release.fsutil import not_utf8
from release.project.cmakelists import CMAKELISTS, CMakeLists, read_cmakelists
from release.project.places import Place, Said
from release.project.pyproject import (
    PYPROJECT,
    SETUP_CFG,
    PyProject,
    SetupCfg,
    read_pyproject,
    read_setup_cfg,
)
from release.project.pysource import decode_python
from release.project.setuppy import SetupPy, read_setup_py

SETUP_PY = "setup.py"
BUILD_FILES = (PYPROJECT, SETUP_CFG, SETUP_PY, CMAKELISTS)  # what the project is read from
# A build file is read no further: setup.py files of 25 MB are read in seconds; one of a
# gigabyte (or a link to /dev/zero's kin in /proc, whose size says 0) is not a build file.
MAX_PROJECT_FILE = 64 * 2**20


@dataclass(frozen=True, kw_only=True)
class ProjectFiles:
    """The texts of a project's build files (None: absent), keyed by their path in it."""

    directory: Path
    texts: dict[str, str | None] = field(default_factory=dict)
    # setup.py, pyproject.toml and setup.cfg read once, where `read_project_files` read them
    setup_py: SetupPy | None = None
    pyproject: PyProject | None = None
    setup_cfg: SetupCfg | None = None

    def text(self, name: str) -> str | None:
        return self.texts.get(name)

    @cached_property
    def said(self) -> Reading:
        """What the files say (`reading`), read the first time it is asked: init, the
        layout and the decision ask it of the same files."""
        return _reading(self)


@dataclass(frozen=True, kw_only=True)
class Reading:
    """What the files say, file by file."""

    directory: Path
    pyproject: PyProject | None
    setup_py: SetupPy | None
    setup_cfg: SetupCfg | None
    cmakelists: CMakeLists | None
    backend_source: str | None  # the text of an in-tree build backend (backend-path)
    version_module: tuple[str, SetupPy] | None  # the module an `attr:` version names
    version_file: SetupPy | None = None  # the file setup.py's version function reads


@dataclass(frozen=True, kw_only=True)
class Naming:
    """The project's name and version as its files say them: a `Said` each (a literal, or
    where it is computed), or a `problem` that no build backend could fix."""

    name: Said | None
    version: Said | None
    problem: str | None = None
    # the problem is the prepare step's version-file's (matrix.yaml names that key)
    in_version_file: bool = False

    @property
    def static(self) -> tuple[str, Version] | None:
        if self.name is None or self.version is None or self.problem is not None:
            return None
        if self.name.value is None or self.version.value is None:
            return None
        return self.name.value, Version(self.version.value)

    def computed(self) -> list[tuple[str, Said | None]]:
        """("name"/"version", where it is computed), for each that is not a literal."""
        return [
            (what, said)
            for what, said in (("name", self.name), ("version", self.version))
            if said is None or not said.literal
        ]

    def unsaid(self, directory: Path) -> str:
        """Which of name and version no file states, and where each is computed:
        `/p/setup.py:57: the version is computed (get_version())`."""
        parts = []
        for what, said in self.computed():
            if said is None:
                parts.append(f"{directory}: no build file names the project's {what}")
            elif said.expression == "dynamic":
                parts.append(f"{said.place.at(directory)}: the {what} is dynamic")
            else:
                parts.append(
                    f"{said.place.at(directory)}: the {what} is computed ({said.expression})"
                )
        return "; ".join(parts)


def read_project_files(directory: Path) -> ProjectFiles:
    """The build files of the project in `directory`: pyproject.toml, setup.py, setup.cfg,
    CMakeLists.txt, an in-tree backend's module and the module of an `attr:` version."""
    texts: dict[str, str | None] = {}
    for name in (PYPROJECT, SETUP_PY, SETUP_CFG, CMAKELISTS):
        texts[name] = _read(directory / name)
    pyproject = read_pyproject(texts[PYPROJECT] or "") if texts[PYPROJECT] else None
    setup_cfg = read_setup_cfg(texts[SETUP_CFG] or "") if texts[SETUP_CFG] else None
    setup_text = texts[SETUP_PY]
    setup_py = read_setup_py(setup_text) if setup_text is not None else None
    version_file = setup_py.version_file if setup_py else None
    extra = [version_file.path] if version_file else []
    for candidate in _backend_modules(pyproject) + _attr_modules(pyproject, setup_cfg) + extra:
        if candidate not in texts:
            texts[candidate] = _read(directory / candidate)
    return ProjectFiles(
        directory=directory,
        texts=texts,
        setup_py=setup_py,
        pyproject=pyproject,
        setup_cfg=setup_cfg,
    )


def _read(path: Path) -> str | None:
    """The file's text; None where it does not exist. Anything but a regular file (a
    directory, a FIFO, which a blocking open would wait on forever, a symlink loop) or an
    unreadable one is a FileError naming it, checked before it is opened; one past
    MAX_PROJECT_FILE is a ConfigError. A Python file is decoded as Python decodes it
    (PEP 263), or refused naming its line."""
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        raise FileError.of(error, "read the project file") from None
    if not stat.S_ISREG(mode):
        raise FileError(
            f"cannot read the project file {path}: it is not a regular file",
            hint="a project's build files are plain files; replace it with one",
        )
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_PROJECT_FILE + 1)
        if len(data) > MAX_PROJECT_FILE:  # a document past its bound: exit 2, as fsutil's
            raise ConfigError(
                [f"{path}: larger than {MAX_PROJECT_FILE // 2**20} MiB, which no build file is"],
                hint="a project's build files are source text; replace it with one",
            )
        if path.suffix == ".py":
            return decode_python(data, str(path))
        return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as error:
        if path.name in (PYPROJECT, SETUP_CFG):  # every build frontend reads them as UTF-8
            raise ConfigError([str(not_utf8(str(path), error))], hint="save it as UTF-8") from None
        return ""
    except OSError as error:
        raise FileError.of(error, "read the project file") from None


def _backend_modules(pyproject: PyProject | None) -> list[str]:
    if pyproject is None or pyproject.build_backend is None or not pyproject.backend_path:
        return []
    module = (pyproject.build_backend.value or "").split(":")[0].replace(".", "/")
    return [
        f"{base.rstrip('/')}/{module}{suffix}"
        for base in pyproject.backend_path
        for suffix in (".py", "/__init__.py")
    ]


def _attr(pyproject: PyProject | None, setup_cfg: SetupCfg | None) -> str | None:
    """The dotted name an `attr:` version names (`pkg.__version__`), if any."""
    attr = pyproject.version_attr.value if pyproject and pyproject.version_attr else None
    said = setup_cfg.version if setup_cfg else None
    if attr is None and said is not None and said.expression.startswith("attr:"):
        attr = said.expression.removeprefix("attr:").strip()
    return attr if attr and "." in attr else None


def _attr_modules(pyproject: PyProject | None, setup_cfg: SetupCfg | None) -> list[str]:
    attr = _attr(pyproject, setup_cfg)
    if attr is None:
        return []
    module = attr.rsplit(".", 1)[0].replace(".", "/")
    return [
        f"{base}{module}{suffix}" for base in ("", "src/") for suffix in ("/__init__.py", ".py")
    ]


def reading(files: ProjectFiles) -> Reading:
    """What `files` say, file by file: each file parsed once, however often it is asked."""
    return files.said


def _reading(files: ProjectFiles) -> Reading:
    pyproject_text = files.text(PYPROJECT)
    setup_text = files.text(SETUP_PY)
    cfg_text = files.text(SETUP_CFG)
    cmake_text = files.text(CMAKELISTS)
    pyproject = files.pyproject
    if pyproject is None and pyproject_text is not None:
        pyproject = read_pyproject(pyproject_text)
    setup_cfg = files.setup_cfg
    if setup_cfg is None and cfg_text is not None:
        setup_cfg = read_setup_cfg(cfg_text)
    backend = next(
        (files.text(m) for m in _backend_modules(pyproject) if files.text(m) is not None), None
    )
    version_module = None
    for candidate in _attr_modules(pyproject, setup_cfg):
        text = files.text(candidate)
        if text is not None:
            version_module = (candidate, read_setup_py(text, candidate))
            break
    setup_py = files.setup_py
    if setup_py is None and setup_text is not None:
        setup_py = read_setup_py(setup_text)
    found = setup_py.version_file if setup_py is not None else None
    version_text = files.text(found.path) if found is not None else None
    return Reading(
        directory=files.directory,
        pyproject=pyproject,
        setup_py=setup_py,
        setup_cfg=setup_cfg,
        cmakelists=read_cmakelists(cmake_text) if cmake_text is not None else None,
        backend_source=backend,
        version_module=version_module,
        version_file=(
            read_setup_py(version_text, found.path)
            if found is not None and version_text is not None
            else None
        ),
    )


def read_version_file(path: Path, shown_as: str) -> Said:
    """The version a prepare step's version-file holds (its text without surrounding
    whitespace, as a staging script reads it), at `shown_as`; an absent file says so in
    its expression (no value), as do one that is not a regular file and one that is not
    UTF-8 (its first bad byte)."""
    try:
        regular = stat.S_ISREG(os.stat(path).st_mode)
    except (FileNotFoundError, NotADirectoryError):
        return Said(place=Place(file=shown_as), expression="no such file")
    except OSError as error:
        raise FileError.of(error, "read the version file") from None
    if not regular:  # a directory, a FIFO (a blocking read would wait forever)
        return Said(place=Place(file=shown_as), expression="not a regular file")
    try:
        with path.open("rb") as stream:
            data = stream.read(MAX_PROJECT_FILE + 1)
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        reason = not_utf8(shown_as, error).reason
        return Said(place=Place(file=shown_as), expression=reason)
    except OSError as error:
        raise FileError.of(error, "read the version file") from None
    value = text.strip()
    if not value:
        return Said(place=Place(file=shown_as, line=1), expression="an empty file")
    return Said(place=Place(file=shown_as, line=1), value=value, expression="version-file")


def naming(read: Reading, version_file: Said | None = None) -> Naming:
    """The project's name and version (see the module doc), each checked (PEP 508, PEP 440);
    where the files compute the version (or name none), a prepare step's `version_file`
    (read_version_file) gives it."""
    pyproject, setup_py, setup_cfg = read.pyproject, read.setup_py, read.setup_cfg
    if pyproject is None and setup_py is None and setup_cfg is None:
        return Naming(
            name=None,
            version=None,
            problem=f"{read.directory / PYPROJECT} does not exist "
            "(point `project` at the kernel project's directory)",
        )
    for broken in (pyproject, setup_py, setup_cfg):
        if broken is not None and broken.problem is not None:
            return Naming(name=None, version=None, problem=_located(read, broken.problem))
    from_setup = [
        s for s in (setup_py.name if setup_py else None, setup_cfg.name if setup_cfg else None) if s
    ]
    if pyproject is not None and pyproject.has_project:
        name = pyproject.name
        version = pyproject.version
        if version is not None and version.expression == "dynamic":
            version = _dynamic_version(read) or version
    else:
        name = from_setup[0] if from_setup else None
        version = _setup_version(read)
    if version_file is not None and (version is None or not version.literal):
        if not version_file.literal:
            where = version_file.place.at(read.directory)
            problem = (
                f"{where}: {version_file.expression}: the prepare step's version-file is "
                "where the release's version is read from (write the version there, as the "
                "release workflow does from the tag)"
            )
            return Naming(name=name, version=None, problem=problem, in_version_file=True)
        version = version_file
    # the name's problem first, then the version's: one from the version-file is its own
    of_name, of_version = (
        _invalid(read.directory, name, None),
        _invalid(read.directory, None, version),
    )
    return Naming(
        name=name,
        version=version,
        problem=of_name or of_version,
        in_version_file=of_name is None and of_version is not None and version is version_file,
    )


def _dynamic_version(read: Reading) -> Said | None:
    """A `dynamic` version as setup.py, setup.cfg or an `attr:` module gives it."""
    found = _setup_version(read)
    if found is not None and found.literal:
        return found
    return _attr_version(read) or found


def _setup_version(read: Reading) -> Said | None:
    for said in (
        read.setup_py.version if read.setup_py else None,
        read.setup_cfg.version if read.setup_cfg else None,
    ):
        if said is not None:
            if said.expression.startswith("attr:"):
                return _attr_version(read) or said
            if not said.literal:
                return _file_version(read) or said
            return said
    return None


def _file_version(read: Reading) -> Said | None:
    """The `__version__` literal of the file setup.py's version function reads; the local
    label that function may add from a variable is said, never guessed (a build with it set
    makes a wheel of another version, which the build refuses)."""
    found = read.setup_py.version_file if read.setup_py else None
    if found is None or read.version_file is None:
        return None
    value = read.version_file.constant("__version__")
    if value is None:
        return None
    local = f", +${found.local_from} if set" if found.local_from else ""
    return Said(
        place=found.place,
        value=value.value,
        expression=f"{found.function}(): __version__ of {found.path}{local}",
        via=value.place,
    )


def _attr_version(read: Reading) -> Said | None:
    """The literal an `attr:` version names, in the module it names."""
    attr = _attr(read.pyproject, read.setup_cfg)
    if attr is None or read.version_module is None:
        return None
    found = read.version_module[1].constant(attr.rsplit(".", 1)[1])
    if found is None:
        return None
    return Said(place=found.place, value=found.value, expression=f"attr: {attr}")


def _invalid(directory: Path, name: Said | None, version: Said | None) -> str | None:
    if name is not None and name.value is not None:
        try:
            canonicalize_name(name.value, validate=True)
        except InvalidName:
            return (
                f"{name.place.at(directory)}: name {shown(name.value)} is not a valid "
                "project name (PEP 508)"
            )
    if version is not None and version.value is not None:
        try:
            parsed = Version(version.value)
        except ValueError:  # InvalidVersion, or a number of more digits than Python converts
            return f"{version.place.at(directory)}: version {shown(version.value)} is not PEP 440"
        if parsed.local is not None:
            # the cells' versions are its public part, each labelled by its destination:
            # the release would say one version and ship another
            return (
                f"{version.place.at(directory)}: version {shown(version.value)} has a local "
                f"label (+{parsed.local}), which matrix.yaml gives each copy (`local-label:`): "
                f"write {parsed.public}"
            )
    return None


def _located(read: Reading, problem: str) -> str:
    """A file's problem with the file's path under the project's directory."""
    return f"{read.directory}/{problem}"
