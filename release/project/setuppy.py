"""What a setup.py says without running it, read with `ast` (as cibuildwheel reads its
python_requires): setup()'s name and version (literals or module string constants), torch's
CUDAExtension / CppExtension, py_limited_api and bdist_wheel's floor, the
`torch.cuda.is_available()` gates and the switches that force CUDA past them or opt its
extensions in (release.project.optin), a bdist_wheel whose run() downloads a prebuilt wheel
and its switches, the environment variables it reads (with their defaults), its literal
`-gencode` flags and TORCH_CUDA_ARCH_LIST. Pure."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from functools import cached_property
from typing import Protocol, TypeVar

from release.project.cudagate import ARCH_LIST, is_cuda_available, is_gate
from release.project.envtest import EnvRead, env_default, env_name, is_environ, on_value
from release.project.optin import NO_OPT_INS, OptIns, opt_ins_in
from release.project.places import Place, Said
from release.project.prebuilt import PrebuiltDownload, prebuilt_in
from release.project.pysource import (
    SourceIndex,
    Unparsed,
    dict_item,
    in_file_order,
    module_assignments,
    named,
    python_tree,
    start,
    string_of,
    unparsed,
)
from release.project.stableabi import StableAbi, stable_abi_in
from release.project.wheeltag import AbiNone, abi_none_in

# nvcc's code generation flags as a setup.py or CMakeLists.txt spells them
GENCODE = re.compile(r"(-gencode|--generate-code|arch=compute_\d+|-arch=sm_\d+|code=sm_\d+)")
_TARGET = r"(?:sm|compute|lto)_\d+[af]?"
# One code generation flag, the whole token: a docstring or a temporary directory's prefix
# that merely holds "-gencode" is not one.
_FLAG = re.compile(
    rf"(?:(?:-gencode|--generate-code)[= ]?)?arch=compute_\d+[af]?,code=(?:{_TARGET}|"
    rf"\[{_TARGET}(?:,{_TARGET})*\])|-arch=sm_\d+[af]?|-gencode|--generate-code"
)
BARE_FLAGS = frozenset({"-gencode", "--generate-code"})  # their targets are the next argument
_CODE = re.compile(r"code=\[?([A-Za-z0-9_,]+)\]?")
_ARCH_SM = re.compile(r"-arch=sm_(\d+[af]?)")
_PATH_PART = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_LIMITED_DEFINE = re.compile(r"-DPy_LIMITED_API=(0x[0-9A-Fa-f]{8})")


@dataclass(frozen=True, kw_only=True)
class CudaGate:
    """A `torch.cuda.is_available()` that decides whether CUDA is built, and the variables
    that force CUDA past it (`... or os.environ.get("FORCE_CUDA") == "1"`)."""

    place: Place
    forced_by: tuple[EnvRead, ...]


@dataclass(frozen=True, kw_only=True)
class Gencode:
    """Literal nvcc code generation flags: the SMs they give cubins and PTX for (empty where
    a part of the flag is computed)."""

    place: Place
    text: str
    cubins: tuple[str, ...]
    ptx: tuple[str, ...]


@dataclass(frozen=True, kw_only=True)
class ArchListDefault:
    """A TORCH_CUDA_ARCH_LIST the file sets: a default (setdefault, getenv's default, or
    an assignment guarded by a test of the variable) or an override of the build's."""

    place: Place
    value: str | None  # None: computed
    overrides: bool
    fails: bool = False  # in a branch that raises or asserts False: no build takes it


@dataclass(frozen=True, kw_only=True)
class VersionFile:
    """A version that a function of setup.py reads from a file of the project (`__version__`
    in `path`, relative to the project), and the variable it adds a local label from."""

    path: str
    function: str
    place: Place  # the version= argument
    local_from: str | None = None


@dataclass(frozen=True, kw_only=True)
class LimitedApi:
    """`py_limited_api=` of an extension: on, off, or computed (None)."""

    place: Place
    on: bool | None
    expression: str = ""
    assigned: tuple[Place, ...] = ()


