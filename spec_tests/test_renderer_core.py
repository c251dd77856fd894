"""The scalarizing renderers' shared core (refimpl.backends.scalar): one handler per uop for C, OpenCL C and LLVM IR,
the backends supplying only tables and spelling hooks; and the one lowering pipeline in front of every renderer.

  - every handler of the C and LLVM tables is the core's own function (OpenCL C renders through C's), and only the
    grid's SPECIAL and BARRIER set the two tables apart;
  - a uop with no handler is a CompileError naming its index and op;
  - each backend spells every hook the core asks of it, and a program using every uop renders on each;
  - the core owns the order: a STORE's lanes and gate are read before anything is stored, each lane's statement is
    made just before it is emitted, and RANGE / IF bodies are one level deeper than their opening and closing;
  - every path to a renderer goes through refimpl.lower.lower_for, which runs exactly the passes the renderer declares
    it needs, in PASSES order; `render` lowers nothing itself.
"""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from refimpl import lower, runner
from refimpl.backends import cstyle, llvmir, opencl, scalar
from refimpl.backends.cstyle import CStyleRenderer
from refimpl.backends.llvmir import LLVMRenderer
from refimpl.backends.opencl import OpenCLRenderer
from refimpl.backends.ops_clang import ClangRenderer
from refimpl.backends.ops_python import PythonRenderer
from refimpl.backends.scalar import ScalarRender
from refimpl.dtype import DType, dtypes
from refimpl.errors import CompileError
from refimpl.fuzz import execute
from refimpl.ir import GroupOp, Ops, Program, ProgramBuilder, elementwise
from refimpl.lower import lower_for, lower_grid_to_loops, passes_for
from refimpl.renderer import Renderer

f32, i32 = dtypes.float32, dtypes.int32
HOOKS = sorted(n for n, f in vars(ScalarRender).items()
               if inspect.isfunction(f) and "raise NotImplementedError" in inspect.getsource(f))
GRID_HOOKS = {"special", "barrier"}


def every_uop() -> Program:
  """A grid program with every uop the core renders: vector and gated loads, a gated vector store, a loop bounded by a
  DEFINE_VAR with a vector accumulator, an IF, CAST/BITCAST, bool / int / float ALU ops, local memory and a BARRIER."""
  b = ProgramBuilder("every_uop")
  out, x, mask = b.global_buf(f32, 64), b.global_buf(f32, 64), b.global_buf(dtypes.bool, 64)
  bits = b.global_buf(dtypes.uint32, 64)
  tmp, n = b.local_buf(i32, 4), b.var("n", 0, 8)
  g, lid = b.gidx(0, 16), b.lidx(0, 4)
  b.store(tmp, lid, lid)
  b.barrier()
  base = b.alu(Ops.MUL, g, b.const(2, i32))
  v = b.load(x, base, count=2)
  on = b.load(mask, g)
  w = b.load(x, base, gate=on, alt=b.vectorize(b.const(1.0, f32), b.const(-1.0, f32)), count=2)
  acc = b.acc(b.vectorize(b.const(0.0, f32), b.const(0.0, f32)))
  with b.loop_uops(b.const(0, i32), n):
    b.assign(acc, b.alu(Ops.ADD, acc, b.alu(Ops.MUL, v, w)))
  with b.when(b.alu(Ops.AND, on, b.alu(Ops.CMPLT, b.load(tmp, lid), b.const(3, i32)))):
    b.store(bits, g, b.bitcast(b.alu(Ops.SQRT, b.gep(acc, 1)), dtypes.uint32))
  b.store(out, base, b.vectorize(b.cast(b.cast(b.gep(acc, 0), i32), f32), b.gep(w, 1)), gate=on)
  return b.build()

GPU = OpenCLRenderer("GPU", has_local=True, has_shared=True, global_max=(1 << 31, 65535, 65535), local_max=(1024, 1024, 64))
RENDERS = {"CLANG": ClangRenderer("CLANG"), "LLVM": LLVMRenderer("LLVM"), "GPU": GPU}


# ***** the tables *****

