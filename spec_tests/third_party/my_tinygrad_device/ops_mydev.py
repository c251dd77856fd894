"""Two tinygrad devices written as a porter writes one: a Renderer subclass, a Compiler, a Compiled subclass.

MyDevice       tinygrad's ClangRenderer, ClangJITCompiler and CPUProgram under this package's own classes: faithful.
PlantedDevice  MyDevice whose renderer renders XOR as C's `|` (the one planted difference: the spec's XOR is bitwise
               exclusive or, SPEC.md, bitwise), so every XOR case and THREEFRY (which tinygrad expands into XORs) fail.
"""
from tinygrad.device import Compiled, CPUProgram, MallocAllocator
from tinygrad.ops import Ops
from tinygrad.renderer.cstyle import ClangRenderer
from tinygrad.runtime.ops_clang import ClangJITCompiler


class MyRenderer(ClangRenderer):
  """The porter's C renderer: tinygrad's, unchanged (a real port changes its types, builtins, launch bounds...)."""
  device = "MYDEV"


class PlantedRenderer(MyRenderer):
  """MyRenderer with one mistake: XOR rendered as OR."""
  code_for_op = {**MyRenderer.code_for_op, Ops.XOR: lambda a, b, dtype: f"({a}|{b})"}


class MyCompiler(ClangJITCompiler):
  """tinygrad's clang JIT compiler under its own cache key."""
  def __init__(self): super().__init__("compile_mydev")


class MyDevice(Compiled):
  renderer_class = MyRenderer

  def __init__(self, device: str = "MYDEV"):
    super().__init__(device, MallocAllocator, self.renderer_class(), MyCompiler(), CPUProgram)


class PlantedDevice(MyDevice):
  renderer_class = PlantedRenderer