@dataclass(frozen=True, kw_only=True)
class SetupPy:
    name: Said | None
    version: Said | None
    cuda_extension: Place | None
    cpp_extension: Place | None
    limited_api: LimitedApi | None
    limited_api_floor: Said | None  # bdist_wheel's py_limited_api, e.g. cp39
    limited_api_define: Said | None  # a literal -DPy_LIMITED_API=0x030A0000
    gates: tuple[CudaGate, ...]
    env_reads: tuple[EnvRead, ...]
    gencode: tuple[Gencode, ...]
    arch_list: tuple[ArchListDefault, ...]
    constants: tuple[tuple[str, Said], ...] = ()  # module-level string constants
    version_file: VersionFile | None = None
    prebuilt: PrebuiltDownload | None = None
    stable_abi: StableAbi | None = None
    opt_ins: OptIns = NO_OPT_INS
    abi_none: AbiNone | None = None  # a bdist_wheel's get_tag() returns the `none` ABI
    problem: str | None = None

    def constant(self, name: str) -> Said | None:
        return dict(self.constants).get(name)


def as_built(setup_py: SetupPy, env: Mapping[str, str] | None = None) -> SetupPy:
    """`setup_py` less the -gencode flags of the branches a build leaves off: an opt-in
    switch's that init does not turn on, or (with a cell's build.env) that the cell does not
    set (release.project.optin)."""
    built = [g for g in setup_py.gencode if not setup_py.opt_ins.left_off(g.place.line, env)]
    return replace(setup_py, gencode=tuple(built))


def read_setup_py(text: str, file: str = "setup.py") -> SetupPy:
    """What `text`, a setup.py, says statically; a file that does not parse says nothing
    but its `problem`."""
    try:
        tree = python_tree(text)
    except Unparsed as error:
        return _empty(f"{Place(file=file, line=error.line)}: {error.reason}")
    reader = _Reader(SourceIndex(tree, text), file)
    setup_call = reader.setup_call()
    keywords = {k.arg: k.value for k in setup_call.keywords if k.arg} if setup_call else {}
    return SetupPy(
        name=reader.said(keywords["name"]) if "name" in keywords else None,
        version=reader.said(keywords["version"]) if "version" in keywords else None,
        cuda_extension=reader.first_use("CUDAExtension"),
        cpp_extension=reader.first_use("CppExtension"),
        limited_api=reader.limited_api(),
        limited_api_floor=reader.bdist_wheel_floor(),
        limited_api_define=reader.limited_api_define(),
        gates=_in_order(reader.gates()),
        env_reads=_in_order(reader.env_reads()),
        gencode=_in_order(reader.gencode()),
        arch_list=_in_order(reader.arch_list()),
        constants=tuple(reader.constants()),
        version_file=reader.version_file(keywords.get("version")),
        prebuilt=prebuilt_in(reader.index, file, reader.constant_nodes),
        stable_abi=stable_abi_in(reader.index, file),
        opt_ins=opt_ins_in(reader.index, file, reader.constant_nodes),
        abi_none=abi_none_in(reader.index, file),
    )


class _Placed(Protocol):
    @property
    def place(self) -> Place: ...


P = TypeVar("P", bound=_Placed)


def _in_order(found: Iterator[P]) -> tuple[P, ...]:
    """In the order of the file (ast.walk goes breadth first)."""
    return tuple(sorted(found, key=lambda item: item.place.line or 0))


def _empty(problem: str) -> SetupPy:
    return SetupPy(
        name=None,
        version=None,
        cuda_extension=None,
        cpp_extension=None,
        limited_api=None,
        limited_api_floor=None,
        limited_api_define=None,
        gates=(),
        env_reads=(),
        gencode=(),
        arch_list=(),
        problem=problem,
    )


def is_flag(text: str) -> bool:
    """Whether `text` is nvcc code generation flags and nothing else."""
    tokens = text.split()
    return bool(tokens) and all(_FLAG.fullmatch(t) for t in tokens)


