"""What makes a wheel count as built: its files, auditwheel's verdict, and the device code it
holds.

Its modules:

- `budget`: The project-size budget of a destination.
- `cudalibs`: The CUDA a wheel's shared objects link, against its label, each other and the
  torch it requires.
- `devicecode`: Device code wherever a wheel holds it, held to the cell's SMs and PTX. csrc
  ships its device code as `*.fatbin` files.
- `elffacts`: What one ELF file of a wheel needs at load time: machine, NEEDED, symbol versions.
- `fatbin`: What a fatbin holds: the SMs it has cubins for and the virtual archs it has PTX for.
- `findings`: The rules of the inspection of a wheel as served and of its index, and a finding.
- `indexrules`: What an index's pages say across wheels: duplicates, hashes, missing arches and
  variants, stray links.
- `limitedapi`: An abi3 wheel keeps to the limited API of its floor.
- `pythonapi`: A py3-none wheel promises every CPython: its shared objects use no Python C-API.
- `runtimelibs`: The shared libraries a wheel's runtime dependencies provide, read from the
  installed distributions' RECORD files.
- `served`: A wheel inspected from its bytes alone, with no build context (verify, audit).
- `symbols`: Runtime symbol versions against the wheel's manylinux tag (auditwheel's policy).
- `stabletorch`: The torch a libtorch stable-ABI cell builds against by default and its
  wheel's requirement starts at: the oldest it admits on the cell's CUDA major.
- `torchabi`: The ABI check of a torch extension wheel.
- `torchaudit`: A libtorch stable-ABI wheel held to the stable ABI by torch-abi-audit.
- `torchcuda`: Which CUDA each torch release of an index is built for, as the index says (its
  label, else its METADATA's requirements, from the PEP 658 file or range requests), read
  once a run.
- `verdict`: auditwheel's verdict on a built wheel (`auditwheel_problems` of `auditwheel show`).
- `wheel`: Wheel inspection: a wheel counts as built only when everything about it is what its
  cell asked for.
"""
