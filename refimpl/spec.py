"""Per-op semantics metadata: arity, the dtypes each op takes, the result kind per dtype (exact / tolerance with its ULP
bound / allowed set, from each rule's `@loose` declaration), the undefined domains per dtype, and the decisions
(DECISIONS): each decision's rule and its reason, written here only (SPEC.md's "Decisions" prints them and
docs/semantics.md points there).

The rules themselves live in refimpl/emulator/alu.py (ALU_RULES: op -> rule function, docstring = the rule, `@undefined`
= the kinds of undefined behaviour it reports, refimpl/emulator/ub.py); this module holds the data around them and
reads the rest from there, and `python -m refimpl.spec` prints SPEC.md from both. SPEC.md at the repo root is exactly
that output (regenerate it with `.venv/bin/python -m refimpl.spec > SPEC.md`); spec_tests/test_spec_md.py fails when it
is stale.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

from refimpl.dtype import DType, dtypes
from refimpl.emulator import alu, certainty, dispatch, machine, reference, state, values
from refimpl.emulator.ub import UB
from refimpl.ir.dtype_text import dtype_to_str
from refimpl.ir.ops import Ops
from refimpl.ir.verify import alu_allows

VALUE_DTYPES: tuple[DType, ...] = (dtypes.bool, *(getattr(dtypes, n) for n in ("int8", "uint8", "int16", "uint16", "int32",
                                   "uint32", "int64", "uint64")), dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float16,
                                   dtypes.bfloat16, dtypes.float32, dtypes.float64)
ARITH_FLOATS = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)  # fp8 is storage and casts only

ULP_BOUNDS: dict[DType, dict[Ops, int]] = {
  dtypes.float16: {Ops.EXP2: 2, Ops.LOG2: 2, Ops.SIN: 2},   # OpenCL half (cl_khr_fp16): 2 / 2 / 2
  dtypes.bfloat16: {Ops.EXP2: 2, Ops.LOG2: 2, Ops.SIN: 2},  # no OpenCL bound exists; taken as half's
  dtypes.float32: {Ops.EXP2: 3, Ops.LOG2: 3, Ops.SIN: 4},   # OpenCL full profile float: 3 / 3 / 4
  dtypes.float64: {Ops.EXP2: 3, Ops.LOG2: 3, Ops.SIN: 4},   # OpenCL full profile double: 3 / 3 / 4
}
"""The largest error allowed for EXP2, LOG2, SIN, in ulps of the result dtype, measured from the exact value (the
reference in refimpl/emulator/reference.py is within 0.5 ulp + 2^-9 ulp of it). No looser than OpenCL's full profile."""

@dataclass(frozen=True)
class OpSpec:
  """What the spec says about one op, dtype by dtype: see `kind`, `undefined_kinds`, `ulp_bound`; why, in the rows of
  DECISIONS that name it (`decisions`)."""
  op: Ops
  arity: int
  takes: str                   # the dtype classes it takes, in words

  @property
  def undefined(self) -> tuple[UB, ...]:
    """The kinds of undefined behaviour its rule declares (empty: defined everywhere it is accepted)."""
    return alu.undefined_kinds(self.op)

  @property
  def decisions(self) -> tuple[str, ...]:
    """The areas of the DECISIONS rows that decide (and give the reasons of) this op's rule."""
    return tuple(d.area for d in DECISIONS if self.op in d.ops)

