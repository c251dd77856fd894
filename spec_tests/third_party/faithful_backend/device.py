"""FAITHFUL: a correct backend defined outside refimpl. It is refimpl's CLANG pipeline (renderer, compiler, ELF runtime)
under another name and class, so every test of the suite must pass on it: a failure is a false alarm of the suite."""
from refimpl.backends.ops_clang import ClangCompiler, ClangProgram, ClangRenderer
from refimpl.device import Compiled, MallocAllocator
from refimpl.dtype import DType, ImageDType, PtrDType, dtypes


class FaithfulDevice(Compiled):
  device_name = "FAITHFUL"
  subprocess_safe = True

  def __init__(self, device: str = "FAITHFUL"):
    super().__init__(device, MallocAllocator, ClangRenderer(device), ClangCompiler(), ClangProgram)

  def supports_dtype(self, dtype: DType) -> bool:
    return not isinstance(dtype, (PtrDType, ImageDType)) and dtype.count == 1 and dtype != dtypes.void
