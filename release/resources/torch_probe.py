"""What a torch environment holds, as one line of JSON: torch's version and CUDA, where its
libraries and site-packages are, the interpreter's version and headers, and the lowest
CPython torch's cpp_extension builds for under the limited API.

    python torch_probe.py

Run by release.toolchain.torchenv with the environment's own Python, after torch is
installed there; the standard library and torch only.
"""

from __future__ import annotations

import json
import pathlib
import sys
import sysconfig

import torch  # type: ignore[import-not-found, unused-ignore]  # the environment's, not ours
from torch.utils import cpp_extension  # type: ignore[import-not-found, unused-ignore]


def report() -> dict[str, object]:
    root = pathlib.Path(torch.__file__).parent
    return {
        "version": torch.__version__,
        "cuda": torch.version.cuda,
        "lib": str(root / "lib"),
        "site": str(root.parent),
        "python": f"{sys.version_info.major}.{sys.version_info.minor}",
        "limited_api": getattr(cpp_extension, "min_supported_cpython", None),
        "python_include": sysconfig.get_paths()["include"],
    }


if __name__ == "__main__":
    print(json.dumps(report()))