@pytest.mark.parametrize("module, grid", [(cstyle, True), (llvmir, False)], ids=["cstyle", "llvmir"])
def test_every_handler_of_a_backend_is_the_cores(module, grid):
  """Rule: a backend's handler table is the core's: the same functions for every uop of a loop-form program, and the
  grid's for SPECIAL and BARRIER exactly when the backend has a grid."""
  want = {**scalar.HANDLERS, **(scalar.GRID_HANDLERS if grid else {})}
  assert set(module.HANDLERS) == set(want)
  assert all(module.HANDLERS[op] is want[op] for op in want)
  assert {f.__module__ for f in module.HANDLERS.values()} == {"refimpl.backends.scalar"}

def test_the_core_covers_every_alu_op_and_both_tables_split_only_on_the_grid():
  assert set(GroupOp.ALU) <= set(scalar.HANDLERS)
  assert set(cstyle.HANDLERS) - set(llvmir.HANDLERS) == {Ops.SPECIAL, Ops.BARRIER}

def test_opencl_renders_through_the_c_render_state():
  """Rule: OpenCL C differs from C only on the renderer (class attributes, its rounding of alu/cast): no state class
  or handler table of its own."""
  assert not any(isinstance(v, type) and issubclass(v, ScalarRender) for v in vars(opencl).values())
  assert not hasattr(opencl, "HANDLERS")
  assert issubclass(OpenCLRenderer, CStyleRenderer)


# ***** missing handlers and hooks *****

def test_a_uop_with_no_handler_is_a_compile_error_naming_its_index_and_op():
  """LLVM has no grid: past the capability check, a grid program stops at its first SPECIAL or BARRIER."""
  program = every_uop()
  i = next(k for k, u in enumerate(program.uops) if u.op in (Ops.SPECIAL, Ops.BARRIER))
  with pytest.raises(CompileError, match=rf"^LLVM: uop {i} {program.uops[i].op.name} has no rendering \(a loop-form"):
    llvmir._Render(LLVMRenderer("LLVM"), program).module("k")

def test_a_table_without_an_op_fails_at_its_first_uop():
  program = lower_for(every_uop(), CStyleRenderer("CLANG"))
  i = next(k for k, u in enumerate(program.uops) if u.op is Ops.CAST)
  handlers = {op: h for op, h in cstyle.HANDLERS.items() if op is not Ops.CAST}
  with pytest.raises(CompileError, match=rf"^CLANG: uop {i} CAST has no rendering$"):
    cstyle._Render(CStyleRenderer("CLANG"), program).render_uops(handlers)

def test_an_empty_table_fails_at_the_first_uop():
  with pytest.raises(CompileError, match=r"^NONE: uop 0 DEFINE_GLOBAL has no rendering$"):
    ScalarRender(Renderer(), every_uop()).render_uops({})

def test_the_core_asks_for_hooks_and_raises_without_them():
  assert len(HOOKS) >= 20 and {"alu_lane", "gated_load", "guarded", "open_loop", "close_loop"} <= set(HOOKS)
  with pytest.raises(NotImplementedError):
    ScalarRender(Renderer(), every_uop()).render_uops(scalar.HANDLERS)

@pytest.mark.parametrize("render, grid", [(cstyle._Render, True), (llvmir._Render, False)], ids=["cstyle", "llvmir"])
def test_each_backend_spells_every_hook_its_table_needs(render, grid):
  missing = [h for h in HOOKS if getattr(render, h) is getattr(ScalarRender, h) and (grid or h not in GRID_HOOKS)]
  assert not missing

def test_the_every_uop_program_uses_every_uop_of_the_core():
  grid, lowered = every_uop(), lower_for(every_uop(), CStyleRenderer("CLANG"))
  used = {u.op for u in grid.uops} | {u.op for u in lowered.uops}
  assert (set(scalar.HANDLERS) | set(scalar.GRID_HANDLERS)) - used <= set(GroupOp.ALU)
  assert {Ops.ADD, Ops.MUL, Ops.AND, Ops.CMPLT, Ops.SQRT} <= used

@pytest.mark.parametrize("device", sorted(RENDERS))
def test_a_program_with_every_uop_renders_on_each_backend(device):
  renderer = RENDERS[device]
  text = renderer.render("every_uop", lower_for(every_uop(), renderer))
  assert "every_uop" in text and "var_n" in text


# ***** one lowering pipeline: lower_for, then render *****

ALL_PASSES = [lower.decompose_trunc, lower.decompose_transcendentals, lower.decompose_threefry, lower.lower_narrow,
              lower.decompose_wmma, lower.guard_poison, lower.guard_division]
