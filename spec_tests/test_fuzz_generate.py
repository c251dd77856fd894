"""The fuzzer's generator (refimpl/fuzz/generate.py): deterministic, always valid, reaching every op x dtype pair, and
free of undefined behaviour by construction (the YARPGen rewrites)."""
import warnings

import numpy as np
import pytest
from generated import scaled

from refimpl.dtype import dtypes, to_np, truncate
from refimpl.emulator.machine import emulate
from refimpl.fuzz.bias import CHAINS, double_rounding_values, halfway_values, tiny_factors
from refimpl.fuzz.generate import (
  ALL_DTYPES,
  MODES,
  Profile,
  all_keys,
  clamp_bounds,
  coverage_keys,
  fix_node,
  generate,
  make_program,
  mode_of,
)
from refimpl.fuzz.graph import Graph
from refimpl.fuzz.grow import Draw
from refimpl.ir import GroupOp, Ops, ProgramBuilder, program_to_json, verify
from refimpl.ir.verify import FP8
from refimpl.testing.values import to_bits

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _fingerprint(g) -> tuple:
  return program_to_json(g.graph.program()), [to_bits(a).tobytes() for a in g.inputs()], g.vals


def test_program_is_a_function_of_seed_and_index():
  """Rule: program i of campaign s is a function of (s, i, profile) alone, so shards, workers and replays agree."""
  for i in (0, 7, 31):
    assert _fingerprint(make_program(3, i, Profile())) == _fingerprint(make_program(3, i, Profile()))
  assert _fingerprint(make_program(3, 7, Profile())) != _fingerprint(make_program(3, 8, Profile()))
  assert _fingerprint(make_program(3, 7, Profile())) != _fingerprint(make_program(4, 7, Profile()))


@pytest.mark.generated
@pytest.mark.parametrize("profile", [Profile(), Profile(barrier=True),
                                     Profile((dtypes.bool, dtypes.int32, dtypes.float32, dtypes.uint8), max_steps=60)])
def test_generated_programs_always_verify(profile):
  """Rule: every generated program passes the IR verifier, UB rewrites included."""
  for i in range(scaled(15)):
    g = make_program(11, i, profile)
    verify(g.graph.program())
    assert len(g.inputs()) == len(g.graph.program().buffers)


def test_profile_limits_the_dtypes():
  """Rule: a program uses only the profile's dtypes (plus int32 indices and bool conditions)."""
  allowed = {dtypes.float32, dtypes.int8, dtypes.bool, dtypes.int32}
  for i in range(20):
    p = generate(5, i, Profile((dtypes.float32, dtypes.int8)))[0].program()
    used = {getattr(u.dtype, "base", u.dtype).scalar() for u in p.uops} - {dtypes.void}
    assert used <= allowed, used - allowed


def test_campaigns_reach_every_op_dtype_pair():
  """Rule: the weights (uniform over the accepted (op, dtype) and (conversion, src, dst) pairs) reach every ALU op x
  dtype pair within 200 programs and every conversion pair within 400."""
  alu, conv = all_keys(Profile())
  seen: set[str] = set()
  for i in range(400):
    seen |= coverage_keys(generate(0, i, Profile())[0].program())
    if i == 199: assert set(alu) <= seen, sorted(set(alu) - seen)
  assert set(conv) <= seen, sorted(set(conv) - seen)


@pytest.mark.generated
def test_memory_is_defined_by_construction():
  """Rule: indices are kept in bounds, outputs are written only in each thread's own slots, locals are initialised
  first: no generated program has an undefined memory access, race or uninitialised read."""
  for i in range(scaled(30)):
    g = make_program(2, i, Profile(barrier=True))
    assert g.emulation is not None
    assert not [e for e in g.emulation.events if e.op in (Ops.LOAD, Ops.STORE)], i


def _dt(x: np.ndarray):
  return {np.dtype(to_np(d)): d for d in (dtypes.int8, dtypes.uint16, dtypes.float32)}[x.dtype]

