"""What a setup.py or a staging script says of the native code it builds, read without
running it: the translation units it names, the libraries it links (`libraries=[...]`,
`-lX` flags), the C++ standard its flags ask for (`-std=c++17`), the package data it ships
(`package_data=`), and which lines of a translation unit bind it to Python. A setup.py is
read with `ast`; a shell script (and the Python it runs in a heredoc) by its quoted
strings. Pure: text in, a `NativeBuild` out.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from release.project.places import Place, Said
from release.project.pysource import parse_python, unparsed

SOURCE_SUFFIXES = (".cu", ".cpp", ".cc", ".cxx", ".c")
# the CUDA libraries a project may link, as `-l` names them and matrix.yaml's
# build.cuda-libraries takes them (the toolchain gets each from PyPI's wheels)
CUDA_LIBRARIES = frozenset(
    {"cudart", "nvrtc", "cublas", "cublasLt", "cufft", "cufftw", "curand", "cusolver",
     "cusparse", "nvJitLink", "nvfatbin", "cufile", "nvjpeg"}
)  # fmt: skip
TORCH_LIBRARIES = frozenset({"torch", "torch_cpu", "torch_cuda", "c10", "c10_cuda"})
_STD = re.compile(r"^-std=(?:c|gnu)\+\+(\w+)$")
_YEARS = {"11": 11, "0x": 11, "14": 14, "1y": 14, "17": 17, "1z": 17, "20": 20, "2a": 20,
          "23": 23, "2b": 23, "26": 26, "2c": 26}  # fmt: skip
_QUOTED = re.compile(r"""(['"])([^'"\n]*)\1""")
_JOIN = re.compile(r"os\.path\.join\(([^()]*)\)")
# a heredoc's Python: `import a, b.c` or `from a.b import c`
_IMPORT = re.compile(r"^\s*(?:import\s+([\w., ]+?)\s*(?:#.*)?$|from\s+([\w.]+)\s+import\b)")
# A translation unit that binds to Python: the C-API, pybind11, nanobind, torch's Python
# bindings (torch/extension.h and torch/python.h include Python.h), a module init, and
# torch's op registration (torch's extension docs build those as py_limited_api wheels).
# (Each repetition is bounded, so that a line of 10 MB is read in time linear in its length.)
_PYTHON = re.compile(
    r"#[ \t]{0,64}include[ \t]{0,64}[<\"](Python\.h|pybind11/[^>\"\n]{0,255}|"
    r"nanobind/[^>\"\n]{0,255}|torch/extension\.h|torch/python\.h)[>\"]|"
    r"\b(PYBIND11_MODULE|NB_MODULE|PyInit_\w{1,255}|PyModule_Create\w{0,64}|"
    r"TORCH_LIBRARY(?:_FRAGMENT|_IMPL)?)[ \t]{0,64}\("
)


@dataclass(frozen=True, kw_only=True)
class NativeBuild:
    """Each value with where it was read: a unit's or a library's name, a standard's year
    ("17"), a package-data pattern under its package's directory (`pkg/include/**/*`)."""

    units: tuple[Said, ...] = ()
    computed_units: tuple[Said, ...] = ()  # f-strings and globs that name sources (as said)
    libraries: tuple[Said, ...] = ()
    standard: Said | None = None  # the lowest standard the flags give
    package_data: tuple[Said, ...] = ()
    imports: tuple[Said, ...] = ()  # the top-level modules its Python imports
    requirements: tuple[Said, ...] = ()  # setup()'s install_requires

    def linked(self, names: Iterable[str]) -> list[Said]:
        """The libraries among `names` it links, once each, in order."""
        wanted = set(names)
        seen: dict[str, Said] = {}
        for said in self.libraries:
            if said.value in wanted:
                seen.setdefault(said.value, said)
        return list(seen.values())


def merged(builds: Iterable[NativeBuild]) -> NativeBuild:
    """What several files say together (the lowest standard of them all)."""
    every = list(builds)
    standards = [b.standard for b in every if b.standard is not None]
    return NativeBuild(
        units=tuple(_unique(u for b in every for u in b.units)),
        computed_units=tuple(u for b in every for u in b.computed_units),
        libraries=tuple(lib for b in every for lib in b.libraries),
        standard=min(standards, key=lambda s: int(s.value or 0)) if standards else None,
        package_data=tuple(d for b in every for d in b.package_data),
        imports=tuple(i for b in every for i in b.imports),
        requirements=tuple(r for b in every for r in b.requirements),
    )


def _unique(found: Iterable[Said]) -> Iterator[Said]:
    seen: set[str | None] = set()
    for said in found:
        if said.value not in seen:
            seen.add(said.value)
            yield said


def native_of_setup_py(text: str, file: str = "setup.py") -> NativeBuild:
    """What a setup.py's string literals and setup() say (nothing, where it does not parse)."""
    tree = parse_python(text)
    if tree is None:
        return NativeBuild()
    parents = {id(c): n for n in ast.walk(tree) for c in ast.iter_child_nodes(n)}
    lists = _named_lists(tree)
    units, libraries, standards, data, imports, requirements = [], [], [], [], [], []
    computed = []
    for node in ast.walk(tree):
        place = Place(file=file, line=getattr(node, "lineno", None))
        if isinstance(node, ast.JoinedStr) and _names_source(node):
            computed.append(Said(place=place, expression=unparsed(node)))
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            imports += [Said(place=place, value=m) for m in _imported(node)]
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            value = node.value
            if value.endswith(SOURCE_SUFFIXES) and isinstance(parents.get(id(node)), ast.JoinedStr):
                continue
            if value.endswith(SOURCE_SUFFIXES):
                path = _joined(node, parents.get(id(node)))
                if path is None:
                    computed.append(Said(place=place, expression=value))
                else:
                    units.append((node.col_offset, Said(place=place, value=path)))
            elif value.startswith("-l") and len(value) > 2 and " " not in value:
                libraries.append(Said(place=place, value=value[2:]))
            elif (year := _year(value)) is not None:
                standards.append(Said(place=place, value=str(year), expression=value))
        elif isinstance(node, ast.keyword) and node.arg == "libraries":
            libraries += _said(node.value, lists, file)
        elif isinstance(node, ast.keyword) and node.arg == "package_data":
            data += list(_package_data(node.value, file, lists))
        elif isinstance(node, ast.keyword) and node.arg == "install_requires":
            requirements += _said(node.value, lists, file)
    ordered = [s for _, s in sorted(units, key=lambda u: (u[1].place.line or 0, u[0]))]
    return NativeBuild(
        units=tuple(_unique(ordered)),
        computed_units=tuple(computed),
        libraries=tuple(sorted(libraries, key=lambda s: s.place.line or 0)),
        standard=min(standards, key=lambda s: int(s.value or 0)) if standards else None,
        package_data=tuple(data),
        imports=tuple(sorted(imports, key=lambda s: s.place.line or 0)),
        requirements=tuple(requirements),
    )


def native_of_script(text: str, file: str) -> NativeBuild:
    """What a shell script's quoted strings say (its heredoc's Python included)."""
    units, computed, libraries, standards, imports = [], [], [], [], []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("#"):
            continue
        place = Place(file=file, line=number)
        imported = _IMPORT.match(line)
        if imported:
            imports += [Said(place=place, value=m) for m in _script_imports(imported)]
        joins = {m.start(1): m.group(1) for m in _JOIN.finditer(line)}
        for match in _QUOTED.finditer(line):
            value = match.group(2)
            if value.endswith(SOURCE_SUFFIXES) and ("*" in value or "$" in value or "{" in value):
                computed.append(Said(place=place, expression=value))
            elif value.endswith(SOURCE_SUFFIXES):
                inside = [args for start, args in joins.items() if start <= match.start()]
                parts = [q.group(2) for q in _QUOTED.finditer(inside[-1])] if inside else [value]
                units.append(Said(place=place, value="/".join(parts)))
            elif value.startswith("-l") and len(value) > 2 and " " not in value:
                libraries.append(Said(place=place, value=value[2:]))
            elif (year := _year(value)) is not None:
                standards.append(Said(place=place, value=str(year), expression=value))
    return NativeBuild(
        units=tuple(_unique(units)),
        computed_units=tuple(computed),
        libraries=tuple(libraries),
        standard=min(standards, key=lambda s: int(s.value or 0)) if standards else None,
        imports=tuple(imports),
    )


_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"\n]+)"')


def quoted_includes(text: str) -> list[str]:
    """The files a C or C++ source includes with `#include "name"` (the project's own, found
    beside it), in order; lines commented out with // are not read."""
    found = []
    for line in text.splitlines():
        match = _QUOTED_INCLUDE.match(line)
        if match:
            found.append(match.group(1))
    return found


def python_binding(text: str, file: str) -> Said | None:
    """The first line of a translation unit that binds it to Python (see _PYTHON)."""
    for number, line in enumerate(text.splitlines(), start=1):
        if line.lstrip().startswith("//"):
            continue
        match = _PYTHON.search(line)
        if match:
            marker = match.group(1) or match.group(2)
            return Said(place=Place(file=file, line=number), value=marker)
    return None


def _names_source(node: ast.JoinedStr) -> bool:
    """An f-string whose last literal part ends like a source file's name."""
    last = node.values[-1] if node.values else None
    return isinstance(last, ast.Constant) and str(last.value).endswith(SOURCE_SUFFIXES)


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module.split(".")[0]] if node.module and not node.level else []
    return [alias.name.split(".")[0] for alias in node.names]


