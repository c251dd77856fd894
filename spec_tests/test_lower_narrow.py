"""The narrow-float lowering (refimpl/lower/narrow.py): the lowered program verifies, holds float16/bfloat16/fp8 only as
memory (LOAD, STORE, the BITCASTs beside them, buffers), runs strictly on the emulator, and gives the same results as the
original program on the emulator: bit for bit (every NaN one value), and for the allowed-set ops (MAX of +-0, MULACC) a
result the spec allows (refimpl.testing.compare, whose expected values are alu.py's rules).

Inputs: every bit pattern for unary ops and for conversions out of a narrow format (2^8 for fp8, 2^16 for float16 and
bfloat16), edge pairs and triples (zeros, subnormals, the extremes, powers of two and their neighbours, inf, NaN) for
binary and ternary ops, the halfway points between neighbouring narrow values (and their float32/float64 neighbours),
ints near powers of two and near the ties of each format, vector widths, accumulators, gated loads and WMMA."""
from __future__ import annotations

import numpy as np
import pytest

from refimpl.dtype import PtrDType, dtypes, to_np
from refimpl.emulator.machine import emulate
from refimpl.ir import GroupOp, Ops, ProgramBuilder, alu_allows, elementwise, verify
from refimpl.lower import decompose_transcendentals, lower_narrow
from refimpl.lower.narrow import NARROW
from refimpl.testing.compare import compare, rule_of, same_value

HALFS = (dtypes.float16, dtypes.bfloat16)
FP8 = (dtypes.fp8e4m3, dtypes.fp8e5m2)
ALL_NARROW = (*HALFS, *FP8)
INTS = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)
UNSIGNED = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
ids = str


# ***** inputs *****

def from_bits(bits, dt): return np.asarray(bits, np.uint64).astype(UNSIGNED[dt.itemsize]).view(to_np(dt))
def every_value(dt): return from_bits(np.arange(2 ** (8 * dt.itemsize), dtype=np.uint64), dt)

