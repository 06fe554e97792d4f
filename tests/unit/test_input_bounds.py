"""Hostile or huge matrix files end in one bounded ConfigError, quickly, never a traceback:
alias bombs, deep nesting, huge lists, long values, and more problems than anyone reads."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from release.errors import MAX_SHOWN_PROBLEMS, SHOWN_CHARS, ConfigError
from release.matrix import load_matrix, matrix_from_text
from release.yamlspec import MAX_DEPTH, MAX_ITEMS, MAX_VALUES

PROJECT = Path(__file__).parent.parent / "data" / "matrix" / "project"
HEAD = "project: ../project\ndestinations:\n  pypi: {kind: pypi}\n"
LONGEST_LINE = 600  # no single message line may be longer than this


def load(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as caught:
        matrix_from_text(text, PROJECT.parent / "bad" / "matrix.yaml")
    for line in caught.value.lines():
        assert len(line) < LONGEST_LINE, line[:200]
    return caught.value


def alias_bomb(levels: int) -> str:
    lines = ["a0: &a0 [75, 80, 86, 89, 90, 100, 75, 80, 86, 89]"]
    for level in range(1, levels):
        refs = ", ".join([f"*a{level - 1}"] * 10)
        lines.append(f"a{level}: &a{level} [{refs}]")
    body = "\n".join(f"  {line}" for line in lines)
    cuda = f"cuda:\n  '13.0': {{destination: pypi, sms: *a{levels - 1}}}\n"
    return f"{HEAD}x-anchors:\n{body}\n{cuda}"


def test_an_alias_bomb_is_refused_before_it_expands() -> None:
    error = load(alias_bomb(9))  # 10**9 values once expanded
    assert len(error.problems) == 1
    assert f"more than {MAX_VALUES} values" in error.problems[0]
    assert error.problems[0].startswith("matrix.yaml:")


def test_deep_nesting_is_a_clear_error_not_a_recursion_error() -> None:
    error = load(f"{HEAD}cuda: " + "[" * 300 + "]" * 300 + "\n")
    # the document's own mapping is the first level, `cuda: ` takes 6 columns
    column = len("cuda: ") + MAX_DEPTH
    assert error.problems == (f"matrix.yaml:4:{column}: nested deeper than {MAX_DEPTH} levels",)


def test_a_ten_megabyte_list_is_refused_by_size() -> None:
    sms = ", ".join(["80"] * 3_500_000)
    error = load(f"{HEAD}defaults: {{sms: [{sms}]}}\ncuda: {{}}\n")
    assert "larger than 1024 KiB" in error.message


def test_a_long_list_is_refused_by_length() -> None:
    sms = ", ".join(["80"] * (MAX_ITEMS + 1))
    error = load(f"{HEAD}defaults: {{sms: [{sms}]}}\ncuda: {{}}\n")
    assert f"more than {MAX_ITEMS} entries" in error.message


def test_duplicates_are_reported_once_per_value() -> None:
    sms = ", ".join(["80", "90"] * 400)
    error = load(
        f"{HEAD}defaults: {{arches: [x86_64], manylinux: '2_28', sms: [{sms}]}}\n"
        "cuda:\n  '13.0': {destination: pypi}\n"
    )
    listed = [p for p in error.problems if "listed more than once" in p]
    assert len(listed) == 2


def test_long_values_and_keys_are_cut_short_in_messages() -> None:
    long = "x" * 3000
    key = "k" * 1000  # YAML's longest plain key
    cuda = f"cuda:\n  '13.0': {{destination: {long}}}\n"
    error = load(f"{HEAD}defaults: {{arches: [{long}]}}\n{key}: 1\n{cuda}")
    assert len(error.problems) == 2  # the arch and the key; the cuda entry waits for both
    for problem in error.problems:
        assert "x" * (SHOWN_CHARS + 1) not in problem
        assert "k" * (SHOWN_CHARS + 1) not in problem
    assert "defaults.arches[0]: 'xxx" in error.problems[0]
    assert "..." in error.problems[0]
    assert "unknown key" in error.problems[1]


def test_an_anchor_defined_twice_is_an_error() -> None:
    error = load(f"{HEAD}x: [&a 1, &a 2]\ncuda: {{}}\n")
    assert error.problems == ("matrix.yaml:4:11: the anchor &a is defined twice",)


def test_at_most_fifty_problems_are_printed() -> None:
    keys = "\n".join(f"unknown{i}: 1" for i in range(80))
    error = load(f"{HEAD}{keys}\ncuda: {{}}\n")
    assert len(error.problems) > MAX_SHOWN_PROBLEMS
    lines = error.lines()
    shown = [line for line in lines if line.startswith("error: matrix.yaml:")]
    assert len(shown) == MAX_SHOWN_PROBLEMS
    assert f"error: ... and {len(error.problems) - MAX_SHOWN_PROBLEMS} more problems" in lines


nested = st.recursive(
    st.one_of(st.integers(0, 200), st.sampled_from(["80", "x", "*a", "&a 1"])),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4).map(lambda xs: "[" + ", ".join(map(str, xs)) + "]"),
        st.lists(inner, max_size=3).map(
            lambda xs: "{" + ", ".join(f"k{i}: {x}" for i, x in enumerate(xs)) + "}"
        ),
    ),
    max_leaves=40,
)


@settings(max_examples=150)
@given(
    depth=st.integers(0, 120),
    fanout=st.integers(1, 12),
    levels=st.integers(1, 8),
    value=nested,
)
def test_any_nesting_and_aliasing_loads_or_fails_cleanly(
    depth: int, fanout: int, levels: int, value: str
) -> None:
    anchors = [f"  a0: &a0 {value}"]
    for level in range(1, levels):
        refs = ", ".join([f"*a{level - 1}"] * fanout)
        anchors.append(f"  a{level}: &a{level} [{refs}]")
    deep = "[" * depth + f"*a{levels - 1}" + "]" * depth
    cuda = f"cuda:\n  '13.0': {{destination: pypi, sms: {deep}}}\n"
    text = f"{HEAD}x:\n" + "\n".join(anchors) + "\n" + cuda
    failure: ConfigError | None = None
    try:
        matrix_from_text(text, PROJECT.parent / "bad" / "matrix.yaml")
    except ConfigError as error:
        failure = error
    if failure is not None:
        assert failure.problems
        assert len(failure.lines()) <= MAX_SHOWN_PROBLEMS + 2
        for line in failure.lines():
            assert len(line) < LONGEST_LINE


def test_a_nul_in_any_value_is_refused_where_it_stands() -> None:
    error = load(f'{HEAD}build:\n  prepare: {{command: x, version-file: "a\\0b"}}\n')
    assert error.problems == ("matrix.yaml:5:39: a value holding a NUL character",)


def test_a_lone_surrogate_in_any_value_is_refused_where_it_stands() -> None:
    # YAML's "\ud800" escape: every command that showed the value ended in a traceback
    error = load(f'{HEAD}build:\n  prepare: {{command: "b\\ud800.sh", version-file: V}}\n')
    assert error.problems == (
        "matrix.yaml:5:22: a value holding a lone surrogate (\\uD800-\\uDFFF)",
    )


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ('"x\\r::error title=forged::FORGED"', "\\r"),  # a line of its own to a terminal
        ('"bash \\e[2J.sh"', "\\x1b"),
        ('"b\\u202egnp.sh"', "\\u202e"),  # right-to-left override: shown reversed
        ('"b\\u2028x"', "\\u2028"),
        ('"a\\u200bb"', "\\u200b"),
        # every other format character (Unicode's Cf) too: tag characters hide text
        ('"a\\U000E0041b"', "\\U000e0041"),
        ('"a\\u0600b"', "\\u0600"),
        ('"a\\U000110BDb"', "\\U000110bd"),
        ('"a\\U0001D173b"', "\\U0001d173"),
    ],
)
def test_a_control_character_in_any_value_is_refused_where_it_stands(
    value: str, shown: str
) -> None:
    # every command printed such a value raw
    error = load(f"{HEAD}build:\n  prepare: {{command: {value}, version-file: V}}\n")
    (problem,) = error.problems
    assert problem.startswith(
        f"matrix.yaml:5:22: a value holding the control character {shown} (what a terminal"
    )


@pytest.mark.parametrize(
    "command",
    [
        ">\n      bash\tx.sh\n",  # a tab, and a block scalar's last line break
        # folded over lines: ruamel's parse marks each fold with \a (a gate's command, in
        # the full tier, was refused for it)
        ">-\n      sh -c 'pip install pytest\n      && python probe.py {torch}'\n",
        "|\n      bash x.sh\n",
        "|\n      sh -c 'pip install pytest\n        pytest tests'\n",  # a script of lines
    ],
)
def test_a_tab_and_line_breaks_of_folded_and_literal_blocks_are_text(command: str) -> None:
    error = load(f"{HEAD}build:\n  prepare:\n    command: {command}    version-file: V\n")
    assert not any("control character" in p for p in error.problems), error.problems


@pytest.mark.parametrize("name", ["w\\u00e9", "-w", "a b", "${{ github.token }}", "x" * 65])
def test_a_destination_name_is_letters_digits_and_dot_dash_underscore(name: str) -> None:
    destinations = f'destinations:\n  "{name}": {{kind: pypi}}\n'
    cuda = f"cuda:\n  '13.0': {{destination: '{name}'}}\n"
    error = load(
        f"project: ../project\ndefaults: {{arches: [x86_64], sms: [80]}}\n{destinations}{cuda}"
    )
    assert any(
        "is not a destination's name (letters, digits, ., _ and -" in p for p in error.problems
    ), error.problems


@pytest.mark.parametrize(
    ("tag", "said"),
    [
        ("v{version}}", "must contain {version} once and no other brace"),
        ("v{version}-{version}", "must contain {version} once and no other brace"),
        ("v{version}\\x1b[2J", "the control character \\x1b"),
        ("v{version} rc", "does not make a git tag"),
        ("v{version}.lock", "does not make a git tag"),
    ],
)
def test_a_tag_template_git_cannot_tag_is_refused(tag: str, said: str) -> None:
    destinations = f'destinations:\n  gh: {{kind: github, repository: o/r, tag: "{tag}"}}\n'
    text = f"project: ../project\n{destinations}cuda:\n  '13.0': {{destination: gh}}\n"
    error = load(text)
    assert [p for p in error.problems if said in p], error.problems


def test_a_matrix_file_that_is_no_regular_file_is_refused_unread(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # a blocking read would wait for a writer forever
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")  # a read would never end
    for path in (fifo, zero):
        with pytest.raises(ConfigError) as caught:
            load_matrix(path)
        assert caught.value.problems == (f"{path}: not a regular file",)


def test_a_project_that_does_not_resolve_is_a_problem_of_project(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    rest = HEAD.split("\n", 1)[1]
    with pytest.raises(ConfigError) as caught:
        matrix_from_text(f"project: loop\n{rest}cuda: {{}}\n", tmp_path / "m.yaml")
    assert caught.value.problems[0].startswith("m.yaml:1:10: project: 'loop' does not resolve")


def test_a_version_of_more_digits_than_python_converts_is_not_pep_440(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "pyproject.toml").write_text(
        f'[project]\nname = "k3"\nversion = "{"1" * 5000}"\n', encoding="utf-8"
    )
    error = load(HEAD.replace("../project", str(project)) + "cuda: {}\n")
    assert "pyproject.toml:3: version '1111" in error.message
    assert "is not PEP 440" in error.message


@pytest.mark.parametrize(
    ("inside", "where"),
    [("  <<: *d\n", "5:7"), ("  arches: *d\n", "5:11"), ("  arches: [x86_64, *d]\n", "5:20")],
)
def test_an_alias_inside_the_collection_it_names_is_refused_at_its_line(
    inside: str, where: str
) -> None:
    # a merge key of its own anchor ended in ruamel's AttributeError, a traceback
    error = load(f"{HEAD}defaults: &d\n{inside}cuda: {{}}\n")
    said = "the alias *d is inside the collection it names (a recursive alias)"
    assert error.problems == (f"matrix.yaml:{where}: {said}",)


@pytest.mark.parametrize("directive", ["%YAML 1.0", "%YAML 1.3", "%YAML 2.0", "%YAML"])
def test_a_yaml_directive_of_a_version_ruamel_cannot_read_is_refused_at_its_line(
    directive: str,
) -> None:
    # 1.0 and 1.3 failed an assert in ruamel: a traceback
    error = load(f"# a comment\n{directive}\n---\n{HEAD}cuda: {{}}\n")
    (problem,) = error.problems
    assert problem.startswith("matrix.yaml:2:1: a %YAML directive of ")


def test_a_yaml_directive_of_1_1_or_1_2_is_read() -> None:
    for version in ("1.1", "1.2"):
        error = load(f"%YAML {version}\n---\n{HEAD}cuda: {{}}\n")
        assert "directive" not in error.message


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (f"{HEAD}# a \0 in a comment\ncuda: {{}}\n", "4:5: invalid YAML: the character \\x00"),
        (f"{HEAD}# a \x9b in a comment\n", "4:5: invalid YAML: the character \\x9b"),
        (f"{HEAD}cuda: {{'13.0': \0}}\n", "4:16: invalid YAML: the character \\x00"),
    ],
)
def test_a_character_yaml_allows_nowhere_is_one_line_at_its_line(text: str, problem: str) -> None:
    # ruamel's ReaderError was two lines, by offset, naming its "<unicode string>"
    error = load(text)
    assert error.problems == (f"matrix.yaml:{problem} (special characters are not allowed)",)
    assert "unicode string" not in error.message


@pytest.mark.parametrize(
    ("data", "where"),
    [
        (f"{HEAD}cuda: {{}}\n".encode() + b"# \xff\xfe\n", "5:3"),
        ("\ufeff".encode("utf-16-le") + f"{HEAD}cuda: {{}}\n".encode("utf-16-le"), "1:1"),
        ("# é \xff\n".encode("latin-1").replace(b"\xe9", "é".encode()), "1:5"),
    ],
)
def test_a_byte_that_is_not_utf8_is_named_by_its_line(
    tmp_path: Path, data: bytes, where: str
) -> None:
    # the error said "position 1015", a byte offset
    path = tmp_path / "matrix.yaml"
    path.write_bytes(data)
    with pytest.raises(ConfigError) as caught:
        load_matrix(path)
    (problem,) = caught.value.problems
    assert problem.startswith(f"matrix.yaml:{where}: not UTF-8 (the byte 0x")


def test_a_problem_of_a_default_shared_by_two_cuda_versions_is_printed_once() -> None:
    # each CUDA version found it again: the same line was printed twice
    error = load(
        f"{HEAD}defaults: {{arches: [x86_64], manylinux: '2_5', sms: [75, 75]}}\n"
        "cuda:\n  '13.0': {destination: pypi}\n  '12.9': {destination: pypi, local-label: a}\n"
    )
    assert error.problems.count("matrix.yaml:4:58: defaults.sms[1]: 75 is listed more than once")
    assert len(error.problems) == len(set(error.problems)) == len(error.locations), error.problems
    assert len(error.lines()) == len(set(error.lines()))
