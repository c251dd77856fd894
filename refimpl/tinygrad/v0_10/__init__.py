"""tinygrad 0.10.1's kernels on refimpl, and its devices under refimpl's suite.

  importer.py   from_tinygrad(spec_or_uops) -> a verified refimpl Program, by numbered rules (TRANSLATION_RULES);
                TranslationError names the uop refimpl cannot express
  capture.py    capture(): every kernel a tinygrad script runs (Program, inputs before, outputs after)
  reference.py  the REFIMPL device: tinygrad's kernels on refimpl's emulator, and `run --check DEVICE`
  exporter.py   to_tinygrad(program): a refimpl Program as tinygrad 0.10.1's linearized UOps (the importer reversed)
  backend.py    the TINYGRAD:<NAME> devices: any tinygrad 0.10.1 device (or a porter's) under refimpl's suite and fuzzer
  toolchain.py  tinygrad's CLANG, LLVM and GPU devices finding refimpl's toolchains (pip's zig, pyopencl's PoCL)
  nvidia.py     tinygrad's CUDA and PTX toolchains on refimpl programs without a GPU
  standins.py   QCOM, DSP, NV, CUDA, AMD and METAL judged without their hardware, at the level this machine allows
"""
