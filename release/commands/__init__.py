"""One module per command: each parses its arguments, calls a stage's entry point, and prints.

Its modules:

- `parsing/`: The parser side every command shares: arguments, options, build options and
  the edges several commands share.
- `audit`: Download every wheel of a simple index or of a list of wheel URLs and inspect each
  from the bytes served; check the pages whole (`release audit`).
- `build`: Build, repair and inspect one wheel per selected cell; write dist/manifest.json and
  the NCCL override files.
- `doctor`: Show, per CUDA version and arch, the device compiler, the host C compiler and the
  fatbin inspector that a build would use, and where each comes from.
- `env`: Provision the toolchain of one cell (as `release build` does) and print the RELEASE_*
  build inputs of csrc/BUILDING.md as `export` lines, or write them as a dotenv file.
- `gpu_gate`: `release gpu-gate`, on a GPU runner named in matrix.yaml's gpu-gate.
- `init`: `release init`: read the kernel project in DIR statically and write matrix.yaml and
  the release workflow.
- `matrix`: Show the expanded cells: one wheel per (CUDA version, CPU arch).
- `nccl`: `release nccl`: the NCCL override files, cuNN.txt and cuNN-reinstall.txt.
- `pins`: From <dist>/published.json: per variant, `<variant>.txt` (the index and the version
  with the sha256 of every platform's wheel, for pip and uv) and `<variant>-urls.txt` (each
  wheel's URL with its sha256 and a platform marker, for Dockerfiles).
- `plan`: Before tagging: list every cell with its wheel filename, size if built, destination
  and final URL, the NCCL override files, and ask every destination (read-only) what it holds:
  new, identical (skip) or CONFLICT, and each built wheel's growth since the previous release.
- `publish`: Plan every destination first (read-only), print the plan, and upload nothing if any
  file is a CONFLICT or refused.
- `verify`: Fetch every URL in <dist>/published.json (redirects followed, no Authorization
  header past a change of host) and compare status, size and sha256 with the manifest; check
  PyPI and each index list the files with the same sha256; check `pip install --dry-run` picks
  the expected wheel for every cell.
"""