def _one_op_graph(op, a: np.ndarray, b: np.ndarray | None = None) -> Graph:
  """out[i] = op(a[i], b[i]) (op None: CAST a[i] to int32), one thread per element."""
  bld = ProgramBuilder("t")
  out = bld.global_buf(dtypes.int32 if b is None else _dt(a), len(a))
  ins = [bld.global_buf(_dt(x), len(a)) for x in ([a] if b is None else [a, b])]
  i = bld.gidx(0, len(a))
  vals = [bld.load(x, i) for x in ins]
  bld.store(out, i, bld.cast(vals[0], dtypes.int32) if b is None else bld.alu(op, *vals))
  return Graph.from_program(bld.build())

def _fix_until_defined(g: Graph, inputs: list[np.ndarray]) -> np.ndarray:
  """Emulate, rewrite what was undefined (fix_node), repeat; the output once no lane is undefined."""
  out = np.zeros(inputs[0].size, to_np(g.globals()[0].dtype.base))
  for _ in range(4):
    _, _, order = g.linearize()
    em = emulate(g.program(), [out, *inputs], strict=False)
    if not em.events: return em.buffers[0]
    for e in em.events: assert fix_node(g, order[(e.origin or e).uop_index], e.kind), e
  raise AssertionError("still undefined after the rewrites")


def test_division_rewrite_keeps_the_division():
  """Rule: an IDIV undefined on some lane (divisor 0, INT_MIN / -1) keeps its op; its divisor becomes (b | 1) and its
  dividend (a | 1), so every lane is defined and the lanes that were fine only see those bits change."""
  a = np.array([7, -128, -7, 5], np.int8)
  b = np.array([0, -1, 2, 3], np.int8)
  g = _one_op_graph(Ops.IDIV, a, b)
  got = _fix_until_defined(g, [a, b])
  assert any(n.op is Ops.IDIV for n in g.nodes)
  a1, b1 = a | 1, b | 1
  want = np.trunc(a1.astype(np.int64) / b1.astype(np.int64)).astype(np.int8)  # C division of the rewritten operands
  assert got.tolist() == want.tolist()


def test_shift_rewrite_masks_the_count():
  """Rule: an undefined SHL count becomes (b & (bits - 1)), which is always in [0, bits)."""
  a = np.array([1, 1, 3, 1], np.uint16)
  b = np.array([16, 17, 1, 65535], np.uint16)
  g = _one_op_graph(Ops.SHL, a, b)
  got = _fix_until_defined(g, [a, b])
  assert got.tolist() == [(int(x) << (int(y) & 15)) & 0xFFFF for x, y in zip(a, b)]


def test_float_to_int_rewrite_clamps_the_source():
  """Rule: an undefined float -> int CAST gets a clamp before it: NaN -> 0, beyond the range -> its nearest float
  inside it; defined lanes are unchanged."""
  a = np.array([np.nan, np.inf, -np.inf, -3.5, 3e9, -3e9], np.float32)
  g = _one_op_graph(None, a)
  got = _fix_until_defined(g, [a])
  lo, hi = clamp_bounds(dtypes.float32, dtypes.int32)
  assert got.tolist() == [0, int(hi), int(lo), -3, int(hi), int(lo)]


@pytest.mark.parametrize("src", [d for d in dtypes.floats])
def test_clamp_bounds_are_the_nearest_floats_inside_the_range(src):
  """Rule: clamp_bounds(src, dst) = the float of src (fp8: on its grid) nearest to dst's range from inside: its
  truncation is in range and (where one exists) the next float outward is not."""
  with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    for dst in dtypes.ints:
      lo, hi = clamp_bounds(src, dst)
      assert dtypes.min(dst) <= int(lo) and int(hi) <= dtypes.max(dst)
      grid = to_np(src)
      for v, outward in ((hi, np.inf), (lo, -np.inf)):
        x = np.array([v], np.float32 if src in FP8 else np.float64).astype(grid)
        assert float(x[0]) == v, "the bound is a value of the source dtype"
        if src not in FP8 and src is not dtypes.bfloat16:
          nxt = float(np.nextafter(x.astype(grid), np.array([outward], grid))[0])
          if np.isfinite(nxt): assert not dtypes.min(dst) <= nxt <= dtypes.max(dst)


def test_all_dtypes_profile_is_the_full_set():
  """Rule: the default profile offers every value dtype of the IR (bool, ints, floats, fp8)."""
  assert set(Profile().dtypes) == set(ALL_DTYPES) == {dtypes.bool, *dtypes.ints, *dtypes.floats}