_ANY = "bool, ints, floats"
OPS: dict[Ops, OpSpec] = {s.op: s for s in (
  OpSpec(Ops.ADD, 2, _ANY), OpSpec(Ops.SUB, 2, "ints, floats"), OpSpec(Ops.MUL, 2, _ANY), OpSpec(Ops.NEG, 1, "ints, floats"),
  OpSpec(Ops.FDIV, 2, "floats"), OpSpec(Ops.RECIP, 1, "floats"), OpSpec(Ops.SQRT, 1, "floats"), OpSpec(Ops.IDIV, 2, "ints"),
  OpSpec(Ops.MOD, 2, "ints"), OpSpec(Ops.MAX, 2, _ANY), OpSpec(Ops.CMPLT, 2, _ANY), OpSpec(Ops.CMPNE, 2, _ANY),
  OpSpec(Ops.XOR, 2, "ints, bool"), OpSpec(Ops.OR, 2, "ints, bool"), OpSpec(Ops.AND, 2, "ints, bool"),
  OpSpec(Ops.SHL, 2, "ints"), OpSpec(Ops.SHR, 2, "ints"), OpSpec(Ops.THREEFRY, 2, "uint64"), OpSpec(Ops.WHERE, 3, _ANY),
  OpSpec(Ops.MULACC, 3, _ANY), OpSpec(Ops.EXP2, 1, "floats"), OpSpec(Ops.LOG2, 1, "floats"), OpSpec(Ops.SIN, 1, "floats"),
  OpSpec(Ops.TRUNC, 1, "floats"), OpSpec(Ops.CAST, 1, "any to any"), OpSpec(Ops.BITCAST, 1, "same size, no bool"),
)}
assert set(OPS) == set(alu.ALU_RULES), "every op with a rule needs its metadata"

def accepts(op: Ops, dt: DType) -> bool:
  """Whether `op` is defined on operand dtype `dt` (CAST: as a source; BITCAST: any non-bool source)."""
  if op is Ops.CAST: return dt in VALUE_DTYPES
  if op is Ops.BITCAST: return dt in VALUE_DTYPES and dt is not dtypes.bool
  return alu_allows(op, dt)

KIND_OF_LEVEL = {certainty.Certainty.TOLERANCE: "tolerance", certainty.Certainty.ALLOWED_SET: "allowed"}

def kind(op: Ops, dt: DType) -> str:
  """The result kind of `op` on operand dtype `dt`: "exact", "tolerance", "allowed" (a set) or "rejected". A rule is
  loose on floats at the level its `@loose` declaration gives (alu.looseness), and exact everywhere else."""
  if not accepts(op, dt): return "rejected"
  declared = alu.looseness(op)
  return KIND_OF_LEVEL[declared.level] if declared is not None and dtypes.is_float(dt) else "exact"

def ulp_bound(op: Ops, dt: DType) -> int | None:
  """The ULP bound of a tolerance op on dtype dt (None for every other op)."""
  return ULP_BOUNDS[dt][op] if kind(op, dt) == "tolerance" else None

def undefined_kinds(op: Ops, dt: DType) -> tuple[UB, ...]:
  """The kinds of undefined behaviour `op` can report on operand dtype `dt` (CAST: as a source, over every target):
  those its rule declares that occur on dt (UB.occurs_on)."""
  if not accepts(op, dt): return ()
  return tuple(k for k in alu.undefined_kinds(op) if k.occurs_on(dt))

def undefined_domains(op: Ops, dt: DType) -> tuple[str, ...]:
  """The undefined domains of `op` on operand dtype `dt`, in words (the descriptions of `undefined_kinds`)."""
  return tuple(k.description for k in undefined_kinds(op, dt))

# ---- casts: how each (source, target) pair behaves ----

def _int_range(dt: DType) -> tuple[int, int]: return int(dtypes.min(dt)), int(dtypes.max(dt))

def cast_kind(src: DType, dst: DType) -> str:
  """How CAST src -> dst treats values: "same", "exact" (every value kept), "wrap", "round" (nearest even),
  "trunc/UB" (float -> int), "!=0" (to bool), "0/1" (from bool)."""
  if src is dst: return "same"
  if dst is dtypes.bool: return "!=0"
  if src is dtypes.bool: return "0/1"
  if dtypes.is_int(src) and dtypes.is_int(dst):
    (slo, shi), (dlo, dhi) = _int_range(src), _int_range(dst)
    return "exact" if dlo <= slo and shi <= dhi else "wrap"
  if dtypes.is_int(dst): return "trunc/UB"
  if dtypes.is_int(src):
    lo, hi = _int_range(src)
    return "exact" if max(-lo, hi) <= 2 ** alu.float_format(dst).p else "round"  # every int up to 2^p is a float
  (sp, semin, semax, sinf), (dp, demin, demax, dinf) = alu.float_format(src), alu.float_format(dst)
  keeps = sp <= dp and demin - dp <= semin - sp and semax <= demax and (dinf or not sinf)
  return "exact" if keeps else "round"

