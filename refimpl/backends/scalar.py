"""The core the scalarizing renderers share (C / OpenCL C in cstyle.py, LLVM IR in llvmir.py); a shared module, not a
backend: it renders nothing by itself.

Both renderers scalarize vectors: every uop i gets one expression (or name) per lane, lane k of an n-lane value being
named {prefix}{i} (n == 1) or {prefix}{i}_{k}. `ScalarRender` holds that bookkeeping (`lanes`, `get`, `lane_name`), the
kernel's parameters (DEFINE_GLOBAL by number, then DEFINE_VAR in program order: `args`) and function-scope declarations
(`decls`), and renders the uops in program order through a backend's handler table (`render_uops`), raising
CompileError naming the uop it has no handler for. `HANDLERS` renders the uops whose rendering is the same in both
backends: CONST (an inline literal), VECTORIZE and GEP (only lane names), and DEFINE_GLOBAL / DEFINE_VAR /
DEFINE_LOCAL, whose spellings are the subclass's (`sigil`, `literal`, `buffer_param`, `var_type`, `local_decl`).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from refimpl.dtype import DType, PtrDType
from refimpl.errors import CompileError
from refimpl.ir import Ops, Program, UOp
from refimpl.renderer import Renderer


class ScalarRender:
  """The state of one rendering of a scalarized program (see the module docstring); subclasses add their own state and
  the spelling hooks below."""
  sigil: ClassVar[str] = ""             # before every value name (LLVM: "%")
  var_type: ClassVar[str] = "int"       # a DEFINE_VAR parameter's type
  unsupported_hint: ClassVar[str] = ""  # after "uop i OP has no rendering"

  def __init__(self, r: Renderer, program: Program):
    self.r, self.uops = r, program.uops
    self.lanes: dict[int, list[str]] = {}  # uop -> its lanes' expressions or names
    self.params: dict[int, str] = {}       # DEFINE_GLOBAL number -> parameter declaration
    self.vars: list[str] = []              # DEFINE_VAR parameter declarations, in program order
    self.decls: list[str] = []             # function-scope declarations, in program order
    self.lines: list[str] = []

  def get(self, j: int, k: int = 0) -> str:
    """Lane k of uop j at this point of the program."""
    return self.lanes[j][k]

  @staticmethod
  def lane_name(prefix: str, i: int, k: int, n: int) -> str:
    """The name of lane k of uop i's n lanes: {prefix}{i} for one lane, else {prefix}{i}_{k}."""
    return f"{prefix}{i}" if n == 1 else f"{prefix}{i}_{k}"

  def args(self) -> list[str]:
    """The kernel's parameters in call order: the buffers by DEFINE_GLOBAL number, then the int vars."""
    return [self.params[k] for k in sorted(self.params)] + self.vars

  def render_uops(self, handlers: dict[Ops, Callable[..., None]]) -> None:
    """Renders every uop in program order by its handler in `handlers`; CompileError for a uop with none."""
    for i, u in enumerate(self.uops):
      handler = handlers.get(u.op)
      if handler is None: raise CompileError(f"{self.r.device}: uop {i} {u.op.name} has no rendering{self.unsupported_hint}")
      handler(self, i, u)

  # ---- the spellings (per backend) ----
  def literal(self, v: bool | int | float, dt: DType) -> str:
    """An inline constant of scalar dt."""
    raise NotImplementedError
  def buffer_param(self, u: UOp, name: str) -> str:
    """The parameter declaration of DEFINE_GLOBAL u, named `name`."""
    raise NotImplementedError
  def local_decl(self, u: UOp, name: str) -> str:
    """The function-scope declaration of DEFINE_LOCAL u's array, named `name`."""
    raise NotImplementedError


def _define_global(s: ScalarRender, i: int, u: UOp) -> None:
  name = f"{s.sigil}data{u.arg}"
  s.params[u.arg] = s.buffer_param(u, name)
  s.lanes[i] = [name]

def _define_var(s: ScalarRender, i: int, u: UOp) -> None:
  name = f"{s.sigil}var_{u.arg[0]}"
  s.vars.append(f"{s.var_type} {name}")
  s.lanes[i] = [name]

def _define_local(s: ScalarRender, i: int, u: UOp) -> None:
  assert isinstance(u.dtype, PtrDType)
  name = f"{s.sigil}local_{u.arg}"
  s.decls.append(s.local_decl(u, name))
  s.lanes[i] = [name]

def _const(s: ScalarRender, i: int, u: UOp) -> None: s.lanes[i] = [s.literal(u.arg, u.dtype)]
def _vectorize(s: ScalarRender, i: int, u: UOp) -> None: s.lanes[i] = [s.get(j) for j in u.src]
def _gep(s: ScalarRender, i: int, u: UOp) -> None: s.lanes[i] = [s.get(u.src[0], lane) for lane in u.arg]

HANDLERS: dict[Ops, Callable[..., None]] = {
  Ops.DEFINE_GLOBAL: _define_global, Ops.DEFINE_VAR: _define_var, Ops.DEFINE_LOCAL: _define_local, Ops.CONST: _const,
  Ops.VECTORIZE: _vectorize, Ops.GEP: _gep}
