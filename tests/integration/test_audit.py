"""`release audit` against fixture indexes on 127.0.0.1 holding each broken case of issue 54's
table, made of real wheels with real ELF files (tests/integration/indexes.py): each case is
found, with its rule, file and URL, and a clean index gives nothing."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from release.audit.run import AuditSettings, audit
from release.audit.sources import sources
from release.inspection.findings import Finding
from tests.integration.indexes import (
    ELF,
    Compiled,
    Link,
    compiled,
    host_library,
    link_to,
    sha256,
    static_server,
    write_json_page,
    write_page,
    write_root,
)
from tests.integration.wheels import make_wheel

RELEASE = Path(sys.executable).with_name("release")
TORCH_METADATA = {
    "2.10.0": 'Requires-Dist: nvidia-cuda-runtime-cu12==12.8.90; platform_system == "Linux"\n',
    "2.11.0": 'Requires-Dist: cuda-toolkit[cudart]==13.0.2; platform_system == "Linux"\n',
}


def wheel(case: Path, version: str, arch: str = "x86_64", **kwargs: Any) -> Path:
    platform = kwargs.pop("platform", f"manylinux_2_28_{arch}")
    members = kwargs.pop("members", {"k3_kernels/libk3_host.so": host_library(arch)})
    return make_wheel(case / "files", version=version, platform=platform, members=members, **kwargs)


def metadata_sha256(path: Path) -> str:
    with zipfile.ZipFile(path) as archive:
        (name,) = [n for n in archive.namelist() if n.endswith(".dist-info/METADATA")]
        return hashlib.sha256(archive.read(name)).hexdigest()


def md5_of(path: Path) -> str:
    return hashlib.md5(path.read_bytes()).hexdigest()  # noqa: S324  # what the page states


def page(case: Path, wheels: list[Path], variant: str = "") -> None:
    page_dir = case / variant / "k3-kernels" if variant else case / "k3-kernels"
    write_page(page_dir, [link_to(w, page_dir) for w in wheels])


def clean(case: Path) -> None:
    """Two versions, two arches, the default variant and +cu129, each on its own page; the
    +cu129 page in PEP 691 JSON only (its HTML lists nothing: what the audit finds there
    it read from the JSON)."""
    versions = ("0.1.0", "0.2.0")
    page(case, [wheel(case, v, arch) for v in versions for arch in ("x86_64", "aarch64")])
    labelled = [wheel(case, f"{v}+cu129", a) for v in versions for a in ("x86_64", "aarch64")]
    page_dir = case / "cu129" / "k3-kernels"
    write_json_page(page_dir, "k3-kernels", [link_to(w, page_dir) for w in labelled])
    write_page(page_dir, [])


def torch_index(root: Path) -> None:
    """A stand-in torch index: each release's wheel listed with its PEP 658 metadata."""
    page_dir = root / "torch-index" / "torch"
    links = []
    for version, requires in TORCH_METADATA.items():
        name = f"torch-{version}-cp312-cp312-manylinux_2_28_x86_64.whl"
        metadata = page_dir.parent / "files" / f"{name}.metadata"
        metadata.parent.mkdir(parents=True, exist_ok=True)
        metadata.write_text(f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n{requires}")
        links.append(
            Link(
                name=name,
                href=f"../files/{name}",
                sha256="0" * 64,
                metadata_sha256=sha256(metadata),
            )
        )
    write_page(page_dir, links)


@dataclass(frozen=True)
class Case:
    pages: tuple[str, ...]  # relative to the served root
    expected: tuple[tuple[str, str], ...]  # (rule, file)


def build_cases(root: Path, built: Compiled) -> dict[str, Case]:
    cases: dict[str, Case] = {}
    clean(root / "clean")
    cases["clean"] = Case(pages=("clean/k3-kernels/", "clean/cu129/k3-kernels/"), expected=())

    # sgl-deep-gemm on PyPI: a build retagged manylinux2014 by a script, needing GLIBCXX_3.4.21
    case = root / "retagged"
    retagged = wheel(case, "0.1.0", platform="manylinux2014_x86_64",
                     members={"k3_kernels/_C.so": built.glibcxx})  # fmt: skip
    page(case, [retagged])
    cases["retagged"] = Case(
        pages=("retagged/k3-kernels/",), expected=(("manylinux", retagged.name),)
    )

    # vllm#41103: a manylinux_2_31 wheel needing GLIBC_2.34
    case = root / "glibc"
    needs_2_34 = (ELF / "x86_64-glibc2.34.so").read_bytes()
    glibc = wheel(
        case, "0.1.0", platform="manylinux_2_31_x86_64", members={"k3_kernels/_C.so": needs_2_34}
    )
    page(case, [glibc])
    cases["glibc"] = Case(pages=("glibc/k3-kernels/",), expected=(("manylinux", glibc.name),))

    # vllm#44335: a +cu129-labelled build needing libcudart.so.13
    case = root / "relabelled"
    relabelled = wheel(case, "0.1.0+cu129", members={"k3_kernels/_C.so": built.cudart13})
    page(case, [relabelled], "cu129")
    cases["relabelled"] = Case(
        pages=("relabelled/cu129/k3-kernels/",), expected=(("cuda-major", relabelled.name),)
    )

    # sgl-project/whl: one wheel listed again with another sha256 (re-uploaded, line appended)
    case = root / "duplicated"
    first = wheel(case, "0.1.0+cu129")
    page_dir = case / "cu129" / "k3-kernels"
    write_page(page_dir, [link_to(first, page_dir), link_to(first, page_dir, sha="e" * 64)])
    cases["duplicated"] = Case(
        pages=("duplicated/cu129/k3-kernels/",),
        expected=(("duplicate", first.name), ("hash", first.name)),
    )

    # a page that states md5 (pip checks it), right for one wheel and not for the other
    case = root / "md5"
    right, wrong = wheel(case, "0.1.0"), wheel(case, "0.2.0")
    page_dir = case / "k3-kernels"
    links = [replace(link_to(w, page_dir), sha256=None, fragment=f"md5={md5}")
             for w, md5 in ((right, md5_of(right)), (wrong, md5_of(right)))]  # fmt: skip
    write_page(page_dir, links)
    cases["md5"] = Case(pages=("md5/k3-kernels/",), expected=(("hash", wrong.name),))

    # a PEP 658 metadata hash that is not the wheel's METADATA's: pip resolves from a lie
    case = root / "metadata"
    honest, lying = wheel(case, "0.1.0"), wheel(case, "0.2.0")
    page_dir = case / "k3-kernels"
    links = [replace(link_to(w, page_dir), metadata_sha256=m)
             for w, m in ((honest, metadata_sha256(honest)), (lying, "d" * 64))]  # fmt: skip
    write_page(page_dir, links)
    cases["metadata"] = Case(pages=("metadata/k3-kernels/",), expected=(("hash", lying.name),))

    # ANOLISA#3289: a partial upload leaving a release without one arch's wheel
    case = root / "partial"
    wheels = [wheel(case, v, a) for v in ("0.1.0", "0.2.0", "0.3.0") for a in ("x86_64", "aarch64")]
    page(
        case,
        [w for w in wheels if not (w.name.startswith("k3_kernels-0.2.0") and "aarch64" in w.name)],
    )
    cases["partial"] = Case(
        pages=("partial/k3-kernels/",), expected=(("missing-arch", "k3-kernels 0.2.0"),)
    )

    # Astral's index README: filename and METADATA versions that disagree
    case = root / "mismatched"
    mismatched = wheel(case, "0.1.0", metadata_version="0.1.1")
    page(case, [mismatched])
    cases["mismatched"] = Case(
        pages=("mismatched/k3-kernels/",), expected=(("filename", mismatched.name),)
    )

    # llama-cpp-python#2272: a CUDA variant released but never indexed
    case = root / "unindexed"
    page(case, [wheel(case, v) for v in ("0.1.0", "0.2.0")])
    page(case, [wheel(case, "0.1.0+cu129")], "cu129")
    cases["unindexed"] = Case(
        pages=("unindexed/k3-kernels/", "unindexed/cu129/k3-kernels/"),
        expected=(("unindexed-variant", "k3-kernels 0.2.0+cu129"),),
    )

    # xformers#1411: no CUDA label, linking CUDA 13 beside a requirement that admits a
    # CUDA 12 torch; and a wheel linking torch that requires none
    case = root / "torch"
    admits_cu12 = wheel(case, "0.1.0", members={"k3_kernels/_C.so": built.torch_cuda13},
                        requires_dist=["torch>=2.10"])  # fmt: skip
    no_torch = wheel(case, "0.2.0", members={"k3_kernels/_C.so": built.torch_cuda13})
    page(case, [admits_cu12, no_torch])
    cases["torch"] = Case(
        pages=("torch/k3-kernels/",),
        expected=(("torch", admits_cu12.name), ("torch", no_torch.name)),
    )
    torch_index(root)
    return cases


@dataclass(frozen=True)
class Served:
    root: Path
    url: str
    cases: dict[str, Case]

    @property
    def torch_index(self) -> str:
        return f"{self.url}torch-index/"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("indexes")
    cases = build_cases(root / "www", compiled(root / "gcc"))
    with static_server(root / "www") as url:
        yield Served(root=root / "www", url=url, cases=cases)


def audited(served: Served, *urls: str, **settings: Any) -> list[Finding]:
    given = sources([served.url + u for u in urls], None)
    report = audit(given, AuditSettings(torch_index=served.torch_index, **settings), {})
    return list(report.findings)


CASES = ("clean", "retagged", "glibc", "relabelled", "duplicated", "md5", "metadata",
         "partial", "mismatched", "unindexed", "torch")  # fmt: skip


@pytest.mark.parametrize("name", CASES)
def test_each_case_is_found_with_its_rule_and_nothing_else(served: Served, name: str) -> None:
    case = served.cases[name]
    found = audited(served, *case.pages)
    assert sorted((f.rule, f.file) for f in found) == sorted(case.expected)
    for one in found:
        assert one.url.startswith(served.url)
        assert one.detail


def test_the_details_name_what_broke(served: Served) -> None:
    """One line each: the symbol and the tag, the soname and the label, the hashes."""
    details = {f.rule: f.detail for f in audited(served, *served.cases["retagged"].pages)}
    assert details == {
        "manylinux": "k3_kernels/_C.so needs GLIBCXX_3.4.21; manylinux2014_x86_64 allows at "
        "most GLIBCXX_3.4.19"
    }
    details = {f.rule: f.detail for f in audited(served, *served.cases["relabelled"].pages)}
    assert details == {
        "cuda-major": "k3_kernels/_C.so needs libcudart.so.13; the +cu129 label says CUDA 12"
    }
    torch = sorted(f.detail for f in audited(served, *served.cases["torch"].pages))
    assert torch == [
        "k3_kernels/_C.so needs libc10.so, and METADATA requires no torch: pip installs it "
        "beside any torch, or none",
        f"requires torch>=2.10, which admits torch 2.10.0 (CUDA 12) on {served.torch_index}; "
        "k3_kernels/_C.so needs libcudart.so.13",
    ]


def release(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RELEASE), "audit", *args], capture_output=True, text=True, check=False, timeout=300
    )