# ***** modes, biased inputs, the duplicate merge *****

@pytest.mark.parametrize("mode", ["tinygrad", "corpus", "mix"])
def test_every_mode_is_deterministic_and_defined(mode):
  """Rule: in every mode, program i is a function of (seed, i, mode); it verifies and has no undefined memory access."""
  for i in range(12):
    a, b = make_program(9, i, Profile(barrier=True, mode=mode)), make_program(9, i, Profile(barrier=True, mode=mode))
    assert _fingerprint(a) == _fingerprint(b)
    verify(a.graph.program())
    memory = [e for e in a.emulation.events if e.op in (Ops.LOAD, Ops.STORE) and e.use is None] if a.emulation else None
    assert memory == [], (mode, i)
  assert _fingerprint(make_program(9, 0, Profile(mode="tinygrad"))) != _fingerprint(make_program(9, 0, Profile()))


def test_a_draw_stream_is_a_function_of_seed_and_index():
  """Rule: every random choice of a program comes from its grow.Draw, whose streams each start from (stream, seed,
  index) alone: a stream started again draws the same values whatever was drawn before (so a mode that leaves its
  program to another mode hands it the same draws), and another index or stream draws others."""
  def values(draw: Draw) -> list: return [draw.scalar_value(dtypes.int32) for _ in range(8)]
  draw = Draw(3, 7)
  first = values(draw.start("random"))
  draw.start("corpus").rng.random()
  assert values(draw.start("random")) == first
  assert values(Draw(3, 8).start("random")) != first and values(Draw(3, 7).start("tinygrad")) != first


def test_mix_draws_every_mode():
  """Rule: mode "mix" makes each program in one of the modes, drawn from (seed, index) with MIX's weights."""
  drawn = [mode_of(0, i, "mix") for i in range(60)]
  assert set(drawn) == set(MODES)
  assert drawn == [mode_of(0, i, "mix") for i in range(60)] and mode_of(0, 5, "corpus") == "corpus"


def test_tinygrad_mode_reaches_the_shapes_it_names():
  """Rule: tinygrad-shaped kernels have upcast vector loads, accumulators, local memory with barriers, gated loads and
  symbolic vars (each in some of 40 programs)."""
  seen = set()
  for i in range(40):
    for u in make_program(4, i, Profile(barrier=True, mode="tinygrad")).program.uops:
      if u.op is Ops.LOAD and u.dtype.count > 1: seen.add("vector load")
      if u.op is Ops.LOAD and len(u.src) == 3: seen.add("gated load")
      if u.op in (Ops.DEFINE_ACC, Ops.BARRIER, Ops.DEFINE_LOCAL, Ops.DEFINE_VAR): seen.add(u.op.name)
  assert seen == {"vector load", "gated load", "DEFINE_ACC", "BARRIER", "DEFINE_LOCAL", "DEFINE_VAR"}


def test_corpus_mode_mutates_real_kernels_and_keeps_their_control():
  """Rule: corpus-mode programs start from a corpus kernel: their control (indices, gates, bounds) is the kernel's (or
  a shrunk bound/launch), so programs stay defined, while their data differs from the kernel's in most programs."""
  from refimpl.fuzz.mutate import _Mutator, control_nodes
  changed = 0
  structure = lambda g: sorted((n.op.name, n.arg[0] if n.op is Ops.SPECIAL else "") for n in g.nodes
                               if n.op in (Ops.RANGE, Ops.IF, Ops.SPECIAL, Ops.BARRIER, Ops.DEFINE_LOCAL))
  for i in range(20):
    m = _Mutator(Draw(6, i).start("corpus"), Profile(barrier=True))
    before, shape = [(n.op, n.dtype, repr(n.arg)) for n in m.graph.nodes], structure(m.graph)
    ctrl_ops = sorted(n.op.name for n in m.graph.nodes if id(n) in control_nodes(m.graph) and n.op in GroupOp.ALU)
    g = m.mutate()
    changed += before != [(n.op, n.dtype, repr(n.arg)) for n in g.nodes]
    assert structure(g) == shape, i
    assert sorted(n.op.name for n in g.nodes if id(n) in control_nodes(g) and n.op in GroupOp.ALU) == ctrl_ops, i
  assert changed >= 15


