"""tinygrad devices written as a porter writes one: a Renderer subclass, a Compiler, a Compiled subclass.

MyDevice          tinygrad's ClangRenderer, ClangJITCompiler and CPUProgram under this package's own classes: faithful.
EquivalentDevice  MyDevice rendering CMPNE as `!(a==b)`: other C, the same results (nothing differs from the baseline).
PlantedDevice     MyDevice whose renderer renders XOR as C's `|` (the spec's XOR is bitwise exclusive or, SPEC.md,
                  bitwise), so every XOR case and THREEFRY (which tinygrad expands into XORs) fail.
ShortLiteralDevice  MyDevice printing float32 constants with 6 significant digits (`%.5e`, as a porter's printf might):
                  a constant that needs 9 digits is rounded to another float.
RenamedDevice     MyDevice whose renderer is named "MYDEV": tinygrad 0.10.1 spells vectors for C only when the renderer's
                  device is "CLANG" (`{a,b,c,d}`, `v[0]`); under any other name it writes OpenCL's `(float4)(a,b,c,d)`
                  and `v.x`, which clang rejects, so every kernel with vector values fails to compile.
NoCompilerDevice  MyDevice whose compiler runs a clang that is not installed: the device does not open.
"""
import math
import subprocess

from tinygrad.device import Compiled, CPUProgram, MallocAllocator
from tinygrad.dtype import dtypes
from tinygrad.ops import Ops, PatternMatcher, UPat
from tinygrad.renderer.cstyle import ClangRenderer
from tinygrad.runtime.ops_clang import ClangJITCompiler


class MyRenderer(ClangRenderer):
  """The porter's C renderer: tinygrad's, unchanged (a real port changes its types, builtins, launch bounds...). Its
  `device` stays "CLANG", the name tinygrad's C vector spellings are keyed on (RenamedRenderer)."""


class EquivalentRenderer(MyRenderer):
  code_for_op = {**MyRenderer.code_for_op, Ops.CMPNE: lambda a, b, dtype: f"(!({a}=={b}))"}


class PlantedRenderer(MyRenderer):
  """MyRenderer with one mistake: XOR rendered as OR."""
  code_for_op = {**MyRenderer.code_for_op, Ops.XOR: lambda a, b, dtype: f"({a}|{b})"}


def _six_digits(x) -> str | None:
  return f"{x.arg:.5e}f" if math.isfinite(x.arg) else None


class ShortLiteralRenderer(MyRenderer):
  """MyRenderer with one mistake: float32 literals printed with 6 significant digits (1.23457e+00f)."""
  string_rewrite = PatternMatcher([(UPat(Ops.CONST, dtype=dtypes.float, name="x"), lambda ctx, x: _six_digits(x))]) + \
    MyRenderer.string_rewrite


class RenamedRenderer(MyRenderer):
  """MyRenderer under the porter's own name."""
  device = "MYDEV"


class MyCompiler(ClangJITCompiler):
  """tinygrad's clang JIT compiler under its own cache key."""
  def __init__(self): super().__init__("compile_mydev")


class MissingClangCompiler(MyCompiler):
  """A compiler that runs a clang this machine does not have (as tinygrad's own runs `clang` from PATH)."""
  def compile(self, src: str) -> bytes:
    return subprocess.check_output(["clang-not-installed-here", "-c", "-x", "c", "-", "-o", "-"], input=src.encode())


class MyDevice(Compiled):
  renderer_class, compiler_class = MyRenderer, MyCompiler

  def __init__(self, device: str = "MYDEV"):
    super().__init__(device, MallocAllocator, self.renderer_class(), self.compiler_class(), CPUProgram)


class EquivalentDevice(MyDevice): renderer_class = EquivalentRenderer
class PlantedDevice(MyDevice): renderer_class = PlantedRenderer
class ShortLiteralDevice(MyDevice): renderer_class = ShortLiteralRenderer
class RenamedDevice(MyDevice): renderer_class = RenamedRenderer
class NoCompilerDevice(MyDevice): compiler_class = MissingClangCompiler