def _script_imports(match: re.Match[str]) -> list[str]:
    if match.group(2):
        return [match.group(2).split(".")[0]]
    names = [n.strip().split(" ")[0] for n in match.group(1).split(",")]
    return [n.split(".")[0] for n in names if n]


def _year(flag: str) -> int | None:
    match = _STD.match(flag)
    return _YEARS.get(match.group(1)) if match else None


Strings = dict[str, list[ast.Constant]]
_MOST_HELD = 1000  # strings a name is read to hold: `a += a` thirty times is not 2**30 of them


def _named_lists(tree: ast.Module) -> Strings:
    """The string literals each module-level name holds, where a list or tuple of them is
    assigned to it (`build_libraries = ['cudart', 'nvrtc']`) and what is added to it anywhere
    (`+=`, `.append`, `.extend`, `.insert`): a conditional addition counts, since init asks
    what the build may link or need, not what one run of it does."""
    lists: Strings = {}
    target: ast.expr
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name) and isinstance(value, (ast.List, ast.Tuple)):
            lists[target.id] = _constants(value, lists)
    for added_to in ast.walk(tree):
        if (
            isinstance(added_to, ast.AugAssign)
            and isinstance(added_to.op, ast.Add)
            and isinstance(added_to.target, ast.Name)
            and added_to.target.id in lists
        ):
            held = lists[added_to.target.id]
            held += _constants(added_to.value, lists)[: _MOST_HELD - len(held)]
        elif (
            isinstance(added_to, ast.Call)
            and isinstance(added_to.func, ast.Attribute)
            and isinstance(added_to.func.value, ast.Name)
            and added_to.func.value.id in lists
            and added_to.func.attr in ("append", "extend", "insert")
            and added_to.args
        ):
            added = added_to.args[-1]
            held = lists[added_to.func.value.id]
            held += (
                _constants(ast.List(elts=[added]), lists)
                if added_to.func.attr != "extend"
                else _constants(added, lists)
            )[: _MOST_HELD - len(held)]
    return lists


