"""What makes a wheel count as built: its files, auditwheel's verdict, and the device code it
holds.

Its modules:

- `budget`: The project-size budget of a destination.
- `devicecode`: Device code wherever a wheel holds it, held to the cell's SMs and PTX. csrc
  ships its device code as `*.fatbin` files.
- `fatbin`: What a fatbin holds: the SMs it has cubins for and the virtual archs it has PTX for.
- `limitedapi`: An abi3 wheel keeps to the limited API of its floor.
- `torchabi`: The ABI check of a torch extension wheel.
- `torchaudit`: A libtorch stable-ABI wheel held to the stable ABI by torch-abi-audit.
- `torchcuda`: A torch wheel's own `Requires-Dist: torch` against the torch releases of its
  index: one that admits a torch built for another CUDA major than the wheel's is refused.
- `verdict`: auditwheel's verdict on a built wheel (`auditwheel_problems` of `auditwheel show`).
- `wheel`: Wheel inspection: a wheel counts as built only when everything about it is what its
  cell asked for.
"""