DECLARED = {  # renderer -> the passes it needs, in lower_for's order (LLVM IR's fptosi and shifts give poison: no guard;
  # its sdiv / udiv by 0 is immediate UB: guarded; OpenCL C has trunc)
  "CLANG": (RENDERS["CLANG"], ALL_PASSES), "LLVM": (RENDERS["LLVM"], ALL_PASSES[:-2] + ALL_PASSES[-1:]),
  "GPU": (GPU, ALL_PASSES[2:]),
  "GPU-libm-decomposed": (OpenCLRenderer("GPU", global_max=GPU.global_max, native_transcendentals=False), ALL_PASSES[1:]),
  "PYTHON": (PythonRenderer(), []), "a renderer that renders everything": (Renderer(), [])}

def needs_every_pass() -> Program:
  """A loop program with an op for each shared pass: TRUNC, EXP2, THREEFRY, float16, a WMMA, a shift and a division."""
  b = ProgramBuilder("needs_every_pass")
  out, h, u = b.global_buf(f32, 1), b.global_buf(dtypes.float16, 1), b.global_buf(dtypes.uint64, 1)
  zero = b.const(0, i32)
  x = b.load(out, zero)
  b.store(out, zero, b.alu(Ops.TRUNC, x))
  b.store(h, zero, b.cast(b.alu(Ops.EXP2, x), dtypes.float16))
  b.store(u, zero, b.alu(Ops.THREEFRY, b.load(u, zero), b.load(u, zero)))
  b.store(out, zero, b.wmma(x, x, x, (1, 1, 1)))
  b.store(u, zero, b.alu(Ops.SHL, b.load(u, zero), b.load(u, zero)))
  b.store(u, zero, b.alu(Ops.IDIV, b.load(u, zero), b.load(u, zero)))
  return b.build()

@pytest.mark.parametrize("name", sorted(DECLARED))
def test_lower_for_runs_the_passes_a_renderer_declares_in_order(name, monkeypatch):
  """Rule: lower_for runs each pass of PASSES that the renderer's fields say it needs, once, in PASSES order, and no
  other (a new pass is a row of PASSES and a field of Renderer)."""
  renderer, want = DECLARED[name]
  assert passes_for(renderer) == want
  ran = []
  def spy(lower_pass):
    return lambda program: ran.append(lower_pass) or lower_pass(program)
  monkeypatch.setattr(lower, "PASSES", tuple((needed, spy(p)) for needed, p in lower.PASSES))
  lower_for(needs_every_pass(), renderer)
  assert ran == want

@pytest.mark.parametrize("device", sorted(RENDERS))
def test_render_only_renders_a_lowered_program(device):
  """Rule: a renderer lowers nothing itself: given a THREEFRY it has no rendering for, it refuses it; lowered by
  lower_for first, the same program renders."""
  renderer = RENDERS[device]
  program = lower_grid_to_loops(elementwise(Ops.THREEFRY, dtypes.uint64, n=4, name="k"))
  with pytest.raises(CompileError, match=r"THREEFRY"): renderer.render("k", program)
  assert "k" in renderer.render("k", lower_for(program, renderer))

def test_the_runner_and_the_fuzzer_render_what_lower_for_made(monkeypatch):
  """Rule: refimpl.runner.Kernel and the fuzzer's batch build (refimpl.fuzz.execute) hand the renderer the program
  lower_for made of theirs, and nothing else."""
  made = []
  def spy(program, renderer):
    made.append(lower_for(program, renderer))
    return made[-1]
  monkeypatch.setattr(runner, "lower_for", spy)
  monkeypatch.setattr(execute, "lower_for", spy)
  program = elementwise(Ops.ADD, i32, n=4)
  kernel = runner.Kernel(program, "PYTHON")
  (built,) = execute.build(kernel.device, [program])
  assert len(made) == 2 and kernel.runnable is made[0] and built.kernel.runnable is made[1]
  assert kernel(np.zeros(4, np.int32), np.arange(4, dtype=np.int32), np.ones(4, np.int32))[0].tolist() == [1, 2, 3, 4]


# ***** the order the core owns *****

