"""The core the scalarizing renderers share (C / OpenCL C in cstyle.py, LLVM IR in llvmir.py); a shared module, not a
backend: it renders nothing by itself.

Both renderers scalarize vectors: every uop i gets one expression (or name) per lane, lane k of an n-lane value being
named {prefix}{i} (n == 1) or {prefix}{i}_{k}, after the backend's `sigil` ("%" in LLVM): v for values, acc for
accumulators, r for loop counters. `ScalarRender` holds that bookkeeping (`lanes`, `accs`, `get`, `define_lanes`), the
kernel's parameters (DEFINE_GLOBAL by number, then DEFINE_VAR in program order: `args`), function-scope declarations
(`decls`) and the block depth, and renders the uops in program order through a handler table (`render_uops`), raising
CompileError naming the uop it has no handler for.

Every handler is here: a backend's table is `HANDLERS` (every uop a loop-form program has) plus, with a grid,
`GRID_HANDLERS` (SPECIAL, BARRIER). A handler owns the structure of its uop -- which lanes, in which order, which names,
what is read once and where, the depth -- and asks the backend only how to spell one piece, through the hooks of
`ScalarRender` (each raises NotImplementedError here):
  values       literal, bind_lane (a computed lane becomes the uop's: C declares a variable, LLVM has already named it)
  ALU          alu_lane (one lane of an op from its operands); `alu_rule` picks the rule from a backend's tables by the
               operand's kind (bool, int, float) and names an op a table lacks
  conversions  cast, bitcast (one lane)
  memory       buffer_param, local_decl, address (an INDEX), load_element, store_element (lane k of an INDEX),
               gated_load (the lanes of a gated LOAD, a false gate giving the alternative), guarded (statements run
               only when a gate holds)
  accumulators declare_acc, read_acc, assign_acc
  blocks       open_loop / close_loop (RANGE / ENDRANGE), open_if / close_if (IF / ENDIF), emit
  grid         special, barrier
The tables (INT_RULES, BOOL_RULES, FLOAT_RULES, types, literals) are the backends' own.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import ClassVar, TypeVar

from refimpl.dtype import DType, PtrDType, dtypes
from refimpl.errors import CompileError
from refimpl.ir import GroupOp, Ops, Program, UOp
from refimpl.renderer import Renderer

R = TypeVar("R")
Lane = Callable[[int, str], str]  # (lane k, its result name) -> the lane's value


def operand_kind(dt: DType) -> str:
  """The kind of scalar dt that picks an ALU op's rule table: "bool", "int" or "float"."""
  if dt == dtypes.bool: return "bool"
  return "int" if dtypes.is_int(dt) else "float"

def alu_rule(device: str, tables: Mapping[str, Mapping[Ops, R]], op: Ops, dt: DType) -> tuple[str, R]:
  """(kind, rule) of ALU op on scalar operand dtype dt: the entry of tables[kind] (a backend's ALU_TABLES), kind by
  `operand_kind`; CompileError when that table has no rule for op."""
  kind = operand_kind(dt)
  if op not in tables[kind]: raise CompileError(f"{device}: no rendering of {op.name} on {dt.name}")
  return kind, tables[kind][op]