# ---- SPEC.md ----

@dataclass(frozen=True)
class Decision:
  """One decision of the spec, and the one place its reason is written (SPEC.md's Decisions table and
  docs/semantics.md read it from here)."""
  area: str
  rule: str
  rationale: str
  where: str                  # what implements or enforces it
  ops: tuple[Ops, ...] = ()   # the ops whose rule it decides (SPEC.md's Ops table names it on each)

def _undefined_by(rule) -> str:
  """The text "undefined: KIND, KIND" of the kinds a rule of alu.py declares (refimpl/emulator/ub.py says what each is)."""
  return "undefined: " + ", ".join(k.name for k in rule.undefined)

DECISIONS: tuple[Decision, ...] = (
  Decision("int ADD SUB MUL NEG MULACC", "two's complement wrap-around, every width, signed included (NEG INT_MIN is "
           "INT_MIN)", "every target's integer adder is modular; C backends must not rely on signed-overflow UB",
           "alu.arith, alu.mulacc", (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.MULACC)),
  Decision("IDIV / MOD (ints)", f"truncate toward zero; MOD takes the dividend's sign; {_undefined_by(alu.idiv_mod)} "
           "(deferred: the lane's value is undefined, a WHERE may discard it; the operands of a division are no use, so "
           "an undefined divisor gives an undefined value too)",
           "what C's / and %, OpenCL and LLVM sdiv/srem do. Targets disagree on both undefined cases, so no value can be "
           "promised, but tinygrad's own tests state that a discarded 1 // 0 must not raise (test_ops.py test_div_int: "
           "(t > 0).where(1 // t, t)), and GPUs (PTX div, AMD, Metal) do not trap and WGSL defines x / 0; x86's idiv "
           "traps (SIGFPE) and C and LLVM IR make them undefined behaviour, so refimpl's C, OpenCL, CUDA and LLVM "
           "renderers guard the divisor (refimpl.lower.guard_division: 1 where it is 0 or -1 under INT_MIN)",
           "alu.idiv_mod, lower/poison.py (guard_division)", (Ops.IDIV, Ops.MOD)),
  Decision("SHL / SHR", f"{_undefined_by(alu.shift)}; SHR arithmetic on signed, logical on unsigned; SHL on the bit pattern "
           "(1<<31 in int32 is INT_MIN)", "C/LLVM leave wide shifts undefined and targets disagree on them (x86 masks "
           "the count, other targets do not); SHR by signedness as in C", "alu.shift", (Ops.SHL, Ops.SHR)),
  Decision("bool", "ADD=OR, MUL=AND, MAX=OR, CMPNE=XOR, CMPLT=(!a&&b); XOR OR AND logical; IDIV MOD SUB NEG SHL SHR are "
           "rejected", "a one-bit integer: the arithmetic reduces to logic, and ops with no meaning on one bit never run",
           "alu.arith, alu.maximum, alu.compare, alu.bitwise; refimpl.ir.verify (bool-op)",
           (Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.XOR, Ops.OR, Ops.AND)),
  Decision("float ADD SUB MUL FDIV RECIP SQRT NEG", "correctly rounded, round-to-nearest-even, in the op's dtype "
           "(half/bf16: the exact result rounded once); RECIP x is 1/x; x/0 is a defined inf or NaN; NEG flips the sign; "
           "subnormals kept unless the backend declares flushing",
           "IEEE 754 requires it (a correctly rounded square root included) and C, LLVM and OpenCL provide it",
           "alu.arith, alu.float_arith", (Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.RECIP, Ops.SQRT, Ops.NEG)),
  Decision("MULACC (floats)", "allowed set {fused, unfused}; the reference value is the fused one",
           "backends contract a*b+c into an FMA or not, both legitimately: C (-ffp-contract) and OpenCL (mad) allow it",
           "alu.mulacc", (Ops.MULACC,)),
  Decision("MAX (floats)", "NaN if either input is NaN; max(+0, -0) may be +0 or -0",
           "order-independent NaN propagation (IEEE 754-2019 maximum); x86 maxss and C fmax disagree on the sign of "
           "zero, so both zeros are allowed", "alu.maximum", (Ops.MAX,)),
  Decision("CMPLT / CMPNE", "IEEE: NaN < x is false, NaN != x is true, -0 == +0", "the IEEE predicates every target has",
           "alu.compare", (Ops.CMPLT, Ops.CMPNE)),
  Decision("EXP2 LOG2 SIN", "tolerance: ULP_BOUNDS below, against a correctly rounded reference; special values exact; "
           "SIN over the full range", "libms and polynomial decompositions are not correctly rounded; OpenCL's "
           "full-profile bounds accept every conformant device; large SIN arguments need a Payne-Hanek reduction",
           "alu.transcendental, emulator/reference.py", (Ops.EXP2, Ops.LOG2, Ops.SIN)),
  Decision("TRUNC", "round toward zero: the float nearest x toward zero that is an integer; exact; keeps the sign "
           "(trunc(-0.5) = -0); +-inf and integers are themselves; NaN stays NaN; defined everywhere",
           "IEEE 754's roundToIntegralTowardZero and C's trunc, which tinygrad 0.14's Ops.TRUNC means; C, LLVM "
           "(llvm.trunc), OpenCL, WGSL and CUDA all have it; where a backend renders no native TRUNC, "
           "refimpl.lower.trunc writes it with other ops once for all of them",
           "alu.trunc, lower/trunc.py", (Ops.TRUNC,)),
  Decision("CAST int->int, int->float, float->float", "int->int wraps (keeps the low bits); to float: round to nearest "
           "even, overflow -> +-inf (fp8 formats follow ml_dtypes: fp8e4m3 has no inf, so NaN)",
           "C's conversions with their implementation-defined cases pinned down: C's implementation-defined narrowing "
           "is a wrap on every target, and RNE is the IEEE default", "alu.cast", (Ops.CAST,)),
  Decision("CAST float->int", f"truncate toward zero; {_undefined_by(alu.cast)}",
           "C leaves it undefined and targets differ (x86 gives INT_MIN, ARM saturates)", "alu.cast", (Ops.CAST,)),
  Decision("CAST to/from bool", "x != 0 (NaN -> true, -0 -> false); bool -> 0 / 1", "C's conversion to _Bool",
           "alu.cast", (Ops.CAST,)),
  Decision("BITCAST", "same size only; bits preserved exactly; a BITCAST of a computed NaN is unspecified (loose)",
           "a reinterpretation, which only equal sizes give a meaning; NaN payloads differ between targets (x86's "
           "default NaN is negative, ARM's positive)", "alu.bitcast", (Ops.BITCAST,)),
  Decision("LOAD / STORE", f"undefined: {UB.OUT_OF_BOUNDS.name}; a false gate does no access (a gated LOAD yields its "
           "alternative value)", "memory safety: out-of-bounds accesses fault or read garbage", "emulator/machine.py"),
  Decision("races", f"two threads' accesses to one element with no BARRIER between, one of them a write: two writes of "
           f"different bits are undefined ({UB.RACE.name}) and leave the element undefined; two writes of the same bits "
           f"(compared as bits: NaN payloads, -0.0) are no race, and the element holds them at the join of their "
           f"certainty levels; a read and a write make the value read undefined ({UB.RACY_READ.name}, deferred), "
           f"whichever comes first, and the write is defined", "the kernel language has no memory model for "
           "unsynchronised accesses; LLVM's, which the C-family backends compile through, gives a racing load an "
           "undefined value and leaves the store alone, and unordered accesses have no order for the verdict to depend "
           "on; every GPU store of one naturally aligned element writes the whole element, so writers that agree leave "
           "those bits (CUDA's and OpenCL's benign same-value writes in practice), and tinygrad's linearizer emits "
           "them (a reduction's result stored by every thread of a dimension: test_linearizer's multireduce kernels), "
           "which its PYTHON device accepts",
           "emulator/access.py (_write, _unsafe_reads), emulator/machine.py (_launch), emulator/memory.py"),
  Decision("deferred undefined values", "an op of a deferred kind (CAST_RANGE, SHIFT_COUNT, DIVISOR_ZERO, "
           "DIVISION_OVERFLOW, RACY_READ, UNINITIALISED) gives an undefined value in that lane, which arithmetic "
           "(a division included, as dividend or divisor) and moves carry and WHERE drops; the program is undefined "
           "where such a value is used: stored, an index, a gate, an IF condition, a loop bound. Immediate kinds (out "
           "of bounds, two writes) are undefined where the op runs", "LLVM, which tinygrad's CLANG and LLVM backends "
           "compile through, makes an out-of-range fptosi and an over-wide shift poison and a racy load undef; "
           "tinygrad's transcendental lowering computes range reductions on every lane and a WHERE discards the lanes "
           "where they overflow (half sin(-0.0), exp(1.49e9)), and its tests divide by zero on lanes a WHERE discards "
           "(test_div_int); what would trap or is undefined behaviour in a backend's language is guarded there: "
           "refimpl's C and OpenCL renderers guard the casts and shifts (refimpl.lower.guard_poison), its C, OpenCL, "
           "CUDA and LLVM renderers the divisions (refimpl.lower.guard_division)",
           "emulator/ub.py, emulator/state.py (Machine.defer, Machine.use), lower/poison.py"),
  Decision("moves a compiler introduces", "a STORE with arg MOVE (the grid lowering's carries of a value across a "
           "BARRIER) stores an undefined element as undefined, which is not a use; a LOAD of it gives the value back "
           "undefined, and a later use names the op that first made it undefined", "a lowering must not make a defined "
           "program undefined: the grid form's value may be undefined on a lane where only a WHERE or dead code reads "
           "it, and the carry only moves it (as LLVM stores and loads poison); the carry is plain memory on every "
           "backend",
           "ir/ops.py (MOVE), lower/grid_to_loops.py, emulator/access.py (_store), emulator/plan.py (Plan.deferred_sources)"),
  Decision("BARRIER", "a workgroup execution barrier: it orders every access its threads made before it, to locals and "
           "globals, against every access they make after it (CUDA's __syncthreads); threads of different workgroups "
           "are never ordered within a launch", "CUDA's __syncthreads, which tinygrad's CUDA and NV renderers emit, "
           "orders globals too, and tinygrad's kernels access globals on both sides of their barriers (a GROUP "
           "reduction loads a global on every thread, BARRIER, then stores it from thread 0); the stronger barrier "
           "defines more programs and every backend refimpl renders keeps it: its OpenCL renders "
           "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE), its WGSL workgroupBarrier(); storageBarrier();, its "
           "CUDA __syncthreads()",
           "emulator/machine.py, emulator/memory.py, backends/opencl.py, backends/wgsl.py, backends/cuda.py"),
  Decision("uninitialised", f"a LOAD of a local element never stored in this launch reads an undefined value "
           f"({UB.UNINITIALISED.name}, deferred)", "local memory holds whatever the last kernel left",
           "emulator/machine.py"),
  Decision("THREEFRY", "threefry2x32, 20 rounds, on uint64 (x the counter, key the key, low words first), bit exact",
           "tinygrad defines its random numbers by it, and random tensors must agree across backends", "alu.threefry",
           (Ops.THREEFRY,)),
  Decision("looseness", "lanes from tolerance or allowed-set ops (declared `@loose` on their rule) and every NaN an op "
           "produces are loose; WHERE and BITCAST move bits, NaN payloads included; each element carries one "
           "certainty level (see Certainty)", "exact lanes compare bit for bit, loose ones by their level's rule",
           "alu.Outcome.certainty, emulator/certainty.py, emulator/machine.py", (Ops.WHERE,)),
)
assert {op for d in DECISIONS for op in d.ops} == set(OPS), "every op's rule is decided by a row"

