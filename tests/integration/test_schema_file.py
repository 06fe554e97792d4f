"""schema/matrix.schema.json: what `release matrix --schema` prints, valid for editors
(ECMA-262 patterns, $schema and $id), and accepting every matrix this project ships or
tests with, as check-jsonschema sees it with its default settings."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from release.matrix import SCHEMA_ID, matrix_json_schema

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "schema" / "matrix.schema.json"
BIN = Path(sys.executable).parent


def check_jsonschema(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "check-jsonschema"), *args], capture_output=True, text=True, check=False
    )


def test_the_published_schema_is_the_generated_one() -> None:
    published = json.loads(SCHEMA.read_text(encoding="utf-8"))
    assert published == matrix_json_schema(), "regenerate: release matrix --schema > " + str(
        SCHEMA.relative_to(ROOT)
    )
    assert published["$id"] == SCHEMA_ID
    assert published["$schema"] == "https://json-schema.org/draft/2020-12/schema"


def test_the_schema_is_valid_with_ecma_regexes() -> None:
    done = check_jsonschema("--check-metaschema", str(SCHEMA))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "(?P<" not in SCHEMA.read_text(encoding="utf-8")


def test_every_shipped_and_test_matrix_validates() -> None:
    matrices = [
        ROOT / "matrix.yaml",
        *sorted((ROOT / "tests" / "data" / "matrix" / "good").glob("*.yaml")),
        *sorted((ROOT / "tests" / "gpu").glob("*.yaml")),
        *sorted((ROOT / "tests" / "fixtures").rglob("matrix*.yaml")),
    ]
    done = check_jsonschema("--schemafile", str(SCHEMA), *map(str, matrices))
    assert done.returncode == 0, done.stdout + done.stderr
    assert len(matrices) >= 3


def test_the_shipped_matrix_names_its_schema_for_editors() -> None:
    first = (ROOT / "matrix.yaml").read_text(encoding="utf-8").splitlines()[0]
    assert first == "# yaml-language-server: $schema=./schema/matrix.schema.json"


def test_a_bad_document_is_refused_by_the_schema(tmp_path: Path) -> None:
    bad = tmp_path / "matrix.yaml"
    bad.write_text("project: x\ncuda: {'13.0': {sms: ['sm_8x']}}\ndestinations: {}\n")
    done = check_jsonschema("--schemafile", str(SCHEMA), str(bad))
    assert done.returncode != 0