class ScalarRender:
  """The state of one rendering of a scalarized program (see the module docstring); subclasses add their own state and
  the spelling hooks below."""
  sigil: ClassVar[str] = ""             # before every value name (LLVM: "%")
  var_type: ClassVar[str] = "int"       # a DEFINE_VAR parameter's type
  unsupported_hint: ClassVar[str] = ""  # after "uop i OP has no rendering"

  def __init__(self, r: Renderer, program: Program):
    self.r, self.uops = r, program.uops
    self.lanes: dict[int, list[str]] = {}  # uop -> its lanes' expressions or names
    self.accs: dict[int, list[str]] = {}   # DEFINE_ACC / ASSIGN uop -> its accumulator's lane names (read by read_acc)
    self.index: dict[int, tuple[str, str]] = {}  # INDEX uop -> its address, as the backend's `address` gives it
    self.params: dict[int, str] = {}       # DEFINE_GLOBAL number -> parameter declaration
    self.vars: list[str] = []              # DEFINE_VAR parameter declarations, in program order
    self.decls: list[str] = []             # function-scope declarations, in program order
    self.lines: list[str] = []
    self.depth = 1                         # the block nesting of the next line (RANGE and IF open one)

  def get(self, j: int, k: int = 0) -> str:
    """Lane k of uop j at this point of the program (an accumulator is read here, by `read_acc`)."""
    if j in self.accs: return self.read_acc(self.uops[j].dtype.scalar(), self.accs[j][k])
    return self.lanes[j][k]

  @staticmethod
  def lane_name(prefix: str, i: int, k: int, n: int) -> str:
    """The name of lane k of uop i's n lanes: {prefix}{i} for one lane, else {prefix}{i}_{k}."""
    return f"{prefix}{i}" if n == 1 else f"{prefix}{i}_{k}"

  def value_names(self, i: int, n: int) -> list[str]:
    """The names of uop i's n value lanes."""
    return [self.lane_name(f"{self.sigil}v", i, k, n) for k in range(n)]

  def bind(self, i: int, dt: DType, names: list[str], values: list[str]) -> None:
    """Makes `values` (all computed first) uop i's lanes of scalar dt, lane by lane through `bind_lane`."""
    self.lanes[i] = [self.bind_lane(dt, name, v) for name, v in zip(names, values)]

  def define_lanes(self, i: int, dt: DType, n: int, lane: Lane) -> None:
    """Uop i's n lanes of scalar dt: lane(k, name) for k in order, then bound."""
    names = self.value_names(i, n)
    self.bind(i, dt, names, [lane(k, name) for k, name in enumerate(names)])

  def args(self) -> list[str]:
    """The kernel's parameters in call order: the buffers by DEFINE_GLOBAL number, then the int vars."""
    return [self.params[k] for k in sorted(self.params)] + self.vars

  def render_uops(self, handlers: Mapping[Ops, Callable[..., None]]) -> None:
    """Renders every uop in program order by its handler in `handlers`; CompileError for a uop with none."""
    for i, u in enumerate(self.uops):
      handler = handlers.get(u.op)
      if handler is None: raise CompileError(f"{self.r.device}: uop {i} {u.op.name} has no rendering{self.unsupported_hint}")
      handler(self, i, u)

  # ---- the spellings (per backend) ----
  def emit(self, line: str) -> None:
    """Appends one line of the body at the current depth."""
    raise NotImplementedError
  def literal(self, v: bool | int | float, dt: DType) -> str:
    """An inline constant of scalar dt."""
    raise NotImplementedError
  def bind_lane(self, dt: DType, name: str, value: str) -> str:
    """Makes `value` (a lane of scalar dt computed for `name`) a lane of its uop; returns what later uops read."""
    raise NotImplementedError
  def buffer_param(self, u: UOp, name: str) -> str:
    """The parameter declaration of DEFINE_GLOBAL u, named `name`."""
    raise NotImplementedError
  def local_decl(self, u: UOp, name: str) -> str:
    """The function-scope declaration of DEFINE_LOCAL u's array, named `name`."""
    raise NotImplementedError
  def alu_lane(self, op: Ops, dt: DType, src_dt: DType, operands: list[str], result: str) -> str:
    """One lane of ALU op: dt is the result's scalar dtype, src_dt the last operand's."""
    raise NotImplementedError
  def cast(self, x: str, src: DType, dst: DType, result: str) -> str:
    """CAST of one lane from scalar src to scalar dst."""
    raise NotImplementedError
  def bitcast(self, x: str, src: DType, dst: DType, result: str) -> str:
    """BITCAST of one lane between scalars of one size."""
    raise NotImplementedError
  def address(self, i: int, buf: str, idx: str, dt: DType) -> tuple[str, str]:
    """INDEX uop i of buffer `buf` (elements of dt) at `idx`, as load_element and store_element take it."""
    raise NotImplementedError
  def load_element(self, index: tuple[str, str], dt: DType, k: int, result: str) -> str:
    """Element k of an INDEX, loaded as a register of scalar dt."""
    raise NotImplementedError
  def store_element(self, index: tuple[str, str], dt: DType, k: int, value: str) -> str:
    """The statement storing `value` (scalar dt) into element k of an INDEX."""
    raise NotImplementedError
  def gated_load(self, label: str, gate: str, alts: list[str], dt: DType, names: list[str], load: Lane) -> list[str]:
    """The lanes (scalar dt) of a gated LOAD, to be bound to `names`: load(k, result) where `gate` holds, else alts[k];
    a false gate does no access."""
    raise NotImplementedError
  def guarded(self, gate: str, label: str, stmts: Iterable[str]) -> None:
    """Emits `stmts` (produced lane by lane) to run only where `gate` holds."""
    raise NotImplementedError
  def declare_acc(self, dt: DType, name: str, init: str) -> None:
    """Declares one accumulator lane of scalar dt named `name`, holding `init` from here."""
    raise NotImplementedError
  def read_acc(self, dt: DType, name: str) -> str:
    """The value of accumulator lane `name` at this point."""
    raise NotImplementedError
  def assign_acc(self, dt: DType, name: str, value: str) -> str:
    """The statement making accumulator lane `name` hold `value`."""
    raise NotImplementedError
  def open_loop(self, i: int, counter: str, start: str, end: str) -> None:
    """Opens RANGE i's loop: `counter` from `start` while below `end` (both read once, here)."""
    raise NotImplementedError
  def close_loop(self, i: int, counter: str) -> None:
    """Closes RANGE i's loop (after its last body line): the next iteration, then what follows the loop."""
    raise NotImplementedError
  def open_if(self, i: int, cond: str) -> None:
    """Opens IF i's block, run where `cond` holds."""
    raise NotImplementedError
  def close_if(self, i: int) -> None:
    """Closes IF i's block."""
    raise NotImplementedError
  def special(self, name: str, result: str) -> str:
    """The value of grid index `name` (gidx0, lidx1, ...)."""
    raise NotImplementedError
  def barrier(self) -> None:
    """Emits a workgroup barrier."""
    raise NotImplementedError