SHORT_NAMES = {dtypes.bool: "bool", dtypes.fp8e4m3: "e4m3", dtypes.fp8e5m2: "e5m2", dtypes.float16: "f16",
          dtypes.bfloat16: "bf16", dtypes.float32: "f32", dtypes.float64: "f64"}
def short_name(dt: DType) -> str: return SHORT_NAMES.get(dt) or dtype_to_str(dt).replace("uint", "u").replace("int", "i")

def _cell(op: Ops, dt: DType) -> str:
  k = kind(op, dt)
  if k == "rejected": return "-"
  if k == "tolerance": return f"{ulp_bound(op, dt)} ulp"
  if k == "allowed": return "set"
  return "exact/UB" if undefined_domains(op, dt) else "exact"

def _table(header: list[str], rows: list[list[str]]) -> list[str]:
  out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
  return out + ["| " + " | ".join(r) + " |" for r in rows]

def _reported_by(k: UB) -> str:
  """The ops whose rule declares kind k; the kinds no rule declares are the executor's (memory accesses)."""
  return " ".join(op.name for op in OP_ORDER if k in alu.undefined_kinds(op)) or "LOAD STORE (emulator/machine.py)"

def expr_text(expr: alu.Expr) -> str:
  """An allowed set's other member (alu.Looseness.other) as text: x0, x1, ... the operands, OP(...) an op."""
  if isinstance(expr, int): return f"x{expr}"
  if isinstance(expr, float): return repr(expr)
  return f"{expr[0].name}({', '.join(expr_text(e) for e in expr[1:])})"