class Trace(ScalarRender):
  """Every hook logged with the depth it ran at; values are named by the hook that made them."""
  def __init__(self, program: Program):
    super().__init__(Renderer("TRACE"), program)
    self.log: list[tuple[str, int]] = []

  def note(self, what: str) -> str:
    self.log.append((what, self.depth))
    return what

  def emit(self, line: str) -> None: self.note(f"emit {line}")
  def literal(self, v, dt: DType) -> str: return repr(v)
  def bind_lane(self, dt: DType, name: str, value: str) -> str: return name
  def buffer_param(self, u, name: str) -> str: return name
  def local_decl(self, u, name: str) -> str: return name
  def alu_lane(self, op, dt, src_dt, operands, result) -> str: return self.note(f"alu {op.name} {result}")
  def cast(self, x, src, dst, result) -> str: return self.note(f"cast {result}")
  def bitcast(self, x, src, dst, result) -> str: return self.note(f"bitcast {result}")
  def address(self, i, buf, idx, dt) -> tuple[str, str]: return buf, idx
  def load_element(self, index, dt, k, result) -> str: return self.note(f"load {k}")
  def store_element(self, index, dt, k, value) -> str: return self.note(f"make {k} {value}")
  def gated_load(self, label, gate, alts, dt, names, load) -> list[str]: return [load(k, n) for k, n in enumerate(names)]
  def guarded(self, gate: str, label: str, stmts) -> None:
    self.note(f"open {gate}")
    for st in stmts: self.note(f"emit {st}")
    self.note("close")
  def declare_acc(self, dt, name, init) -> None: self.note(f"declare {name}")
  def read_acc(self, dt, name) -> str: return self.note(f"read {name}")
  def assign_acc(self, dt, name, value) -> str: return f"{name} = {value}"
  def open_loop(self, i, counter, start, end) -> None: self.note(f"loop {counter} {start} {end}")
  def close_loop(self, i, counter) -> None: self.note(f"end {counter}")
  def open_if(self, i, cond) -> None: self.note(f"if {cond}")
  def close_if(self, i) -> None: self.note("endif")


def test_a_gated_store_reads_its_lanes_and_gate_first_and_makes_each_statement_as_it_is_emitted():
  """Rule: the value's lanes (here accumulator reads), then the gate, are read before the guarded block opens; each
  lane's statement is made right before it is emitted (LLVM's zext and getelementptr of a lane precede its store)."""
  b = ProgramBuilder("k")
  out = b.global_buf(f32, 4)
  acc = b.acc(b.vectorize(b.const(1.0, f32), b.const(2.0, f32)))
  gate = b.alu(Ops.CMPLT, b.const(0, i32), b.const(1, i32))
  b.store(out, b.const(0, i32), acc, gate=gate)
  s = Trace(b.build())
  s.render_uops(scalar.HANDLERS)
  lanes = [f"read acc{acc}_{k}" for k in range(2)]
  store = [w for w, _ in s.log[s.log.index((lanes[0], 1)):]]
  assert store[:3] == [*lanes, f"open v{gate}"]
  assert store[3:] == [f"make 0 {lanes[0]}", f"emit make 0 {lanes[0]}", f"make 1 {lanes[1]}", f"emit make 1 {lanes[1]}",
                       "close"]

def test_blocks_are_one_level_deeper_than_their_opening_and_closing():
  """Rule: RANGE and IF open a level after their opening hook; ENDRANGE and ENDIF close it before theirs. The loop
  counter is the RANGE's lane, named r{i}, and its bounds are read once, at the RANGE."""
  b = ProgramBuilder("k")
  out = b.global_buf(i32, 8)
  acc = b.acc(b.const(4, i32))
  with b.loop_uops(b.const(0, i32), acc) as r:
    lt = b.alu(Ops.CMPLT, r, b.const(2, i32))
    with b.when(lt): b.store(out, r, r)
  s = Trace(b.build())
  s.render_uops(scalar.HANDLERS)
  depth = dict(s.log)
  assert depth[f"loop r{r} 0 read acc{acc}"] == 1 and depth[f"end r{r}"] == 1
  assert depth[f"alu CMPLT v{lt}"] == 2 and depth[f"if v{lt}"] == 2 and depth["endif"] == 2
  assert depth[f"emit make 0 r{r}"] == 3
  assert [w for w, _ in s.log if w.startswith("read")] == [f"read acc{acc}"]