# ***** the handlers *****

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

def _alu(s: ScalarRender, i: int, u: UOp) -> None:
  """Lane k of the result from lane k of every operand; the rule is picked by the last operand's dtype (a comparison's
  operand, WHERE's value)."""
  d, sd = u.dtype.scalar(), s.uops[u.src[-1]].dtype.scalar()
  s.define_lanes(i, d, u.dtype.count, lambda k, name: s.alu_lane(u.op, d, sd, [s.get(j, k) for j in u.src], name))

def _cast(s: ScalarRender, i: int, u: UOp) -> None:
  """CAST and BITCAST, lane by lane."""
  src, dst = s.uops[u.src[0]].dtype.scalar(), u.dtype.scalar()
  conv = s.bitcast if u.op is Ops.BITCAST else s.cast
  s.define_lanes(i, dst, u.dtype.count, lambda k, name: conv(s.get(u.src[0], k), src, dst, name))

def _index(s: ScalarRender, i: int, u: UOp) -> None:
  s.index[i] = s.address(i, s.get(u.src[0]), s.get(u.src[1]), s.uops[u.src[0]].dtype.base)

def _load(s: ScalarRender, i: int, u: UOp) -> None:
  """Lane k is element k of the INDEX; gated, the alternative's lanes and the gate are read first."""
  dt, n, index = u.dtype.scalar(), u.dtype.count, s.index[u.src[0]]
  load = lambda k, result: s.load_element(index, dt, k, result)
  if len(u.src) == 1:
    s.define_lanes(i, dt, n, load)
    return
  alts, gate = [s.get(u.src[1], k) for k in range(n)], s.get(u.src[2])
  names = s.value_names(i, n)
  s.bind(i, dt, names, s.gated_load(f"load{i}", gate, alts, dt, names, load))