def _declared_looseness(rule) -> list[str]:
  """The line of SPEC.md's Rules section that states a rule's `@loose` declaration (none for a rule without one)."""
  declared = getattr(rule, "looseness", None)
  if declared is None: return []
  other = "" if declared.other is None else f"; the allowed set's other member: `{expr_text(declared.other)}`"
  return [f"Loose on floats (`@loose`): {declared.level.name}{other}.", ""]

OP_ORDER = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG, Ops.FDIV, Ops.RECIP, Ops.SQRT, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT,
          Ops.CMPNE, Ops.XOR, Ops.OR, Ops.AND, Ops.SHL, Ops.SHR, Ops.THREEFRY, Ops.WHERE, Ops.MULACC, Ops.EXP2, Ops.LOG2,
          Ops.SIN, Ops.TRUNC, Ops.CAST, Ops.BITCAST)
assert set(OP_ORDER) == set(OPS)

def render() -> str:
  """SPEC.md: the op x dtype table, the cast table, the tolerance bounds, the decisions with rationales, every op's
  metadata, the text of every rule and the executor's rules, all generated from this module's tables,
  refimpl/emulator/alu.py and refimpl/emulator/machine.py."""
  out = ["# refimpl semantics (generated)", "",
         "Generated by `python -m refimpl.spec` from refimpl/spec.py and the rule docstrings in refimpl/emulator/alu.py",
         "and refimpl/emulator/machine.py;",
         "do not edit by hand (regenerate with `.venv/bin/python -m refimpl.spec > SPEC.md`).", "",
         "## Result kind by op and operand dtype", "",
         "`exact`: one result, compared bit for bit (all NaNs are one value, +0 and -0 differ). `exact/UB`: exact, with "
         "an undefined domain (see the op list). `N ulp`: tolerance against the reference. `set`: an allowed set. "
         "`-`: rejected by the verifier. fp8 (e4m3 = fp8e4m3, no inf; e5m2 = fp8e5m2) is storage and casts only. "
         "CMPLT/CMPNE give bool; WHERE's dtype is its values'; CAST/BITCAST are by source dtype.", ""]
  out += _table(["op", *map(short_name, VALUE_DTYPES)], [[op.name, *(_cell(op, dt) for dt in VALUE_DTYPES)] for op in OP_ORDER])
  out += ["", "## CAST by source (rows) and target (columns)", "",
          "`exact`: every value kept. `wrap`: low bits kept. `round`: nearest even, overflow to inf (e4m3: NaN). "
          "`trunc/UB`: toward zero, undefined for NaN, inf and out-of-range results. `!=0`: to bool. `0/1`: from bool. "
          "BITCAST: between any two non-bool dtypes of one size, bits kept.", ""]
  out += _table(["from \\ to", *map(short_name, VALUE_DTYPES)], [[short_name(s), *(cast_kind(s, d) for d in VALUE_DTYPES)]
                                                            for s in VALUE_DTYPES])
  out += ["", "## Tolerances (ulps of the result dtype)", ""]
  tops = (Ops.EXP2, Ops.LOG2, Ops.SIN)
  out += _table(["dtype", *(o.name for o in tops)],
                [[short_name(dt), *(str(ULP_BOUNDS[dt][o]) for o in tops)] for dt in ARITH_FLOATS])
  out += ["", "The reference:", "", "```text", inspect.getdoc(reference) or "", "```", "",
          "## Decisions", ""]
  out += _table(["area", "rule", "rationale", "where"], [[d.area, d.rule, d.rationale, d.where] for d in DECISIONS])
  out += ["", "## Ops", ""]
  out += _table(["op", "arity", "takes", "undefined", "decided by (Decisions)"],
                [[op.name, str(s.arity), s.takes, ", ".join(k.name for k in s.undefined) or "-", "; ".join(s.decisions)]
                 for op in OP_ORDER for s in (OPS[op],)])
  out += ["", "## Undefined behaviour (refimpl/emulator/ub.py)", "", inspect.getdoc(UB) or "", ""]
  out += _table(["kind", "domain", "family", "deferred", "on", "reported by"],
                [[k.name, k.description, k.family, "yes" if k.deferred else "no", k.on or "any", _reported_by(k)]
                 for k in UB])
  out += ["", "## Rules (refimpl/emulator/alu.py)", ""]
  seen: dict = {}
  for op in OP_ORDER: seen.setdefault(alu.ALU_RULES[op], []).append(op.name)
  for fn, names in seen.items():
    out += [f"### `{fn.__name__}`: {' '.join(names)}", "", *_declared_looseness(fn), "```text", inspect.getdoc(fn) or "",
            "```", ""]
  out += ["## Outcomes and looseness", "", "```text", inspect.getdoc(alu) or "", "```", ""]
  out += ["## Certainty (refimpl/emulator/certainty.py)", "", inspect.getdoc(certainty) or "", ""]
  out += _table(["level", "what the spec promises", "through a computation"],
                [[c.name, c.meaning, certainty.carried_level(c).name] for c in certainty.Certainty])
  out += [""]
  out += _execution()
  return "\n".join(out) + "\n"

EXECUTION_RULES = ("SIMT.", "Values.", "Certainty rule.", "Control rule.", "Undefined behaviour.")

def _execution() -> list[str]:
  """The Execution section: the executor's rules (the paragraphs of the emulator's module docstrings, machine.py's,
  values.py's and state.py's, that start with EXECUTION_RULES) and every op's handler docstring, handlers in the order
  of their first op."""
  paragraphs = [p for module in (machine, values, state) for p in (inspect.getdoc(module) or "").split("\n\n")]
  rules = [p for p in paragraphs if p.startswith(EXECUTION_RULES)]
  assert len(rules) == len(EXECUTION_RULES), "the emulator's docstrings lost one of EXECUTION_RULES"
  out = ["## Execution (refimpl/emulator/machine.py)", "", "```text", "\n\n".join(rules), "```", ""]
  seen: dict = {}
  handlers = dispatch.OP_HANDLERS
  for op in sorted(handlers, key=lambda o: o.value): seen.setdefault(handlers[op], []).append(op.name)
  for fn, names in seen.items():
    out += [f"### `{fn.__name__}`: {' '.join(names)}", "", "```text", inspect.getdoc(fn) or "", "```", ""]
  return out[:-1]

if __name__ == "__main__": print(render(), end="")