def gencode_targets(text: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The SMs a flag string gives cubins and PTX for: `-gencode=arch=compute_90,code=sm_90`
    is a cubin for 90, `code=[sm_80,compute_80]` a cubin and PTX, `-arch=sm_80` both."""
    cubins: list[str] = []
    ptx: list[str] = []
    for match in _CODE.finditer(text):
        for part in match.group(1).split(","):
            kind, _, number = part.partition("_")
            if kind == "sm" and number:
                cubins.append(number)
            elif kind == "compute" and number:
                ptx.append(number)
    for match in _ARCH_SM.finditer(text):
        cubins.append(match.group(1))
        ptx.append(match.group(1).rstrip("af"))
    return tuple(dict.fromkeys(cubins)), tuple(dict.fromkeys(ptx))


class _Reader:
    """Every question of the file asked of one index of its nodes (never a walk of the
    whole tree per question): linear in the file's size."""

    def __init__(self, index: SourceIndex, file: str) -> None:
        self.index = index
        self.tree = index.tree
        self.file = file
        self.parents = index.parents
        self.assignments = module_assignments(index.tree)

    def place(self, node: ast.AST) -> Place:
        return Place(file=self.file, line=getattr(node, "lineno", None))

    def source(self, node: ast.AST) -> str:
        return self.index.segment(node) or unparsed(node)

    # - values -

    def constant(self, name: str) -> ast.expr | None:
        """The value of a module-level name assigned once, unconditionally."""
        found = self.assignments.get(name, ())
        if len(found) == 1 and found[0][1]:
            return found[0][0]
        return None

    @cached_property
    def constant_nodes(self) -> dict[str, ast.expr]:
        """Every module-level name assigned once, unconditionally, and its value."""
        return {
            name: value for name in self.assignments if (value := self.constant(name)) is not None
        }

    def constants(self) -> Iterator[tuple[str, Said]]:
        for name in self.assignments:
            value = self.constant(name)
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                yield name, Said(place=self.place(value), value=value.value)

    def said(self, node: ast.expr) -> Said:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return Said(place=self.place(node), value=node.value)
        if isinstance(node, ast.Name):
            value = self.constant(node.id)
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                return Said(
                    place=self.place(node),
                    value=value.value,
                    expression=node.id,
                    via=self.place(value),
                )
        return Said(place=self.place(node), expression=self.source(node))

    def version_file(self, node: ast.expr | None) -> VersionFile | None:
        """`version=get_version()` (or a constant holding its result, or `str()` of it)
        where `get_version` is this file's function that opens a `.py` file of the project
        (a path of literal parts, after a base directory) and reads `__version__` from it
        (with a regex or `ast`): the `get_package_version()` of flash-attention's kind."""
        call = self.constant(node.id) if isinstance(node, ast.Name) else node
        if isinstance(call, ast.Call) and named(call.func, "str") and call.args:
            call = call.args[0]
        if node is None or not isinstance(call, ast.Call) or not isinstance(call.func, ast.Name):
            return None
        name = call.func.id
        defined = [f for f in self.tree.body if isinstance(f, ast.FunctionDef) and f.name == name]
        if len(defined) != 1:
            return None
        nodes = list(ast.walk(defined[0]))
        strings = {
            n: n.value for n in nodes if isinstance(n, ast.Constant) and isinstance(n.value, str)
        }
        if not any("__version__" in text for text in strings.values()):
            return None
        paths = [
            p for n, text in strings.items() if text.endswith(".py") and (p := self._path_of(n))
        ]
        if len(set(paths)) != 1:
            return None
        local = next((env for n in nodes if (env := env_name(n)) is not None), None)
        return VersionFile(path=paths[0], function=name, place=self.place(node), local_from=local)

    def _path_of(self, leaf: ast.Constant) -> str | None:
        """The project-relative path `os.path.join(base, "pkg", "__init__.py")` or
        `Path(base) / "pkg" / "__init__.py"` names (module constants resolved), if it is one."""
        parent = self.parents.get(id(leaf))
        parts: list[ast.expr] = [leaf]
        if isinstance(parent, ast.Call) and leaf in parent.args:
            parts = list(parent.args)
        elif isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Div):
            parts = []
            chain: ast.expr = parent
            while isinstance(chain, ast.BinOp) and isinstance(chain.op, ast.Div):
                parts.insert(0, chain.right)
                chain = chain.left
            parts.insert(0, chain)
        literal: list[str] = []
        for index, part in enumerate(parts):
            value = self.constant(part.id) if isinstance(part, ast.Name) else part
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                literal.append(value.value)
            elif index != 0 or len(parts) == 1:  # only the base directory may be computed
                return None
        path = "/".join(literal)
        pieces = path.split("/")
        if not path or path.startswith("/") or any(p in ("", ".", "..") for p in pieces):
            return None
        return path if all(_PATH_PART.fullmatch(p) for p in pieces) else None

    # - setup() and the extensions -

    def setup_call(self) -> ast.Call | None:
        calls = [
            n for n in self.index.of(ast.Call) if isinstance(n, ast.Call) and named(n.func, "setup")
        ]
        return calls[0] if len(calls) == 1 else None

    def first_use(self, name: str) -> Place | None:
        uses: list[ast.AST] = [
            n for n in self.index.of(ast.Name) if isinstance(n, ast.Name) and n.id == name
        ]
        uses += [
            n
            for n in self.index.of(ast.Attribute)
            if isinstance(n, ast.Attribute) and n.attr == name
        ]
        calls = [n for n in uses if isinstance(self.parents.get(id(n)), ast.Call)]
        chosen = sorted(calls or uses, key=lambda n: getattr(n, "lineno", 0))
        return self.place(chosen[0]) if chosen else None

    def limited_api(self) -> LimitedApi | None:
        found = [
            n for n in self.index.of(ast.keyword) if getattr(n, "arg", None) == "py_limited_api"
        ]
        for node in in_file_order(found):
            if isinstance(node, ast.keyword):
                return self._limited(node.value)
        return None

    def _limited(self, value: ast.expr) -> LimitedApi:
        place = self.place(value)
        if isinstance(value, ast.Constant) and isinstance(value.value, bool):
            return LimitedApi(place=place, on=value.value)
        if isinstance(value, ast.Name):
            constant = self.constant(value.id)
            if isinstance(constant, ast.Constant) and isinstance(constant.value, bool):
                return LimitedApi(place=place, on=constant.value, expression=value.id)
            assigned = tuple(self.place(v) for v, _ in self.assignments.get(value.id, ()))
            return LimitedApi(place=place, on=None, expression=value.id, assigned=assigned)
        return LimitedApi(place=place, on=None, expression=self.source(value))

    def bdist_wheel_floor(self) -> Said | None:
        floors = []
        for node in self.index.of(ast.Dict):
            options = dict_item(node, "bdist_wheel") if isinstance(node, ast.Dict) else None
            floor = dict_item(options, "py_limited_api") if isinstance(options, ast.Dict) else None
            if floor is not None:
                floors.append(floor)
        first = next(iter(in_file_order(floors)), None)
        return self.said(first) if first is not None else None

    def limited_api_define(self) -> Said | None:
        found = [
            (n, match)
            for n in self.index.of(ast.Constant)
            if isinstance(n, ast.Constant)
            and isinstance(n.value, str)
            and (match := _LIMITED_DEFINE.search(n.value))
        ]
        if not found:
            return None
        node, match = min(found, key=lambda pair: start(pair[0]))
        return Said(place=self.place(node), value=match.group(1))

    # - the environment and the CUDA gates -

    def env_reads(self) -> Iterator[EnvRead]:
        for node in self.index.of_kinds(ast.Call, ast.Subscript, ast.Compare):
            if (name := env_name(node)) is not None:
                yield EnvRead(name=name, place=self.place(node), default=env_default(node))

    def gates(self) -> Iterator[CudaGate]:
        reads_arch_list = any(read.name == ARCH_LIST for read in self.env_reads())
        for node in self.index.of(ast.Call):
            if (
                isinstance(node, ast.Call)
                and is_cuda_available(node.func)
                and is_gate(self.index, node, reads_arch_list=reads_arch_list)
            ):
                yield CudaGate(place=self.place(node), forced_by=tuple(self._forcing(node)))

    def _forcing(self, gate: ast.AST) -> Iterator[EnvRead]:
        """The variables in an `or` beside `gate`: each forces CUDA when it is on."""
        child: ast.AST = gate
        parent = self.parents.get(id(gate))
        while parent is not None and not isinstance(parent, ast.stmt):
            if isinstance(parent, ast.BoolOp) and isinstance(parent.op, ast.Or):
                for operand in parent.values:
                    if operand is not child:
                        yield from self._switches(operand, depth=0)
            child, parent = parent, self.parents.get(id(parent))

    def _switches(self, node: ast.AST, *, depth: int) -> Iterator[EnvRead]:
        for inner in ast.walk(node):
            name = env_name(inner)
            if name is not None:
                yield EnvRead(
                    name=name,
                    place=self.place(inner),
                    on=on_value(node, inner, self.constant_nodes),
                )
            elif isinstance(inner, ast.Name) and depth < 2:
                for value, _ in self.assignments.get(inner.id, ()):
                    yield from self._switches(value, depth=depth + 1)

    # - GPU targets -

    def gencode(self) -> Iterator[Gencode]:
        for node in self.index.of_kinds(ast.JoinedStr, ast.Constant):
            if isinstance(node, ast.JoinedStr):
                text = "".join(string_of(v) or "0" for v in node.values)
                if is_flag(text):
                    yield Gencode(place=self.place(node), text=self.source(node), cubins=(), ptx=())
            elif (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and not isinstance(self.parents.get(id(node)), ast.JoinedStr)
                and is_flag(node.value)
                and node.value not in BARE_FLAGS
            ):
                cubins, ptx = gencode_targets(node.value)
                yield Gencode(place=self.place(node), text=node.value, cubins=cubins, ptx=ptx)

    def arch_list(self) -> Iterator[ArchListDefault]:
        for node in self.index.of_kinds(ast.Call, ast.Assign):
            found = self._arch_list_default(node)
            if found is not None:
                yield found

    def _arch_list_default(self, node: ast.AST) -> ArchListDefault | None:
        if isinstance(node, ast.Call) and node.args and string_of(node.args[0]) == ARCH_LIST:
            func = node.func
            default = node.args[1] if len(node.args) > 1 else None
            setdefault = isinstance(func, ast.Attribute) and func.attr == "setdefault"
            if default is not None and (setdefault or env_name(node) == ARCH_LIST):
                return ArchListDefault(
                    place=self.place(node), value=string_of(default), overrides=False,
                    fails=self.index.in_failing_branch(node),
                )  # fmt: skip
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Subscript)
            and is_environ(target.value)
            and string_of(target.slice) == ARCH_LIST
            for target in node.targets
        ):
            value = node.value
            if env_name(value) == ARCH_LIST:
                return None  # = os.getenv(ARCH_LIST, default): that call is the default
            kept = self._guarded(node)
            # `= os.environ.get(ARCH_LIST) or "9.0"` keeps the build's, as a guard does
            if (
                isinstance(value, ast.BoolOp)
                and isinstance(value.op, ast.Or)
                and env_name(value.values[0]) == ARCH_LIST
            ):
                value, kept = value.values[-1], True
            return ArchListDefault(
                place=self.place(node), value=string_of(value), overrides=not kept,
                fails=self.index.in_failing_branch(node),
            )  # fmt: skip
        return None

    def _guarded(self, node: ast.AST) -> bool:
        """Whether an enclosing `if` tests TORCH_CUDA_ARCH_LIST (a default, not an override)."""
        parent = self.parents.get(id(node))
        while parent is not None:
            if isinstance(parent, ast.If) and any(
                string_of(n) == ARCH_LIST for n in ast.walk(parent.test)
            ):
                return True
            parent = self.parents.get(id(parent))
        return False