def _store(s: ScalarRender, i: int, u: UOp) -> None:
  """Element k of the INDEX gets lane k of the value (the lanes, then the gate, are read first). The statements are a
  generator: each lane's is made as it is emitted, after whatever that lane emits itself."""
  dt, n, index = s.uops[u.src[1]].dtype.scalar(), s.uops[u.src[1]].dtype.count, s.index[u.src[0]]
  vals = [s.get(u.src[1], k) for k in range(n)]
  stmts: Iterator[str] = (s.store_element(index, dt, k, v) for k, v in enumerate(vals))
  if len(u.src) == 3:
    s.guarded(s.get(u.src[2]), f"store{i}", stmts)
    return
  for st in stmts: s.emit(st)

def _define_acc(s: ScalarRender, i: int, u: UOp) -> None:
  dt, n = u.dtype.scalar(), u.dtype.count
  init = [s.get(u.src[0], k) for k in range(n)]
  names = [s.lane_name(f"{s.sigil}acc", i, k, n) for k in range(n)]
  for name, v in zip(names, init): s.declare_acc(dt, name, v)
  s.accs[i] = names

def _assign(s: ScalarRender, i: int, u: UOp) -> None:
  """The new lanes are read first, then stored; later reads of the ASSIGN read the accumulator."""
  dt, names = u.dtype.scalar(), s.accs[u.src[0]]
  vals = [s.get(u.src[1], k) for k in range(u.dtype.count)]
  for name, v in zip(names, vals): s.emit(s.assign_acc(dt, name, v))
  s.accs[i] = names

def _range(s: ScalarRender, i: int, u: UOp) -> None:
  counter = f"{s.sigil}r{i}"
  s.open_loop(i, counter, s.get(u.src[0]), s.get(u.src[1]))
  s.lanes[i] = [counter]
  s.depth += 1

def _endrange(s: ScalarRender, i: int, u: UOp) -> None:
  s.depth -= 1
  s.close_loop(u.src[0], s.lanes[u.src[0]][0])

def _if(s: ScalarRender, i: int, u: UOp) -> None:
  s.open_if(i, s.get(u.src[0]))
  s.depth += 1

def _endif(s: ScalarRender, i: int, u: UOp) -> None:
  s.depth -= 1
  s.close_if(u.src[0])

def _special(s: ScalarRender, i: int, u: UOp) -> None:
  s.define_lanes(i, u.dtype.scalar(), 1, lambda k, name: s.special(u.arg[0], name))

def _barrier(s: ScalarRender, i: int, u: UOp) -> None: s.barrier()

HANDLERS: dict[Ops, Callable[..., None]] = {
  Ops.DEFINE_GLOBAL: _define_global, Ops.DEFINE_VAR: _define_var, Ops.DEFINE_LOCAL: _define_local, Ops.CONST: _const,
  Ops.VECTORIZE: _vectorize, Ops.GEP: _gep, **dict.fromkeys(GroupOp.ALU, _alu), Ops.CAST: _cast, Ops.BITCAST: _cast,
  Ops.INDEX: _index, Ops.LOAD: _load, Ops.STORE: _store, Ops.DEFINE_ACC: _define_acc, Ops.ASSIGN: _assign,
  Ops.RANGE: _range, Ops.ENDRANGE: _endrange, Ops.IF: _if, Ops.ENDIF: _endif}
"""Every uop of a loop-form program (after refimpl.lower's THREEFRY, WMMA and narrow-float lowerings)."""
GRID_HANDLERS: dict[Ops, Callable[..., None]] = {Ops.SPECIAL: _special, Ops.BARRIER: _barrier}
"""The uops of a backend with a grid (workgroups and work items)."""