def test_corpus_mode_programs_are_corpus_kernels():
  """Rule: mode "corpus" makes most programs from a corpus kernel (a RANGE, SPECIAL or DEFINE_ACC of tinygrad's
  naming: `ridx`, `gidx`); only a mutated kernel that does not verify or leaves the profile's dtypes falls back to the
  random program of (seed, index)."""
  from_corpus = 0
  for i in range(16):
    corpus, random = make_program(6, i, Profile(barrier=True, mode="corpus")), make_program(6, i, Profile(barrier=True))
    from_corpus += _fingerprint(corpus) != _fingerprint(random)
  assert from_corpus >= 8, from_corpus


def test_biased_values_sit_where_the_planted_classes_differ():
  """Rule: bias.double_rounding_values of each chain are values whose direct conversion and whose conversion through
  the wider format differ (by the spec's roundings) -- every chain has some; tiny_factors multiply to subnormals."""
  for src, dst, via in CHAINS:
    xs = double_rounding_values(src, dst, via)
    assert len(xs) >= 8, (src, dst)
    one = (lambda x: int(x)) if dtypes.is_int(src) else float
    assert all(truncate[dst](one(x)) != truncate[dst](truncate[via](one(x))) for x in xs.tolist()[:32])
  t = tiny_factors(dtypes.float32, 400, np.random.default_rng(0)).astype(np.float64)
  p = np.abs(t[:200] * t[200:])
  assert ((p > 0) & (p < 2.0 ** -126)).mean() > 0.9


def test_halfway_values_are_at_and_next_to_ties():
  """Rule: halfway_values(src, dst) hold, for conversions to dst, values at a tie of dst (exactly between two
  neighbours) and their neighbours in src."""
  for src, dst in ((dtypes.float64, dtypes.float16), (dtypes.int64, dtypes.float32), (dtypes.float32, dtypes.bfloat16)):
    xs = halfway_values(src, dst).tolist()
    ties = [x for x in xs if truncate[dst](x) != truncate[dst](float(np.nextafter(x, np.inf)))
            or truncate[dst](x) != truncate[dst](float(np.nextafter(x, -np.inf)))]
    assert len(ties) > len(xs) / 4, (src, dst)


def test_merging_duplicates_keeps_the_program_and_tells_zeros_apart():
  """Rule: Graph.dce merges pure nodes with the same op, dtype, arg and srcs (visible at the later one), and nothing
  else: -0.0 and 0.0 stay two constants, and the program computes what it did."""
  bld = ProgramBuilder("t")
  out = bld.global_buf(dtypes.float32, 4)
  z = [bld.const(v, dtypes.float32) for v in (0.0, -0.0, 0.0)]
  for k, v in enumerate((bld.alu(Ops.ADD, z[0], z[1]), bld.alu(Ops.ADD, z[2], z[1]), z[1], z[2])):
    bld.store(out, bld.const(k, dtypes.int32), v)
  p = bld.build()
  g = Graph.from_program(p)
  g.dce()
  q = g.program()
  assert len(q.uops) < len(p.uops)
  assert sorted(repr(u.arg) for u in q.uops if u.op is Ops.CONST and u.dtype == dtypes.float32) == ["-0.0", "0.0"]
  zeros = [np.zeros(4, np.float32)]
  assert to_bits(emulate(q, zeros).buffers[0]).tolist() == to_bits(emulate(p, zeros).buffers[0]).tolist()


def test_some_divisions_by_zero_are_kept_for_a_where_to_discard():
  """Rule (generate.py's UB rewrites, DISCARDS): an op of a deferred kind undefined on some lane is, half the time, kept
  and every use of its value discarded by a WHERE; IDIV and MOD by zero are deferred (DIVISOR_ZERO), so a campaign has
  programs that divide by zero on lanes a WHERE discards (tinygrad's `(t > 0).where(1 // t, t)`) and are defined: no
  event, the division only an origin of an undefined value (Emulation.deferred), so they run natively."""
  kept = 0
  for i in range(60):
    g = make_program(1, i, Profile())
    assert g.emulation is not None and not g.emulation.events, i
    kept += any(d.op in (Ops.IDIV, Ops.MOD) and d.kind.deferred for d in g.emulation.deferred)
  assert kept >= 2