def edge_values(dt):
  """Zeros, the smallest subnormals, the extremes, inf and NaN, powers of two with their two neighbours (every
  exponent of float16 and fp8; bfloat16's lowest, middle and highest 12); both signs."""
  ebits, mant = dtypes.finfo(dt)
  top_e = 2 ** ebits - 1
  exps = range(1, top_e) if top_e < 40 else [*range(1, 13), *range(top_e // 2 - 6, top_e // 2 + 6), *range(top_e - 12, top_e)]
  powers = [(e << mant) for e in exps]
  top = (2 ** ebits - 1) << mant
  bits = [0, 1, 2, 3, (1 << mant) - 1, top, top + 1, top - 1, top | (1 << (mant - 1)), (top << 1 >> 1) | ((1 << mant) - 1)]
  bits += [b + d for b in powers for d in (-1, 0, 1)]
  sign = 1 << (8 * dt.itemsize - 1)
  bits = sorted({b & (sign - 1) for b in bits})
  return from_bits(bits + [b | sign for b in bits], dt)

def halfway(dt, wide):
  """The midpoints between neighbouring finite values of narrow dt (ties), each with its neighbours in `wide`."""
  with np.errstate(invalid="ignore", over="ignore"):  # NaNs of ml_dtypes convert quietly; bfloat16's top overflows float32
    v = every_value(dt).astype(np.float64)
    v = np.unique(v[np.isfinite(v)])
    mids = ((v[:-1] + v[1:]) / 2).astype(wide)  # exact in float32/float64: one more bit than dt
    top = np.array([v[-1] + (v[-1] - v[-2]) / 2, v[-1] + (v[-1] - v[-2])], wide)  # past the largest: the overflow tie
  mids = np.concatenate([mids, top, -top])
  return np.concatenate([mids, np.nextafter(mids, wide.type(np.inf)), np.nextafter(mids, wide.type(-np.inf))])

def int_edges(dt):
  """Every value of a <= 16-bit int; else 0, +-1, the extremes and, near every power of two 2^k, 2^k + d and the
  narrow formats' ties 2^k + 2^(k-p-1) + d for small d (p = 2, 3, 7, 10: the stored mantissa bits)."""
  if dt.itemsize <= 2: return np.arange(dtypes.min(dt), dtypes.max(dt) + 1).astype(to_np(dt))
  bits = 8 * dt.itemsize
  vals = {0, 1, -1, dtypes.min(dt), dtypes.max(dt)}
  for k in range(1, bits):
    for base in [1 << k] + [(1 << k) + (1 << (k - p - 1)) for p in (2, 3, 7, 10) if k - p - 1 >= 0]:
      vals.update(base + d for d in (-2, -1, 0, 1, 2))
      vals.update(-base + d for d in (-2, -1, 0, 1, 2))
  lo, hi = dtypes.min(dt), dtypes.max(dt)
  return np.array(sorted(v for v in vals if lo <= v <= hi), dtype=to_np(dt))

def pairs(xs, ys):
  a, b = np.meshgrid(xs, ys, indexing="ij")
  return a.ravel(), b.ravel()


# ***** running *****

def run_both(program, arrays, strict=True):
  """The program's buffers on the emulator, and those of its lowering; the lowering has no narrow value left."""
  lowered = verify(lower_narrow(program))
  assert_only_memory(lowered)
  want = emulate(program, arrays, strict=strict).buffers
  got = emulate(lowered, arrays, strict=strict).buffers
  return want, got

def assert_only_memory(program):
  """The lowering verifies, and a narrow dtype appears in it only in buffers, INDEX, LOAD / STORE and the BITCASTs
  beside them."""
  verify(program)
  for i, u in enumerate(program.uops):
    if isinstance(u.dtype, PtrDType) or u.op is Ops.STORE: continue
    srcs = [program.uops[j].dtype for j in u.src if not isinstance(program.uops[j].dtype, PtrDType)]
    narrow = [d for d in [u.dtype, *srcs] if d.scalar() in NARROW]
    if narrow: assert u.op in (Ops.LOAD, Ops.BITCAST), f"uop {i} {u.op.name} still has {narrow[0]!r}"

def check_op(op, dt, inputs, out_dtype=None):
  """op on `inputs` by the lowered elementwise kernel: the rule's value (compare) and the original kernel's bits."""
  n = inputs[0].size
  out = out_dtype or (dtypes.bool if op in (Ops.CMPLT, Ops.CMPNE) else dt)
  p = elementwise(op, dt, n=n, out_dtype=out_dtype)
  strict = not (op is Ops.CAST and dtypes.is_int(out))
  want, got = run_both(p, [np.zeros(n, to_np(out)), *inputs], strict=strict)
  verdict = compare(op, dt, list(inputs), got[0], out_dtype)
  bad = verdict.bad
  assert verdict.ok, f"{op.name} {dt!r}->{out!r}: {int(bad.sum())} lanes differ from the rule, first at " \
                     f"{np.flatnonzero(bad)[:3]}: inputs {[x[bad][:3] for x in inputs]}, got {got[0][bad][:3]}"
  if rule_of(op, dt) == "exact":
    same = same_value(got[0], want[0]) | verdict.undefined
    assert same.all(), f"{op.name} {dt!r}: differs from the original program at {np.flatnonzero(~same)[:5]}"


# ***** ops *****

@pytest.mark.parametrize("dt", HALFS, ids=ids)
@pytest.mark.parametrize("op", [Ops.NEG, Ops.SQRT, Ops.RECIP], ids=lambda o: o.name)
def test_unary_ops_on_every_bit_pattern(op, dt):
  check_op(op, dt, [every_value(dt)])

BINARY = [Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.MAX, Ops.CMPLT, Ops.CMPNE]

@pytest.mark.parametrize("dt", HALFS, ids=ids)
@pytest.mark.parametrize("op", BINARY, ids=lambda o: o.name)
def test_binary_ops_on_edge_pairs_and_random_pairs(op, dt):
  e = edge_values(dt)
  a, b = pairs(e, e)
  rng = np.random.default_rng(op.value)
  r = from_bits(rng.integers(0, 1 << 16, (2, 20000)), dt)
  check_op(op, dt, [np.concatenate([a, r[0]]), np.concatenate([b, r[1]])])

@pytest.mark.parametrize("dt", HALFS, ids=ids)
def test_add_and_mul_ties_round_to_even(dt):
  """Sums and products that land exactly halfway between two narrow values (and next to halfway) round to even."""
  v = every_value(dt)
  v = v[np.isfinite(v.astype(np.float32)) & (v.astype(np.float32) > 0)]
  ulp_half = (2.0 ** -(dtypes.finfo(dt)[1] + 1))  # half an ulp of 1
  a = np.repeat(v[::7], 3)
  b = np.tile(np.array([ulp_half, ulp_half * 3, ulp_half * 1.5], np.float64), a.size // 3) * a.astype(np.float64)
  check_op(Ops.ADD, dt, [a, b.astype(to_np(dt))])
  check_op(Ops.MUL, dt, [a, np.tile(np.array([1 + ulp_half, 1 + 3 * ulp_half, 1.5], to_np(dt)), a.size // 3)])

@pytest.mark.parametrize("dt", HALFS, ids=ids)
def test_mulacc_on_edge_triples_is_in_the_allowed_set(dt):
  e = edge_values(dt)
  e = e[np.random.default_rng(7).choice(e.size, 48, replace=False)]
  a, b, c = (x.ravel() for x in np.meshgrid(e, e, e, indexing="ij"))
  check_op(Ops.MULACC, dt, [a, b, c])

@pytest.mark.parametrize("dt", HALFS, ids=ids)
def test_where_moves_bits(dt):
  """WHERE selects bits (NaN payloads too): the lowered select on the bits gives the original program's exact bits."""
  x = every_value(dt)
  cond = (np.arange(x.size) % 3 == 0)
  p = elementwise(Ops.WHERE, dt, n=x.size)
  want, got = run_both(p, [np.zeros_like(x), cond, x, x[::-1].copy()])
  np.testing.assert_array_equal(got[0].view(np.uint16), want[0].view(np.uint16))


# ***** conversions *****

@pytest.mark.parametrize("src,dst", [(s, d) for s in ALL_NARROW for d in (dtypes.bool, *INTS, dtypes.float32, dtypes.float64,
                                                                          *ALL_NARROW) if d is not s], ids=ids)
def test_cast_from_narrow_on_every_bit_pattern(src, dst):
  """narrow -> bool, every int (the defined lanes: in range, not NaN or inf), float32, float64 and the other narrow
  formats, for every bit pattern of the source."""
  check_op(Ops.CAST, src, [every_value(src)], dst)

@pytest.mark.parametrize("dst", ALL_NARROW, ids=ids)
@pytest.mark.parametrize("src", [dtypes.float32, dtypes.float64], ids=ids)
def test_cast_of_wide_floats_to_narrow_at_ties_and_edges(src, dst):
  """float32/float64 -> narrow: every tie between neighbouring narrow values and its neighbours, the overflow tie,
  and the wide format's own edges (subnormals, inf, NaN) -- one rounding, to nearest even."""
  wide = to_np(src)
  x = np.concatenate([halfway(dst, wide), edge_values(src)])
  check_op(Ops.CAST, src, [x], dst)

@pytest.mark.parametrize("dst", ALL_NARROW, ids=ids)
@pytest.mark.parametrize("src", [dtypes.bool, *INTS], ids=ids)
def test_cast_of_ints_to_narrow(src, dst):
  """bool and ints -> narrow: every value of the small ints, ints near powers of two and near each format's ties for
  the 32- and 64-bit ones (int64/uint64 through the round-to-odd float64)."""
  x = np.array([False, True]) if src is dtypes.bool else int_edges(src)
  check_op(Ops.CAST, src, [x], dst)

@pytest.mark.parametrize("src,dst", [(s, d) for s in ALL_NARROW for d in (*ALL_NARROW, *INTS[:4])
                                     if d is not s and d.itemsize == s.itemsize], ids=ids)
def test_bitcast_keeps_every_bit_pattern(src, dst):
  x = every_value(src)
  p = elementwise(Ops.BITCAST, src, n=x.size, out_dtype=dst)
  want, got = run_both(p, [np.zeros(x.size, to_np(dst)), x])
  np.testing.assert_array_equal(got[0].view(UNSIGNED[dst.itemsize]), want[0].view(UNSIGNED[dst.itemsize]))

@pytest.mark.parametrize("src", [dtypes.int16, dtypes.uint8], ids=ids)
def test_bitcast_into_narrow_then_arithmetic(src):
  """A value BITCAST from an int is read as a number by the next op (its decode is made after the BITCAST)."""
  dst = dtypes.float16 if src.itemsize == 2 else dtypes.fp8e5m2
  b = ProgramBuilder("bc_arith")
  n = 1 << (8 * src.itemsize)
  o, x = b.global_buf(dtypes.float32, n), b.global_buf(src, n)
  i = b.gidx(0, n)
  b.store(o, i, b.cast(b.bitcast(b.load(x, i), dst), dtypes.float32))
  xs = np.arange(n).astype(to_np(src))
  want, got = run_both(b.build(), [np.zeros(n, np.float32), xs])
  assert same_value(got[0], want[0]).all()

@pytest.mark.parametrize("src,dst", [(s, d) for s in ALL_NARROW for d in ALL_NARROW if d is not s and d.itemsize == s.itemsize],
                         ids=ids)
def test_bitcast_between_narrow_formats_reads_the_target_format(src, dst):
  """BITCAST between two narrow formats shares the bits, not the value: a value read as a number in its own format
  (here cast to float32) and BITCAST to another format reads as the other format (a fuzz finding: both decodes were
  one)."""
  x = every_value(src)
  b = ProgramBuilder("bc_formats")
  o, p_, xs = b.global_buf(dtypes.float32, x.size), b.global_buf(dtypes.float32, x.size), b.global_buf(src, x.size)
  i = b.gidx(0, x.size)
  v = b.load(xs, i)
  b.store(o, i, b.cast(v, dtypes.float32))
  b.store(p_, i, b.cast(b.bitcast(v, dst), dtypes.float32))
  want, got = run_both(b.build(), [np.zeros(x.size, np.float32), np.zeros(x.size, np.float32), x])
  assert same_value(got[0], want[0]).all() and same_value(got[1], want[1]).all()


# ***** programs *****

def _vector_program(dt, count, n):
  """Loads of `count` lanes, every binary op, NEG, SQRT, a CAST round trip through float32 and another narrow format,
  WHERE, MAX; the results stored as vectors."""
  b = ProgramBuilder("narrow_vec")
  out = b.global_buf(dt, 8 * n * count)
  x, y = b.global_buf(dt, n * count), b.global_buf(dt, n * count)
  i = b.alu(Ops.MUL, b.gidx(0, n), b.const(count, dtypes.int32))
  a, c = b.load(x, i, count=count), b.load(y, i, count=count)
  other = dtypes.bfloat16 if dt is dtypes.float16 else dtypes.float16
  vdt, wide = dt.vec(count), dtypes.float32.vec(count)
  vals = [b.alu(Ops.ADD, a, c), b.alu(Ops.MUL, a, c), b.alu(Ops.FDIV, a, c), b.alu(Ops.SQRT, b.alu(Ops.NEG, a)),
          b.cast(b.cast(a, wide), vdt), b.cast(b.cast(c, other.vec(count)), vdt), b.alu(Ops.WHERE, b.alu(Ops.CMPLT, a, c), a, c),
          b.alu(Ops.MAX, a, c)]
  for k, v in enumerate(vals): b.store(out, b.alu(Ops.ADD, i, b.const(k * n * count, dtypes.int32)), v)
  return b.build()

@pytest.mark.parametrize("dt", HALFS, ids=ids)
@pytest.mark.parametrize("count", [2, 4, 8])
def test_vector_widths_give_the_scalar_results(dt, count):
  e = edge_values(dt)
  n = e.size * 4 // count
  rng = np.random.default_rng(count)
  xs = np.resize(e, n * count)
  ys = from_bits(rng.integers(0, 1 << 16, n * count), dt)
  p = _vector_program(dt, count, n)
  want, got = run_both(p, [np.zeros(8 * n * count, to_np(dt)), xs, ys])
  same = same_value(got[0], want[0])
  mx = slice(7 * n * count, 8 * n * count)  # MAX of +0 and -0 may be either
  same[mx] |= (got[0][mx].astype(np.float32) == 0) & (want[0][mx].astype(np.float32) == 0)
  assert same.all(), np.flatnonzero(~same)[:5]

@pytest.mark.parametrize("dt", HALFS, ids=ids)
def test_accumulator_reads_see_its_current_value(dt):
  """A DEFINE_ACC summed in a loop: every read is decoded where it is (the value changes), and a CAST of the
  accumulator made before an ASSIGN keeps the old value."""
  b = ProgramBuilder("narrow_acc")
  n, k = 64, 5
  out, prev, x = b.global_buf(dt, n), b.global_buf(dt, n), b.global_buf(dt, n * k)
  g = b.gidx(0, n)
  acc = b.acc(b.const(0.5, dt))
  with b.loop(k) as r:
    before = b.cast(acc, dt)  # a copy of the value now
    v = b.load(x, b.alu(Ops.ADD, b.alu(Ops.MUL, g, b.const(k, dtypes.int32)), r))
    b.assign(acc, b.alu(Ops.MUL, b.alu(Ops.ADD, acc, v), b.const(1.25, dt)))
    b.store(prev, g, before)
  b.store(out, g, acc)
  rng = np.random.default_rng(1)
  xs = (rng.standard_normal(n * k) * 4).astype(to_np(dt))
  want, got = run_both(b.build(), [np.zeros(n, to_np(dt)), np.zeros(n, to_np(dt)), xs])
  for w, g_ in zip(want, got): assert same_value(g_, w).all()

@pytest.mark.parametrize("dt", ALL_NARROW, ids=ids)
def test_gated_load_alternative_and_const(dt):
  """A gated LOAD whose alternative is a narrow CONST (-2.5 is exact in every format): the bits of the alternative
  come back on the lanes whose gate is false."""
  b = ProgramBuilder("narrow_gated")
  n = 256
  out, x = b.global_buf(dt, n), b.global_buf(dt, n)
  g = b.gidx(0, n)
  gate = b.alu(Ops.CMPLT, g, b.const(100, dtypes.int32))
  b.store(out, g, b.load(x, g, gate=gate, alt=b.const(-2.5, dt)))
  xs = every_value(dt)[:n] if dt.itemsize == 1 else every_value(dt)[::256]
  want, got = run_both(b.build(), [np.zeros(n, to_np(dt)), xs])
  np.testing.assert_array_equal(got[0].view(UNSIGNED[dt.itemsize]), want[0].view(UNSIGNED[dt.itemsize]))

@pytest.mark.parametrize("tin,tout", [(dtypes.float16, dtypes.float32), (dtypes.float16, dtypes.float16),
                                      (dtypes.bfloat16, dtypes.bfloat16), (dtypes.float32, dtypes.bfloat16)], ids=ids)
def test_wmma_with_narrow_inputs_or_accumulator(tin, tout):
  """WMMA: narrow a, b decoded exactly; a narrow accumulator summed in float64 and rounded once at the end."""
  N, M, K = 2, 2, 4
  b = ProgramBuilder("narrow_wmma")
  out, xa, xb, xc = b.global_buf(tout, 4 * M * N), b.global_buf(tin, 4 * M * K), b.global_buf(tin, 4 * K * N), \
    b.global_buf(tout, 4 * M * N)
  g = b.gidx(0, 4)
  a = b.load(xa, b.alu(Ops.MUL, g, b.const(M * K, dtypes.int32)), count=M * K)
  bb = b.load(xb, b.alu(Ops.MUL, g, b.const(K * N, dtypes.int32)), count=K * N)
  ci = b.alu(Ops.MUL, g, b.const(M * N, dtypes.int32))
  b.store(out, ci, b.wmma(a, bb, b.load(xc, ci, count=M * N), (N, M, K)))
  rng = np.random.default_rng(3)
  arrays = [np.zeros(4 * M * N, to_np(tout))] + [(rng.standard_normal(s) * 3).astype(to_np(d))
                                                  for s, d in ((4 * M * K, tin), (4 * K * N, tin), (4 * M * N, tout))]
  want, got = run_both(b.build(), arrays)
  assert same_value(got[0], want[0]).all()

@pytest.mark.parametrize("dt", HALFS, ids=ids)
@pytest.mark.parametrize("op", sorted(GroupOp.Transcendental, key=lambda o: o.value), ids=lambda o: o.name)
def test_transcendentals_give_the_decomposition_bit_for_bit(op, dt):
  """Narrow EXP2/LOG2/SIN are decomposed (the float32 method, CAST out) and the CAST lowered: on every bit pattern,
  the same bits as the decomposition alone, which is what every backend ran before."""
  x = every_value(dt)
  p = elementwise(op, dt, n=x.size)
  lowered = lower_narrow(p)
  assert_only_memory(lowered)
  want = emulate(decompose_transcendentals(p), [np.zeros_like(x), x]).buffers[0]
  got = emulate(lowered, [np.zeros_like(x), x]).buffers[0]
  assert same_value(got, want).all()

def test_every_op_and_dtype_lowers_and_verifies():
  """Every ALU op the verifier allows on a narrow dtype, and every CAST/BITCAST pair with one, lowers to a verified
  program with no narrow value."""
  for dt in ALL_NARROW:
    for op in GroupOp.ALU:
      if alu_allows(op, dt): assert_only_memory(lower_narrow(elementwise(op, dt)))
    for other in (dtypes.bool, *INTS, dtypes.float32, dtypes.float64, *ALL_NARROW):
      if other is not dt: assert_only_memory(lower_narrow(elementwise(Ops.CAST, dt, out_dtype=other)))
      if other is not dt: assert_only_memory(lower_narrow(elementwise(Ops.CAST, other, out_dtype=dt)))

def test_a_program_without_narrow_values_comes_back_unchanged():
  p = elementwise(Ops.ADD, dtypes.float32)
  assert lower_narrow(p) is p
