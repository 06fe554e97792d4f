"""python -m k3_kernels info [--json]: what this wheel holds and whether this GPU is covered."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import asdict

from ._errors import KernelError
from ._fatbin import describe
from ._info import Info, info


def _known(*parts: tuple[str, object]) -> str:
    """`label value` for each part whose value the build info has, comma-separated."""
    return ", ".join(f"{label} {value}".strip() for label, value in parts if value)


def _text(report: Info) -> str:
    b = report.build
    compiler = " ".join(
        str(v) for v in (b.get("device_compiler"), b.get("device_compiler_version")) if v
    )
    build = _known(("CUDA", b.get("cuda_version")), ("device compiler", compiler))
    target = _known(("target arch:", b.get("target_arch")), ("local label:", b.get("local_label")))
    lines = [f"k3-kernels build: {build or 'no build info'}"]
    if target:
        lines.append(f"  {target}")
    lines += [
        f"  requested SMs: {', '.join(str(s) for s in b.get('sms', [])) or 'none'}; "
        f"PTX: {b.get('ptx') or 'none'}",
        "fatbins (as found in the files):",
    ]
    want_sms = sorted(int(str(x).rstrip("af")) for x in b.get("sms", []))
    want_ptx = [] if b.get("ptx") is None else [int(str(b["ptx"]).rstrip("af"))]
    for f in report.fatbins:
        lines.append(f"  {f.stem}.fatbin ({f.size} bytes): {describe(f.sms, f.ptx)}")
        if list(f.sms) != want_sms or list(f.ptx) != want_ptx:
            lines.append("    (differs from what the build info says was requested)")
    if report.driver_problem is not None:
        lines.append(f"GPU: none usable ({report.driver_problem})")
        return "\n".join(lines)
    v = report.driver_version or 0
    lines.append(f"CUDA driver: {v // 1000}.{v % 1000 // 10}")
    if not report.gpus:
        lines.append("GPU: none visible")
    for g in report.gpus:
        state = "covered" if g.covered else "NOT covered"
        lines.append(f"GPU {g.gpu.index}: {g.gpu.name}, sm_{g.gpu.sm}: {state}")
        for stem, how in g.coverage.items():
            lines.append(f"  {stem}: {how or 'no code for this GPU'}")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m k3_kernels")
    sub = parser.add_subparsers(dest="command", required=True)
    p_info = sub.add_parser("info", help="CUDA version, SMs and PTX in the fatbins, GPU coverage")
    p_info.add_argument("--json", action="store_true", help="print JSON instead of text")
    args = parser.parse_args(argv)
    try:
        report = info()
    except KernelError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(asdict(report), indent=2, sort_keys=True))
    else:
        print(_text(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