def test_the_command_over_every_broken_case_exits_7_and_its_json_keeps_the_schema(
    served: Served,
) -> None:
    pages = [served.url + p for name in CASES if name != "clean" for p in served.cases[name].pages]
    done = release(*pages, "--torch-index", served.torch_index, "--json")
    assert done.returncode == 7, done.stderr
    document = json.loads(done.stdout)
    schema = json.loads(release("--schema").stdout)
    jsonschema.validate(document, schema)
    # every case's findings of one wheel or one page (the arch and variant rules judge a
    # project's pages together, and these cases' pages side by side are one project whose
    # versions interleave: the per-case test above holds those)
    across = {"missing-arch", "unindexed-variant"}
    expected = {e for name in CASES for e in served.cases[name].expected if e[0] not in across}
    found = {(f["rule"], f["file"]) for f in document["findings"] if f["rule"] not in across}
    assert found == expected
    by_rule = {row["rule"]: row for row in document["rules"]}
    assert by_rule["duplicate"]["findings"] == 1
    assert by_rule["manylinux"]["files_checked"] >= 2
    assert "findings; first:" in done.stderr


def test_a_clean_index_exits_0_through_its_root_and_pep_691_json(served: Served) -> None:
    write_root(served.root / "clean", ["k3-kernels"])
    done = release(served.url + "clean/", "--json", "--no-torch-index")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert document["ok"] is True
    assert document["findings"] == []
    assert document["pages"] == [served.url + "clean/k3-kernels/"]
    assert document["files"] == 4
    chosen = release(served.url + "clean/cu129/", "--project", "k3-kernels", "--json")
    assert chosen.returncode == 0, chosen.stderr
    document = json.loads(chosen.stdout)
    assert document["pages"] == [served.url + "clean/cu129/k3-kernels/"]
    assert document["files"] == 4  # from the PEP 691 page


