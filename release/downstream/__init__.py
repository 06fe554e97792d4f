"""Files for the users of a release: NCCL override files and hash-pinned requirement files.

Its modules:

- `nccl`: NCCL pins: one set of files per CUDA major, for every client downstream uses.
- `requirement_files`: Requirement files for consumers of a release: hash-pinned, one per
  variant.
"""
