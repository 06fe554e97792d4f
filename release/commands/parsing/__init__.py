"""The parser side every command shares, apart from the commands themselves: from a command
line (and the environment the command hands down) to what a stage is given.

Its modules:

- `arguments`: The `Command` protocol, the shared options and how a command's parser is made.
- `options`: The argparse types of every numeric and every output-path option, in one place.
- `buildopts`: The one road from a command line to the settings of a build (build, env,
  gpu-gate) and of the commands that read the toolchains (doctor, plan).
- `common`: The edges several commands share: the output, loading the matrix, the report
  files, the commit a nightly is built from.
"""
