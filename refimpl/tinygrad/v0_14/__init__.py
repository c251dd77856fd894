"""tinygrad 0.14's kernels on refimpl (docs/tinygrad-0.14.md).

  record.py    KernelRecord: a linearized tinygrad 0.14 kernel as plain data (op names, dtype names, shapes, address
               spaces, args, src indices) with its JSON form: what the importer reads, stored in the corpus, so the
               importer and the corpus are tested without tinygrad 0.14 installed
  live.py      record_of(uops): tinygrad 0.14's UOp list -> KernelRecord (imports tinygrad 0.14)
  importer.py  translate(record) -> a verified refimpl Program, by numbered rules (TRANSLATION_RULES); TranslationError
               names the uop refimpl cannot express
  runs.py      every kernel tinygrad 0.14 runs on one of its devices, as it runs (record, translation, buffers)
  capture.py   every distinct kernel a tinygrad 0.14 script runs on a device (PYTHON, CPU, CL), as refimpl cases
  check.py     `run --check DEVICE` under 0.14: each kernel a device runs checked on the emulator, reproducers saved
  toolchain.py tinygrad 0.14's CPU and CL devices here: refimpl's clang (ziglang), pyopencl's OpenCL loader and PoCL
  device.py    the REFIMPL device for tinygrad 0.14: install() (ops_refimpl.py: its tinygrad classes; program.py: the
               kernel on the emulator); pytest_device.py runs tinygrad 0.14's own tests on it
"""