def _constants(node: ast.expr, lists: Strings) -> list[ast.Constant]:
    """The string literals a list, a tuple, a name of `lists` or a sum of them holds, at
    most _MOST_HELD (a sum of thousands of terms is walked without recursion)."""
    out: list[ast.Constant] = []
    pending = [node]
    while pending and len(out) < _MOST_HELD:
        here = pending.pop()
        if isinstance(here, (ast.List, ast.Tuple)):
            for element in here.elts:
                if len(out) >= _MOST_HELD:
                    break
                if isinstance(element, ast.Constant) and isinstance(element.value, str):
                    out.append(element)
                elif isinstance(element, ast.Starred):
                    out += _constants(element.value, lists)
        elif isinstance(here, ast.Name):
            out += lists.get(here.id, ())
        elif isinstance(here, ast.BinOp) and isinstance(here.op, ast.Add):
            pending += [here.right, here.left]  # the left one is taken first
    return out[:_MOST_HELD]


def _said(node: ast.expr, lists: Strings, file: str) -> list[Said]:
    """Each string `node` holds, with the line it is written on."""
    return [
        Said(place=Place(file=file, line=c.lineno), value=str(c.value))
        for c in _constants(node, lists)
    ]


def _package_data(node: ast.expr, file: str, lists: Strings) -> Iterator[Said]:
    if not isinstance(node, ast.Dict):
        return
    for key, value in zip(node.keys, node.values, strict=True):
        if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
            continue
        base = key.value.replace(".", "/") + "/" if key.value not in ("", "*") else ""
        place = Place(file=file, line=key.lineno)
        yield from (Said(place=place, value=base + str(c.value)) for c in _constants(value, lists))


def _joined(leaf: ast.Constant, parent: ast.AST | None) -> str | None:
    """The path a source file's name stands for: `os.path.join(base, "csrc", "x.cpp")` is
    `csrc/x.cpp` (a computed base is the project's directory); a glob is not a name."""
    parts: list[ast.expr] = [leaf]
    if isinstance(parent, ast.Call) and leaf in parent.args:
        parts = list(parent.args)
    literal = [p.value for p in parts if isinstance(p, ast.Constant) and isinstance(p.value, str)]
    path = "/".join(literal)
    if not literal or "*" in path or path.startswith("/") or ".." in path.split("/"):
        return None
    return path
