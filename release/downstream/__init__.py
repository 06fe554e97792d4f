"""Files for the users of a release: NCCL override files and hash-pinned requirement files."""
