"""The versions of an NVRTC and an nvFatbin library, as `MAJOR.MINOR MAJOR.MINOR`.

    python nvrtc_version.py LIBNVRTC LIBNVFATBIN

Run by release.toolchain.provision to check that the libraries provisioned for a CUDA
version are that version; standard library only.
"""

from __future__ import annotations

import ctypes
import sys


def versions(nvrtc_path: str, nvfatbin_path: str) -> str:
    nvrtc, nvfatbin = ctypes.CDLL(nvrtc_path), ctypes.CDLL(nvfatbin_path)
    major, minor = ctypes.c_int(), ctypes.c_int()
    if nvrtc.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)) != 0:
        raise SystemExit(f"nvrtcVersion failed in {nvrtc_path}")
    fat_major, fat_minor = ctypes.c_uint(), ctypes.c_uint()
    if nvfatbin.nvFatbinVersion(ctypes.byref(fat_major), ctypes.byref(fat_minor)) != 0:
        raise SystemExit(f"nvFatbinVersion failed in {nvfatbin_path}")
    return f"{major.value}.{minor.value} {fat_major.value}.{fat_minor.value}"


if __name__ == "__main__":
    print(versions(sys.argv[1], sys.argv[2]))
