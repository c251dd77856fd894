"""tinygrad 0.14's kernels on refimpl (refimpl/tinygrad/v0_14, docs/tinygrad-0.14.md), tested without tinygrad 0.14
installed: its kernels are data (KernelRecord). Rules:
- the importer's translation rules, each on the smallest record that needs it; what refimpl cannot express is a
  TranslationError naming the uop (a do-while loop, a REG buffer indexed by a variable);
- every kernel of the 0.14 corpus (corpus/tinygrad-0.14.0: tinygrad 0.14.0's PYTHON, CPU and CL devices on
  workload.py) translates from its stored record to the stored program; the emulator computes what tinygrad 0.14's
  emulator computed, on every element the spec pins to one value, and what its CPU and CL devices computed on every
  kernel without float arithmetic (where there is some, tinygrad's C departs from its own kernel in two named ways);
  test_tinygrad_corpus.py replays the same cases on every backend;
- an unsupported tinygrad line is refused with the lines refimpl serves."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from refimpl.dtype import dtypes
from refimpl.emulator.machine import emulate
from refimpl.fuzz.corpus import load_finding
from refimpl.ir import Ops
from refimpl.testing.compare import same_value
from refimpl.tinygrad.cases import tinygrad_outputs
from refimpl.tinygrad.lines import SUPPORTED, UnsupportedTinygrad, installed, require
from refimpl.tinygrad.program import compare_run
from refimpl.tinygrad.translation import TranslationError
from refimpl.tinygrad.v0_14.importer import translate
from refimpl.tinygrad.v0_14.record import KernelRecord, Rec, RecordFormatError, float_arg, from_json, to_json

CORPUS_14 = Path(__file__).resolve().parents[1] / "corpus" / "tinygrad-0.14.0"
FILES = sorted(CORPUS_14.glob("PYTHON/*.json"))
CPU_FILES = sorted(CORPUS_14.glob("CPU/*.json"))
NATIVE_FILES = CPU_FILES + sorted(CORPUS_14.glob("CL/*.json"))  # kernels of 0.14's C and OpenCL C renderers


class Kernel14:
  """A tinygrad 0.14 kernel record written by hand, uop by uop (each add returns the uop's index)."""
  def __init__(self): self.uops: list[Rec] = []

  def add(self, op: str, dtype: str = "void", shape=(), space: str | None = "ALU", arg=None, src=()) -> int:
    self.uops.append(Rec(op, dtype, shape, space, arg, tuple(src)))
    return len(self.uops) - 1

  def const(self, value, dtype: str = "int") -> int:
    """A weak CONST and the CAST that types it (rules 1, 2): the CAST's index."""
    weak = self.add("CONST", "weakfloat" if isinstance(value, float) else "weakint", (), None,
                    float_arg(value) if isinstance(value, float) else value)
    return self.add("CAST", dtype, (), None, None, [weak])

  def param(self, slot: int, n: int, size: int) -> int:
    return self.add("PARAM", "float", (n,), "GLOBAL", {"slot": slot, "name": None, "min": None, "max": None}, [size])

  def record(self, global_size=(1, 1, 1), local_size=(1, 1, 1)) -> KernelRecord:
    return KernelRecord("k", tuple(self.uops), global_size, local_size)


def _add_one_kernel(n: int = 4) -> KernelRecord:
  """out[i] = in[i] + 1.0, one lane per workgroup: PARAMs, SPECIAL, INDEX, LOAD, ADD, STORE, SINK."""
  k = Kernel14()
  size = k.const(n)
  out, inp = k.param(0, n, size), k.param(1, n, size)
  gid = k.add("SPECIAL", "int", (), "ALU", "gidx0", [size])
  x = k.add("LOAD", "float", (), "ALU", None, [k.add("INDEX", "float", (), "GLOBAL", None, [inp, gid])])
  y = k.add("ADD", "float", (), "ALU", None, [x, k.const(1.0, "float")])
  store = k.add("STORE", "void", (), "GLOBAL", None, [k.add("INDEX", "float", (), "GLOBAL", None, [out, gid]), y])
  k.add("SINK", "void", None, None, {"name": "E_4"}, [store])
  return k.record(global_size=(n, 1, 1))


def test_a_kernel_translates_to_the_program_it_means():
  """Rules 1, 2, 3, 8 and 15: weak CONSTs typed by their CAST, PARAMs as DEFINE_GLOBALs in list order, SPECIAL sized by
  its constant, SINK gone; the program computes out[i] = in[i] + 1."""
  t = translate(_add_one_kernel())
  ops = [u.op for u in t.program.uops]
  assert ops.count(Ops.DEFINE_GLOBAL) == 2 and Ops.SPECIAL in ops and Ops.ADD in ops
  assert {"weak-const", "typed-const", "param-buffer", "no-op", "special-size"} <= set(t.fired)
  x = np.array([1.5, -2.0, 0.0, 7.25], np.float32)
  out = emulate(t.program, [np.zeros(4, np.float32), x]).buffers[0]
  assert out.tolist() == (x + np.float32(1)).tolist()


def test_a_float_constant_is_rounded_as_a_c_literal():
  """Rule 2: a weakfloat CONST cast to float32 is the float32 nearest its float64 value (C's strtof of the literal)."""
  k = Kernel14()
  k.const(0.1, "float")
  c = translate(k.record()).program.uops[0]
  assert c.op is Ops.CONST and c.dtype == dtypes.float32 and c.arg == float(np.float32(0.1))


def test_cmpeq_is_not_cmpne():
  """Rule 12: CMPEQ (a, b) is XOR (CMPNE (a, b), true)."""
  k = Kernel14()
  k.add("CMPEQ", "bool", (), "ALU", None, [k.const(3), k.const(3)])
  prog = translate(k.record()).program
  assert [x.op for x in prog.uops[-3:]] == [Ops.CMPNE, Ops.CONST, Ops.XOR] and prog.uops[-2].arg is True


@pytest.mark.parametrize("op, renamed", [("RECIPROCAL", Ops.RECIP), ("CDIV", Ops.IDIV), ("CMOD", Ops.MOD)])
def test_renamed_ops_keep_their_meaning(op, renamed):
  """Rule 11: RECIPROCAL is RECIP, CDIV is IDIV and CMOD is MOD (truncating, as C's / and %)."""
  k = Kernel14()
  if op == "RECIPROCAL": k.add(op, "float", (), "ALU", None, [k.const(2.0, "float")])
  else: k.add(op, "int", (), "ALU", None, [k.const(7), k.const(2)])
  assert translate(k.record()).program.uops[-1].op is renamed


@pytest.mark.parametrize("dtype, width", [("float", 1), ("float", 4), ("half", 1), ("double", 1)])
def test_trunc_is_refimpls_trunc_rounding_toward_zero_keeping_the_sign_of_zero(dtype, width):
  """TRUNC keeps its name (importer rule 17 has no rewrite): refimpl's TRUNC rule (alu.trunc) rounds toward zero, a
  zero keeps x's sign, an integer, an infinity or a NaN is x itself."""
  np_dt = {"float": np.float32, "half": np.float16, "double": np.float64}[dtype]
  big = float(2 ** {"float": 23, "half": 10, "double": 52}[dtype])
  xs = np.array([-0.5, 0.5, -1.5, 2.75, -0.0, 0.0, big - 0.5, -(big - 0.5), big * 4, np.inf, -np.inf, np.nan], np_dt)
  n = len(xs)
  k = Kernel14()
  size = k.const(n)
  out, inp = (k.add("PARAM", dtype, (n,), "GLOBAL", {"slot": s, "name": None, "min": None, "max": None}, [size]) for s in (0, 1))
  gid = k.add("SPECIAL", "int", (), "ALU", "gidx0", [k.const(n // width)])
  base = k.add("MUL", "int", (), "ALU", None, [gid, k.const(width)])
  src = k.add("SHRINK", dtype, (width,), "GLOBAL", None, [inp, base, k.const(width)]) if width > 1 else \
      k.add("INDEX", dtype, (), "GLOBAL", None, [inp, base])
  x = k.add("LOAD", dtype, (width,) if width > 1 else (), "ALU", None, [src])
  t = k.add("TRUNC", dtype, (width,) if width > 1 else (), "ALU", None, [x])
  dst = k.add("SHRINK", dtype, (width,), "GLOBAL", None, [out, base, k.const(width)]) if width > 1 else \
      k.add("INDEX", dtype, (), "GLOBAL", None, [out, base])
  k.add("STORE", "void", (), "GLOBAL", None, [dst, t])
  tr = translate(k.record(global_size=(n // width, 1, 1)))
  assert Ops.TRUNC in {u.op for u in tr.program.uops} and "trunc-lowered" not in tr.fired
  got = emulate(tr.program, [np.zeros(n, np_dt), xs]).buffers[0]
  want = np.array([-0.0, 0.0, -1.0, 2.0, -0.0, 0.0, big - 1, -(big - 1), big * 4, np.inf, -np.inf, np.nan], np_dt)
  assert same_value(got, want).all() and (np.signbit(got) == np.signbit(want)).all(), (xs, got)


def test_a_do_while_loop_is_refused():
  """Rule 13 covers RANGE (end) ... END (x, RANGE); an END with a condition (a do-while) has no refimpl form."""
  k = Kernel14()
  n = k.const(4)
  r = k.add("RANGE", "int", (), "ALU", (0, "LOOP"), [n])
  k.add("END", "void", (), "ALU", None, [r, r, k.add("CMPLT", "bool", (), "ALU", None, [r, n])])
  with pytest.raises(TranslationError, match="uop 4 END: a do-while"): translate(k.record())


def test_a_reg_buffer_indexed_by_a_variable_is_refused():
  """Rule 6 makes each constant-indexed REG element an accumulator; an element chosen at run time has no refimpl form."""
  k = Kernel14()
  n = k.const(4)
  reg = k.add("BUFFER", "float", (4,), "REG", {"slot": 0, "name": None, "min": None, "max": None}, [n])
  k.add("INDEX", "float", (), "REG", None, [reg, k.add("SPECIAL", "int", (), "ALU", "lidx0", [n])])
  with pytest.raises(TranslationError, match="uop 4 INDEX: a REG buffer indexed by a value that is not a constant"):
    translate(k.record(local_size=(4, 1, 1)))


def test_a_record_that_is_not_one_is_named():
  """The record's JSON form round-trips; another document is a RecordFormatError."""
  with pytest.raises(RecordFormatError): from_json({"format": "refimpl-program"})
  assert from_json(json.loads(json.dumps(to_json(_add_one_kernel())))) == _add_one_kernel()


def test_the_corpus_has_tinygrad_014_kernels_of_every_construct():
  """The 0.14 corpus exercises every rule but the ones only hand-written kernels need, and lists what it cannot translate."""
  fired = set()
  for p in FILES: fired |= set(load_finding(p).found["rules"])
  assert len(FILES) >= 90 and fired >= {"reg-accumulator", "local-buffer", "shrink-vector", "lane-index", "cmpeq",
                                        "range-start", "param-var", "ordering-alias", "renamed-op"}, fired
  untranslated = json.loads((CORPUS_14 / "untranslated.json").read_text())
  assert set(untranslated) == {"CL", "CPU", "PYTHON"}, untranslated
  for listed in untranslated.values(): assert all(why.startswith(("uop ", "kernel")) for why in listed.values()), listed


def test_the_corpus_has_tinygrad_014_cpu_and_cl_kernels():
  """0.14's CPU kernels (its C renderer's form: loops, typed constants: rule 18) and CL kernels (OpenCL C: the grid,
  locals, barriers) are in the corpus."""
  fired = set()
  for p in CPU_FILES: fired |= set(load_finding(p).found["rules"])
  assert len(CPU_FILES) >= 90 and fired >= {"concrete-const", "range-start", "reg-accumulator", "shrink-vector"}, fired
  cl = NATIVE_FILES[len(CPU_FILES):]
  fired = set()
  for p in cl: fired |= set(load_finding(p).found["rules"])
  assert len(cl) >= 90 and fired >= {"special-size", "local-buffer", "order-srcs", "reg-accumulator"}, fired


def test_a_concrete_constant_is_a_constant_of_its_dtype():
  """Rule 18: a CONST of a concrete dtype (CPU and CL kernels) is a CONST of that dtype, typed as rule 2 types one (a
  float32 rounded to nearest); a vector CONST is refused naming the uop."""
  k = Kernel14()
  k.add("CONST", "bool", (), None, True)
  k.add("CONST", "float", (), None, float_arg(0.1))
  bool_c, float_c = translate(k.record()).program.uops
  assert (bool_c.op, bool_c.dtype, bool_c.arg) == (Ops.CONST, dtypes.bool, True)
  assert (float_c.op, float_c.dtype, float_c.arg) == (Ops.CONST, dtypes.float32, float(np.float32(0.1)))
  v = Kernel14()
  v.add("CONST", "float", (4,), None, float_arg(1.0))
  with pytest.raises(TranslationError, match=r"uop 0 CONST.*vector constant"): translate(v.record())


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_a_tinygrad_014_kernel_translates_and_computes_what_tinygrad_computed(path):
  """Bit for bit on every element the spec pins to one value, with one exception, the sign of a zero TRUNC gives:
  tinygrad 0.14's emulator computes TRUNC with Python's math.trunc (through an int: +0.0), refimpl's TRUNC rule
  (alu.trunc) and C's trunc keep x's sign (-0.5 gives -0.0)."""
  f = load_finding(path)
  t = translate(from_json(f.found["record"]))
  assert t.program == f.case.program and sorted(t.fired) == f.found["rules"]
  theirs = tinygrad_outputs(f)
  if Ops.TRUNC in {u.op for u in t.program.uops}:
    theirs = [np.where((b == 0) & (a == 0), a, b) for a, b in zip(_emulated(f), theirs)]
  assert compare_run(f.case.program, f.case.inputs, theirs, f.case.vals) is None


def _float_arithmetic(program) -> bool:
  return any(u.op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.MULACC) and dtypes.is_float(u.dtype) for u in program.uops)


def test_cpu_core_id_is_the_lane_of_a_grid():
  """Rule 19: PARAM core_id (0.14's CPU threads; its runtime calls the kernel once per core_id < global_size[0]) is
  SPECIAL gidx0 of max + 1 lanes: out[core_id] = core_id over a launch of 2 gives [0, 1]."""
  k = Kernel14()
  out = k.add("PARAM", "int", (2,), "GLOBAL", {"slot": 0, "name": None, "min": None, "max": None}, [k.const(2)])
  core = k.add("PARAM", "int", (), "ALU", {"slot": 1, "name": "core_id", "min": 0, "max": 1}, [k.add("STACK", "void")])
  k.add("STORE", "void", (), "GLOBAL", None, [k.add("INDEX", "int", (), "GLOBAL", None, [out, core]), core])
  t = translate(k.record(global_size=(2, 1, 1)))
  assert "core-id" in t.fired and [u.arg for u in t.program.uops if u.op is Ops.SPECIAL] == [("gidx0", 2)]
  assert emulate(t.program, [np.full(2, -1, np.int32)]).buffers[0].tolist() == [0, 1]


@pytest.mark.parametrize("path", NATIVE_FILES, ids=[f"{p.parent.name}-{p.stem}" for p in NATIVE_FILES])
def test_a_tinygrad_014_cpu_or_cl_kernel_translates_and_computes_what_tinygrad_computed(path):
  """From its stored record to the stored program; bit for bit with tinygrad's CPU or CL where the kernel has no float
  arithmetic. Where it has some, tinygrad's C is not its kernel: the compiler contracts a MUL feeding an ADD into one
  fused multiply-add (C's and OpenCL C's FP_CONTRACT is on), and the C renderers drop the parentheses of a nested ADD
  (next test); refimpl keeps the kernel's own rounding (each op rounds once) and `run --check` reports both."""
  f = load_finding(path)
  t = translate(from_json(f.found["record"]))
  assert t.program == f.case.program and sorted(t.fired) == f.found["rules"]
  if not _float_arithmetic(t.program):
    assert compare_run(f.case.program, f.case.inputs, tinygrad_outputs(f), f.case.vals) is None


def test_tinygrads_c_renderer_reassociates_a_sum():
  """r_64_4 (a sum of 256 floats, unrolled by 4) is acc = acc + (((v0 + v1) + v2) + v3) in tinygrad 0.14's kernel; its
  C renderer writes `acc+v0+v1+v2+v3`, which C evaluates as (((acc + v0) + v1) + v2) + v3. The emulator computes the
  kernel's order, tinygrad's CPU the C's: both are reproduced here in numpy float32."""
  f = load_finding(CORPUS_14 / "CPU" / "r_64_4.json")
  x = f.case.inputs[1].reshape(64, 4)
  kernel_order, c_order = np.float32(0), np.float32(0)
  for v in x:
    kernel_order = np.float32(kernel_order + np.float32(np.float32(np.float32(v[0] + v[1]) + v[2]) + v[3]))
    for e in v: c_order = np.float32(c_order + e)
  assert kernel_order != c_order
  assert _emulated(f)[0][0] == kernel_order and tinygrad_outputs(f)[0][0] == c_order


def _emulated(f) -> list[np.ndarray]:
  return emulate(f.case.program, [a.copy() for a in f.case.inputs], vals=f.case.vals, strict=False).buffers


def test_an_unsupported_tinygrad_line_is_refused_naming_the_lines_served():
  line = "0.14.0" if installed() != "0.14.0" else "0.10.1"
  with pytest.raises(UnsupportedTinygrad, match=f"made for tinygrad {line}.*serves tinygrad {' and '.join(SUPPORTED)}"):
    require(line, "this part")


# ***** the exporter (refimpl/tinygrad/v0_14/exporter.py): a refimpl Program in 0.14's kernel form, as data *****

def _canonical(program) -> list[tuple]:
  """A program's uops with each CONST read inline as (dtype, value) and unused ones gone: two programs that differ
  only in where (and how often) a constant is listed have one canonical form."""
  out, new = [], {}
  for i, u in enumerate(program.uops):
    if u.op is Ops.CONST: continue
    src = tuple((repr(program.uops[s].dtype), repr(program.uops[s].arg)) if program.uops[s].op is Ops.CONST else new[s]
                for s in u.src)
    new[i] = len(out)
    out.append((u.op, repr(u.dtype), src, repr(u.arg)))
  return out


ALL_FILES = sorted(CORPUS_14.glob("*/*.json"))


@pytest.mark.parametrize("path", ALL_FILES, ids=[f"{p.parent.name}-{p.stem}" for p in ALL_FILES])
def test_every_corpus_kernel_exports_to_a_record_that_imports_to_its_program(path):
  """import(export(import(record))) is import(record), up to where constants are listed: the exporter's rules are
  the importer's reversed (PARAMs, REG accumulators with AFTER, SHRINK vector access, lane INDEX, RANGE / END, ...)."""
  from refimpl.tinygrad.v0_14.exporter import to_record
  program = translate(from_json(load_finding(path).found["record"])).program
  again = translate(to_record(program)).program
  assert _canonical(again) == _canonical(program)
  assert (again.name, again.global_size, again.local_size) == (program.name, program.global_size, program.local_size)


def _exported_computes_the_same(program, inputs, vals=()) -> KernelRecord:
  """The program's record, after checking that it imports to a program the emulator runs to the same buffers."""
  from refimpl.tinygrad.v0_14.exporter import to_record
  record = to_record(program)
  back = translate(record).program
  want = emulate(program, [a.copy() for a in inputs], vals=vals).buffers
  got = emulate(back, [a.copy() for a in inputs], vals=vals).buffers
  for g, w in zip(got, want): assert same_value(g, w).all(), (g, w)
  return record


def test_an_accumulator_exports_as_a_reg_buffer_and_a_loop_that_starts_late_as_an_offset():
  """Rule 6: DEFINE_ACC / ASSIGN are a REG BUFFER, STOREs to it and LOADs through AFTER; rule 13: RANGE (2, 8) is
  RANGE (6) plus 2."""
  from refimpl.ir import ProgramBuilder
  b = ProgramBuilder("sum_late")
  out, x = b.global_buf(dtypes.int32, 1), b.global_buf(dtypes.int32, 8)
  zero = b.const(0, dtypes.int32)
  acc = b.acc(zero)
  with b.loop(8, start=2) as r: b.assign(acc, b.alu(Ops.ADD, acc, b.load(x, r)))
  b.store(out, zero, acc)
  record = _exported_computes_the_same(b.build(), [np.zeros(1, np.int32), np.arange(1, 9, dtype=np.int32)])
  ops = [r.op for r in record.uops]
  assert ("BUFFER", "REG") in [(r.op, r.addrspace) for r in record.uops] and "AFTER" in ops and "END" in ops
  assert ops.count("RANGE") == 1 and "SUB" in ops


def test_trunc_exports_as_tinygrad_014s_trunc():
  """TRUNC keeps its name both ways (0.14 has Ops.TRUNC): the record holds one TRUNC and no int64 CAST, and imports
  to a program computing refimpl's TRUNC rule (-0.5 -> -0.0, 2.5 -> 2, inf and NaN themselves)."""
  from refimpl.ir import elementwise
  x = np.array([-0.5, 2.5, -2.5, 8388607.5, np.inf, np.nan, -1e-45, 3.0], np.float32)
  record = _exported_computes_the_same(elementwise(Ops.TRUNC, dtypes.float32, n=8), [np.zeros(8, np.float32), x])
  assert [r.op for r in record.uops].count("TRUNC") == 1 and "long" not in {r.dtype for r in record.uops}


def test_a_gated_store_exports_inside_an_if():
  """Rule 14: STORE (INDEX, v, gate) is IF (gate), STORE, ENDIF, as 0.14's linearizer spells a gated store."""
  from refimpl.ir import ProgramBuilder
  b = ProgramBuilder("gated")
  out, x = b.global_buf(dtypes.float32, 4), b.global_buf(dtypes.float32, 4)
  i = b.gidx(0, 4)
  b.store(out, i, b.load(x, i), gate=b.alu(Ops.CMPLT, i, b.const(2, dtypes.int32)))
  record = _exported_computes_the_same(b.build(), [np.zeros(4, np.float32), np.arange(4, dtype=np.float32) + 1])
  ops = [r.op for r in record.uops]
  assert ops.index("IF") < ops.index("STORE") < ops.index("ENDIF")


def test_what_tinygrad_014_has_no_form_for_is_an_export_error_naming_the_uop():
  from refimpl.ir import ProgramBuilder
  from refimpl.tinygrad.v0_14.exporter import ExportError, to_record
  b = ProgramBuilder("fp8")
  out, x = b.global_buf(dtypes.fp8e4m3, 4), b.global_buf(dtypes.fp8e4m3, 4)
  i = b.gidx(0, 4)
  b.store(out, i, b.load(x, i))
  with pytest.raises(ExportError, match=r"uop \d+ DEFINE_GLOBAL.*saturates fp8"): to_record(b.build())


def _cast_kernel(src: str, fp8: str, n: int) -> KernelRecord:
  """out[i] = float(fp8(in[i])): in of dtype `src`, through a CAST to `fp8` and back to float32."""
  k = Kernel14()
  size = k.const(n)
  out = k.add("PARAM", "float", (n,), "GLOBAL", {"slot": 0, "name": None, "min": None, "max": None}, [size])
  inp = k.add("PARAM", src, (n,), "GLOBAL", {"slot": 1, "name": None, "min": None, "max": None}, [size])
  gid = k.add("SPECIAL", "int", (), "ALU", "gidx0", [size])
  x = k.add("LOAD", src, (), "ALU", None, [k.add("INDEX", src, (), "GLOBAL", None, [inp, gid])])
  back = k.add("CAST", "float", (), "ALU", None, [k.add("CAST", fp8, (), "ALU", None, [x])])
  k.add("STORE", "void", (), "GLOBAL", None, [k.add("INDEX", "float", (), "GLOBAL", None, [out, gid]), back])
  return k.record(global_size=(n, 1, 1))


INF, NAN = float("inf"), float("nan")
FLOATS = [1.0, 300.0, 460.0, 470.0, 1000.0, -1e6, INF, -INF, NAN, 3.3]


@pytest.mark.parametrize("src, fp8, xs, want", [
  ("float", "fp8e4m3", FLOATS, [1.0, 288.0, 448.0, 448.0, 448.0, -448.0, NAN, NAN, NAN, 3.25]),
  ("float", "fp8e5m2", FLOATS, [1.0, 320.0, 448.0, 448.0, 1024.0, -57344.0, INF, -INF, NAN, 3.5]),
  ("int", "fp8e4m3", [1000, -100000, 7, 449], [448.0, -448.0, 7.0, 448.0]),
  ("int", "fp8e5m2", [100000, -61440, 57344], [57344.0, -57344.0, 57344.0]),
  ("char", "fp8e4m3", [127, -128], [128.0, -128.0]),
])
def test_a_cast_to_fp8_saturates_as_tinygrad_014_converts(src, fp8, xs, want):
  """Rule 21: CAST to fp8 saturates: a finite value beyond the largest finite L (fp8e4m3 448, fp8e5m2 57344) is +-L;
  within range it is refimpl's CAST (one rounding to nearest even: 300 -> 288 in e4m3, 320 in e5m2); an infinity
  stays one (fp8e4m3 has none: NaN), NaN stays NaN. The values are tinygrad 0.14's float_to_fp8 rule's."""
  n = len(xs)
  np_src = {"float": np.float32, "int": np.int32, "char": np.int8}[src]
  tr = translate(_cast_kernel(src, fp8, n))
  assert "fp8-saturate" in tr.fired
  got = emulate(tr.program, [np.zeros(n, np.float32), np.array(xs, np_src)]).buffers[0]
  assert same_value(got, np.array(want, np.float32)).all(), got.tolist()


def _fp8_op_kernel(op: str, fp8: str, n: int, result: str) -> KernelRecord:
  """out[i] = float(op(fp8(a[i]), fp8(b[i]))): float32 inputs CAST to `fp8` (rule 21), `op` on the fp8 values (of dtype
  `result`: the fp8 dtype, or bool for a comparison), its result CAST to float32."""
  k = Kernel14()
  size = k.const(n)
  out, a, b = (k.param(slot, n, size) for slot in range(3))
  gid = k.add("SPECIAL", "int", (), "ALU", "gidx0", [size])
  xs = [k.add("CAST", fp8, (), "ALU", None, [k.add("LOAD", "float", (), "ALU", None,
                                                   [k.add("INDEX", "float", (), "GLOBAL", None, [buf, gid])])]) for buf in (a, b)]
  value = k.add(op, result, (), "ALU", None, xs if op not in ("SQRT", "NEG") else xs[:1])
  back = k.add("CAST", "float", (), "ALU", None, [value])
  k.add("STORE", "void", (), "GLOBAL", None, [k.add("INDEX", "float", (), "GLOBAL", None, [out, gid]), back])
  return k.record(global_size=(n, 1, 1))


@pytest.mark.parametrize("op, fp8, a, b, want", [
  ("MUL", "fp8e4m3", [13.0, 3.0], [13.0, 5.0], [176.0, 15.0]),        # 169 rounds to 176 (e4m3: 160, 176 its neighbours)
  ("ADD", "fp8e4m3", [448.0, 1.0], [448.0, 0.0625], [448.0, 1.0]),     # 896 saturates to 448; 1.0625 ties to even 1.0
  ("SUB", "fp8e5m2", [-57344.0, 1.0], [57344.0, 0.25], [-57344.0, 0.75]),  # -114688 saturates to -57344
  ("FDIV", "fp8e4m3", [1.0, 1.0], [3.0, 0.0], [0.34375, NAN]),         # 1/3 rounds to 0.34375; 1/0 = inf: e4m3 NaN
  ("MAX", "fp8e5m2", [-1.0, 2.0], [-2.0, 3.0], [-1.0, 3.0]),
  ("SQRT", "fp8e4m3", [2.0, 9.0], [0.0, 0.0], [1.375, 3.0]),           # 1.414 rounds to 1.375
  ("NEG", "fp8e4m3", [448.0, 0.0], [0.0, 0.0], [-448.0, -0.0]),
  ("CMPLT", "fp8e4m3", [1.0, 2.0], [1.125, 2.0], [1.0, 0.0]),
  ("CMPEQ", "fp8e5m2", [1.0, 1.0], [1.0, 1.25], [1.0, 0.0]),
])
def test_fp8_arithmetic_computes_in_float32_and_rounds_once_saturating(op, fp8, a, b, want):
  """Rule 22: an ALU op on fp8 values is computed on the values CAST to float32 and an fp8 result rounds once back to
  fp8 (to nearest even), saturating as rule 21 converts (a finite result beyond the largest finite value is +-L; an
  infinity is fp8e4m3's NaN); a comparison compares the float32 values. The expected values are that rule's."""
  result = "bool" if op.startswith("CMP") else fp8
  tr = translate(_fp8_op_kernel(op, fp8, len(a), result))
  assert "fp8-arithmetic" in tr.fired
  assert not any(u.dtype.scalar() in (dtypes.fp8e4m3, dtypes.fp8e5m2) for u in tr.program.uops if u.op not in (Ops.CAST,))
  buffers = [np.zeros(len(a), np.float32), np.array(a, np.float32), np.array(b, np.float32)]
  got = emulate(tr.program, buffers).buffers[0]
  assert same_value(got, np.array(want, np.float32)).all(), got.tolist()


@pytest.mark.parametrize("fp8, values, want", [
  ("fp8e4m3", [1.4427, 500.0, -1e9, INF, NAN], [1.5, 448.0, -448.0, NAN, NAN]),
  ("fp8e5m2", [0.6931, 60000.0, -INF], [0.75, 57344.0, -INF]),
])
def test_an_fp8_constant_saturates_as_a_cast_to_fp8_does(fp8, values, want):
  """Rule 2 for fp8: a weak CONST typed as fp8 is rounded once to nearest even, a finite value past the largest finite
  +-L made +-L first (rule 21's saturation, tinygrad 0.14's float_to_fp8); an infinity is fp8e4m3's NaN. The values are
  that rule's (1.4427 lies nearer 1.5 than 1.375 in e4m3; 0.6931 nearer 0.75 than 0.625 in e5m2)."""
  n = len(values)
  k = Kernel14()
  size = k.const(n)
  out = k.param(0, n, size)
  for lane, v in enumerate(values):
    back = k.add("CAST", "float", (), "ALU", None, [k.const(v, fp8)])
    k.add("STORE", "void", (), "GLOBAL", None, [k.add("INDEX", "float", (), "GLOBAL", None, [out, k.const(lane)]), back])
  tr = translate(k.record())
  got = emulate(tr.program, [np.zeros(n, np.float32)]).buffers[0]
  assert same_value(got, np.array(want, np.float32)).all(), got.tolist()

def test_an_int64_index_is_refused_naming_the_uop():
  """refimpl's INDEX takes an int32 index (the IR's index-dtype rule); 0.14 indexes with int64 only where int32 would
  overflow (buffers past 2^31 elements): such a kernel is a TranslationError naming the tinygrad uop, never a wrap."""
  k = Kernel14()
  size = k.const(4)
  out = k.param(0, 4, size)
  gid = k.add("CAST", "long", (), "ALU", None, [k.add("SPECIAL", "int", (), "ALU", "gidx0", [size])])
  k.add("STORE", "void", (), "GLOBAL", None, [k.add("INDEX", "float", (), "GLOBAL", None, [out, gid]), k.const(1.0, "float")])
  with pytest.raises(TranslationError, match=r"INDEX.*int32"): translate(k.record(global_size=(4, 1, 1)))