def test_a_pinned_url_that_404s_or_serves_other_bytes(served: Served, tmp_path: Path) -> None:
    """A consumer pinning wheels by URL (`sgl_deep_gemm-...+cu129`), run daily."""
    good = next((served.root / "clean" / "files").glob("k3_kernels-0.2.0+cu129-*x86_64.whl"))
    url = f"{served.url}clean/files/{good.name}"
    urls = tmp_path / "pins.txt"
    urls.write_text(
        f"# pinned\n{url}#sha256={sha256(good)}\n\n"
        f"{url.replace('0.2.0', '0.3.0')}\n"
        f"{url.replace('x86_64', 'aarch64')}#sha256={'0' * 64}\n"
    )
    done = release("--urls", str(urls), "--json")
    assert done.returncode == 7
    found = sorted((f["rule"], f["detail"]) for f in json.loads(done.stdout)["findings"])
    assert [rule for rule, _ in found] == ["download", "hash"]
    assert found[0][1] == "does not download: HTTP 404"
    assert found[1][1].startswith(f"the #sha256= of {urls}:5 says sha256 000000000000...")


def test_a_line_that_is_not_a_url_is_refused_with_its_place(tmp_path: Path) -> None:
    urls = tmp_path / "pins.txt"
    urls.write_text("https://example.invalid/simple/k/\nftp://x/y.whl\n")
    done = release("--urls", str(urls))
    assert done.returncode == 2
    assert f"error: {urls}:2: 'ftp://x/y.whl' is not an http(s) URL" in done.stderr
    secret = release("https://user:hunter2@example.invalid/simple/")
    assert secret.returncode == 2
    assert "hunter2" not in secret.stderr + secret.stdout


def test_wheels_the_total_time_limit_leaves_unread_are_named_with_exit_9(served: Served) -> None:
    """A host slower than --timeout: nothing found, nothing silently skipped."""
    with static_server(served.root, wheel_delay=2.0) as url:
        done = release(f"{url}clean/k3-kernels/", "--timeout", "1", "--concurrency", "1",
                       "--no-torch-index", "--json")  # fmt: skip
    assert done.returncode == 9, done.stderr
    document = json.loads(done.stdout)
    assert document["findings"] == []
    assert len(document["not_reached"]) == document["files"] == 4
    assert "error: 4 of 4 wheels not read within --timeout 1 s" in done.stderr
