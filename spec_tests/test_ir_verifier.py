"""The verifier: one minimal bad program per rule (several for rules with several facets), and the message each
must produce ("uop I OP: [rule] detail"); valid programs pass; the op x dtype table matches the spec's."""
import pytest

from refimpl.dtype import dtypes
from refimpl.ir import MOVE, RULE_NAMES, GroupOp, Ops, Program, ProgramError, UOp, alu_allows, elementwise, verify

f32, f16, i32, i64, u32, u64, bl, void = (dtypes.float32, dtypes.float16, dtypes.int32, dtypes.int64, dtypes.uint32,
                                          dtypes.uint64, dtypes.bool, dtypes.void)
fp8 = dtypes.fp8e4m3

def U(op, dt=void, src=(), arg=None): return UOp(op, dt, tuple(src), arg)
def G(n=0, dt=f32, size=4): return U(Ops.DEFINE_GLOBAL, dt.ptr(size), (), n)
def C(v, dt=i32): return U(Ops.CONST, dt, (), v)
def P(*uops, gs=(1, 1, 1), ls=(1, 1, 1), name="k"): return Program(name, uops, gs, ls)
def RANGE(a, b, rid=0): return U(Ops.RANGE, i32, (a, b), rid)
def LOCAL(name="temp0", size=4): return U(Ops.DEFINE_LOCAL, f32.ptr(size, local=True), (), name)

# (rule, case id, uop index or None for whole-program rules, op name, a fragment of the detail, the program)
CASES = [
  ("program-name", "space", None, None, "C identifier, got 'my kernel'", P(G(), name="my kernel")),
  ("launch-dims", "zero", None, None, "global_size must be 3 ints >= 1, got (0, 1, 1)", P(G(), gs=(0, 1, 1))),
  ("launch-dims", "two-dims", None, None, "local_size must be 3 ints >= 1", P(G(), ls=(1, 1))),
  ("launch-dims", "int32", None, None, "more than int32 indexes", P(G(), gs=(2**20, 1, 1), ls=(2**12, 1, 1))),
  ("uop-type", "not-a-uop", 1, None, "not a UOp: 'ADD'", P(G(), "ADD")),
  ("uop-type", "dtype", 0, "CONST", "dtype must be a DType", P(U(Ops.CONST, "float32", (), 1.0))),
  ("uop-type", "src", 1, "NEG", "src must be a tuple", P(C(1), UOp(Ops.NEG, i32, [0]))),
  ("src-order", "self", 1, "ADD", "src 1 is not an earlier uop (use before definition)", P(C(1), U(Ops.ADD, i32, (0, 1)))),
  ("src-order", "later", 0, "NEG", "src 1 is not an earlier uop", P(U(Ops.NEG, i32, (1,)), C(1))),
  ("arity", "neg", 1, "NEG", "takes 1 src(s), got 2", P(C(1), U(Ops.NEG, i32, (0, 0)))),
  ("arity", "load", 3, "LOAD", "takes 1 or 3 src(s), got 2",
   P(G(), C(0), U(Ops.INDEX, f32.ptr(4), (0, 1)), U(Ops.LOAD, f32, (2, 2)))),
  ("arity", "vectorize", 1, "VECTORIZE", "takes 2 or more srcs, got 1", P(C(1), U(Ops.VECTORIZE, i32.vec(1), (0,)))),
  ("arg", "special", 0, "SPECIAL", "arg must be (name, size), got 'gidx0'", P(U(Ops.SPECIAL, i32, (), "gidx0"))),
  ("arg", "alu", 1, "NEG", "arg must be None, got 5", P(C(1), U(Ops.NEG, i32, (0,), 5))),
  ("arg", "gep", 3, "GEP", "a non-empty tuple of lanes",
   P(C(1), C(2), U(Ops.VECTORIZE, i32.vec(2), (0, 1)), U(Ops.GEP, i32, (2,), 0))),
  ("result-dtype", "store", 4, "STORE", "dtype must be void, got float32",
   P(G(), C(0), U(Ops.INDEX, f32.ptr(4), (0, 1)), C(1.0, f32), U(Ops.STORE, f32, (2, 3)))),
  ("result-dtype", "global", 0, "DEFINE_GLOBAL", "must be a pointer", P(U(Ops.DEFINE_GLOBAL, f32, (), 0))),
  ("result-dtype", "alu-ptr", 1, "NEG", "must be a value dtype", P(C(1), U(Ops.NEG, i32.ptr(4), (0,)))),
  ("result-dtype", "alu-void", 1, "NEG", "must be a value dtype", P(C(1), U(Ops.NEG, void, (0,)))),
  ("src-kind", "ptr-in-alu", 1, "NEG",
   "src 0 (uop 0 DEFINE_GLOBAL float32.ptr(4)) must be a value (not a pointer, not a void op)",
   P(G(), U(Ops.NEG, f32, (0,)))),
  ("src-kind", "load-buffer", 1, "LOAD", "src 0 (uop 0 DEFINE_GLOBAL float32.ptr(4)) must be an INDEX",
   P(G(), U(Ops.LOAD, f32, (0,)))),
  ("src-kind", "index-const", 2, "INDEX", "must be a DEFINE_GLOBAL or DEFINE_LOCAL",
   P(C(1), C(0), U(Ops.INDEX, f32.ptr(4), (0, 1)))),
  ("src-kind", "assign-const", 2, "ASSIGN", "must be a DEFINE_ACC", P(C(1), C(2), U(Ops.ASSIGN, i32, (0, 1)))),
  ("src-kind", "endrange-const", 1, "ENDRANGE", "must be a RANGE", P(C(1), U(Ops.ENDRANGE, void, (0,)))),
  ("src-kind", "void-src", 2, "NEG", "(uop 1 IF void) must be a value",
   P(C(True, bl), U(Ops.IF, void, (0,)), U(Ops.NEG, i32, (1,)))),
  ("scope", "after-loop", 5, "NEG", "src 0 (uop 3) is not visible here: it lives inside RANGE 2, which is closed",
   P(C(0), C(4), RANGE(0, 1), U(Ops.ADD, i32, (2, 2)), U(Ops.ENDRANGE, void, (2,)), U(Ops.NEG, i32, (3,)))),
  ("scope", "range-var", 4, "NEG", "lives inside RANGE 2, which is closed",
   P(C(0), C(4), RANGE(0, 1), U(Ops.ENDRANGE, void, (2,)), U(Ops.NEG, i32, (2,)))),
  ("scope", "after-if", 4, "NEG", "lives inside IF 1, which is closed",
   P(C(True, bl), U(Ops.IF, void, (0,)), C(3), U(Ops.ENDIF, void, (1,)), U(Ops.NEG, i32, (2,)))),
  ("block-nesting", "crossed", 5, "ENDRANGE", "closes RANGE 2 but the innermost open block is IF 4",
   P(C(0), C(4), RANGE(0, 1), C(True, bl), U(Ops.IF, void, (3,)), U(Ops.ENDRANGE, void, (2,)))),
  ("block-nesting", "twice", 4, "ENDRANGE", "RANGE 2 is not open",
   P(C(0), C(4), RANGE(0, 1), U(Ops.ENDRANGE, void, (2,)), U(Ops.ENDRANGE, void, (2,)))),
  ("top-level", "in-loop", 3, "DEFINE_GLOBAL", "declarations must be at top level, this one is inside RANGE 2",
   P(C(0), C(4), RANGE(0, 1), G(), U(Ops.ENDRANGE, void, (2,)))),
  ("global-numbering", "skip", 0, "DEFINE_GLOBAL", "buffer number 1 out of order: expected 0", P(G(1))),
  ("global-numbering", "repeat", 1, "DEFINE_GLOBAL", "buffer number 0 out of order: expected 1", P(G(0), G(0))),
  ("buffer-dtype", "unbounded", 0, "DEFINE_GLOBAL", "buffer size must be in [1, 2**31), got -1",
   P(U(Ops.DEFINE_GLOBAL, f32.ptr(), (), 0))),
  ("buffer-dtype", "local-flag", 0, "DEFINE_LOCAL", "local=False is wrong for DEFINE_LOCAL",
   P(U(Ops.DEFINE_LOCAL, f32.ptr(4), (), "temp0"))),
  ("buffer-dtype", "global-local", 0, "DEFINE_GLOBAL", "local=True is wrong",
   P(U(Ops.DEFINE_GLOBAL, f32.ptr(4, local=True), (), 0))),
  ("buffer-dtype", "vector", 0, "DEFINE_GLOBAL", "must point to a non-void scalar",
   P(U(Ops.DEFINE_GLOBAL, f32.vec(4).ptr(4), (), 0))),
  ("define-var", "bounds", 0, "DEFINE_VAR", "needs int32 bounds min <= max, got [5, 1]",
   P(U(Ops.DEFINE_VAR, i32, (), ("n", 5, 1)))),
  ("define-var", "twice", 1, "DEFINE_VAR", "var name 'n' is defined twice",
   P(U(Ops.DEFINE_VAR, i32, (), ("n", 0, 1)), U(Ops.DEFINE_VAR, i32, (), ("n", 0, 1)))),
  ("define-var", "name", 0, "DEFINE_VAR", "must be an identifier, got '2n'", P(U(Ops.DEFINE_VAR, i32, (), ("2n", 0, 1)))),
  ("define-local", "twice", 1, "DEFINE_LOCAL", "local name 'temp0' is defined twice", P(LOCAL(), LOCAL())),
  ("define-local", "name", 0, "DEFINE_LOCAL", "must be an identifier, got 'a-b'", P(LOCAL("a-b"))),
  ("const-value", "int-range", 0, "CONST", "value 300 is out of range [-128, 127] of int8", P(C(300, dtypes.int8))),
  ("const-value", "inexact", 0, "CONST", "value 0.1 is not exactly representable in float32", P(C(0.1, f32))),
  ("const-value", "fp8-inf", 0, "CONST", "value inf is not exactly representable in fp8e4m3", P(C(float("inf"), fp8))),
  ("const-value", "int-arg-float", 0, "CONST", "a float CONST needs a float arg, got 1", P(C(1, f32))),
  ("const-value", "bool-arg-int", 0, "CONST", "an integer CONST needs an int arg, got True", P(C(True, i32))),
  ("const-value", "vector", 0, "CONST", "CONST must be a scalar", P(C(1, i32.vec(2)))),
  ("index-dtype", "special", 0, "SPECIAL", "index dtype int32, got int64", P(U(Ops.SPECIAL, i64, (), ("gidx0", 1)))),
  ("index-dtype", "index", 2, "INDEX", "src 1 must be an int32 scalar", P(G(), C(0, i64), U(Ops.INDEX, f32.ptr(4), (0, 1)))),
  ("index-dtype", "range", 2, "RANGE", "src 0 must be an int32 scalar", P(C(0, u32), C(4, u32), U(Ops.RANGE, i32, (0, 1), 0))),
  ("special", "name", 0, "SPECIAL", "name must be one of gidx0, gidx1, gidx2, lidx0", P(U(Ops.SPECIAL, i32, (), ("gidx3", 1)))),
  ("special", "size", 0, "SPECIAL", "gidx0 has size 8 but global_size[0] is 16",
   P(U(Ops.SPECIAL, i32, (), ("gidx0", 8)), gs=(16, 1, 1))),
  ("special", "local-size", 0, "SPECIAL", "lidx1 has size 2 but local_size[1] is 1", P(U(Ops.SPECIAL, i32, (), ("lidx1", 2)))),
  ("special", "twice", 1, "SPECIAL", "gidx0 is defined twice",
   P(U(Ops.SPECIAL, i32, (), ("gidx0", 1)), U(Ops.SPECIAL, i32, (), ("gidx0", 1)))),
  ("range", "id", 4, "RANGE", "loop id 7 is used twice",
   P(C(0), C(4), RANGE(0, 1, 7), U(Ops.ENDRANGE, void, (2,)), RANGE(0, 1, 7))),
  ("gate", "if", 1, "IF", "the gate (src 0) must be a bool scalar, got int32", P(C(1), U(Ops.IF, void, (0,)))),
  ("gate", "store", 4, "STORE", "the gate (src 2) must be a bool scalar, got int32",
   P(G(), C(0), U(Ops.INDEX, f32.ptr(4), (0, 1)), C(1.0, f32), U(Ops.STORE, void, (2, 3, 1)))),
  ("gate", "load-vector", 6, "LOAD", "must be a bool scalar, got bool.vec(2)",
   P(G(), C(0), U(Ops.INDEX, f32.ptr(4), (0, 1)), C(1.0, f32), C(True, bl), U(Ops.VECTORIZE, bl.vec(2), (4, 4)),
     U(Ops.LOAD, f32, (2, 3, 5)))),
  ("alu-dtypes", "mixed", 2, "ADD", "src dtypes (float32, int32) must all equal the result dtype float32",
   P(C(1.0, f32), C(1), U(Ops.ADD, f32, (0, 1)))),
  ("alu-dtypes", "result", 1, "ADD", "must all equal the result dtype int64", P(C(1), U(Ops.ADD, i64, (0, 0)))),
  ("alu-dtypes", "cmp-result", 1, "CMPLT", "result must be bool, got int32", P(C(1), U(Ops.CMPLT, i32, (0, 0)))),
  ("alu-dtypes", "cmp-mixed", 2, "CMPNE", "compares two different dtypes (int32, int64)",
   P(C(1), C(1, i64), U(Ops.CMPNE, bl, (0, 1)))),
  ("alu-dtypes", "where-cond", 1, "WHERE", "the condition must be bool, got int32", P(C(1), U(Ops.WHERE, i32, (0, 0, 0)))),
  ("alu-dtypes", "where-values", 3, "WHERE", "both values (int32, float32) must be the result dtype int32",
   P(C(True, bl), C(1), C(1.0, f32), U(Ops.WHERE, i32, (0, 1, 2)))),
  ("alu-dtypes", "shift-count", 2, "SHL", "src dtypes (int32, uint32)", P(C(1), C(1, u32), U(Ops.SHL, i32, (0, 1)))),
  *[("bool-op", op.name.lower(), 1, op.name, f"{op.name} is not defined on bool",
      P(C(True, bl), U(op, bl, (0,) * (1 if op in GroupOp.Unary else 2))))
    for op in sorted(GroupOp.NotBool, key=lambda o: o.value)],
  ("op-dtype", "exp2-int", 1, "EXP2", "EXP2 takes float dtypes only, got int32", P(C(1), U(Ops.EXP2, i32, (0,)))),
  ("op-dtype", "fdiv-bool", 1, "FDIV", "FDIV takes float dtypes only, got bool", P(C(True, bl), U(Ops.FDIV, bl, (0, 0)))),
  ("op-dtype", "idiv-float", 1, "IDIV", "IDIV takes integer dtypes only, got float32", P(C(1.0, f32), U(Ops.IDIV, f32, (0, 0)))),
  ("op-dtype", "shr-float", 1, "SHR", "SHR takes integer dtypes only", P(C(1.0, f32), U(Ops.SHR, f32, (0, 0)))),
  ("op-dtype", "xor-float", 1, "XOR", "XOR takes integer or bool dtypes only, got float32",
   P(C(1.0, f32), U(Ops.XOR, f32, (0, 0)))),
  ("op-dtype", "threefry", 1, "THREEFRY", "THREEFRY takes uint64 only, got uint32", P(C(1, u32), U(Ops.THREEFRY, u32, (0, 0)))),
  ("op-dtype", "fp8", 1, "ADD", "fp8 dtypes are storage only", P(C(1.0, fp8), U(Ops.ADD, fp8, (0, 0)))),
  ("op-dtype", "vector", 3, "SQRT", "SQRT takes float dtypes only, got int32.vec(2)",
   P(C(1), C(2), U(Ops.VECTORIZE, i32.vec(2), (0, 1)), U(Ops.SQRT, i32.vec(2), (2,)))),
  ("index", "dtype", 2, "INDEX", "dtype must be the buffer's float32.ptr(4), got float32.ptr(8)",
   P(G(), C(0), U(Ops.INDEX, f32.ptr(8), (0, 1)))),
  ("load-store", "load-dtype", 3, "LOAD", "dtype int32 does not match the buffer element float32",
   P(G(), C(0), U(Ops.INDEX, f32.ptr(4), (0, 1)), U(Ops.LOAD, i32, (2,)))),
  ("load-store", "too-wide", 3, "LOAD", "has more lanes than the buffer has elements (4)",
   P(G(), C(0), U(Ops.INDEX, f32.ptr(4), (0, 1)), U(Ops.LOAD, f32.vec(8), (2,)))),
  ("load-store", "alt", 5, "LOAD", "the alternative value is int32, not the LOAD's dtype float32",
   P(G(), C(0), U(Ops.INDEX, f32.ptr(4), (0, 1)), C(1), C(True, bl), U(Ops.LOAD, f32, (2, 3, 4)))),
  ("load-store", "store-value", 4, "STORE", "the stored value int32 does not match the buffer element float32",
   P(G(), C(0), U(Ops.INDEX, f32.ptr(4), (0, 1)), C(1), U(Ops.STORE, void, (2, 3)))),
  ("load-store", "move-to-global", 4, "STORE", "a move STORE must store into a DEFINE_LOCAL",
   P(G(), C(0), U(Ops.INDEX, f32.ptr(4), (0, 1)), C(1.0, f32), U(Ops.STORE, void, (2, 3), MOVE))),
  ("arg", "store", 4, "STORE", "arg must be None or 'move', got 'copy'",
   P(G(), C(0), U(Ops.INDEX, f32.ptr(4), (0, 1)), C(1.0, f32), U(Ops.STORE, void, (2, 3), "copy"))),
  ("vectorize", "mixed", 2, "VECTORIZE", "scalars of one dtype, got (int32, int64)",
   P(C(1), C(1, i64), U(Ops.VECTORIZE, i32.vec(2), (0, 1)))),
  ("vectorize", "dtype", 1, "VECTORIZE", "dtype must be int32.vec(2), got int32.vec(3)",
   P(C(1), U(Ops.VECTORIZE, i32.vec(3), (0, 0)))),
  ("gep", "lane", 2, "GEP", "lane 4 is outside the 4 lanes of int32.vec(4)",
   P(C(1), U(Ops.VECTORIZE, i32.vec(4), (0,) * 4), U(Ops.GEP, i32, (1,), (4,)))),
  ("gep", "dtype", 2, "GEP", "dtype must be int32.vec(2), got int32",
   P(C(1), U(Ops.VECTORIZE, i32.vec(4), (0,) * 4), U(Ops.GEP, i32, (1,), (0, 1)))),
  ("cast", "count", 2, "CAST", "changes the vector count (int32.vec(2) -> float32)",
   P(C(1), U(Ops.VECTORIZE, i32.vec(2), (0, 0)), U(Ops.CAST, f32, (1,)))),
  ("bitcast", "size", 1, "BITCAST", "needs the same count and element size (int32 -> float16)",
   P(C(1), U(Ops.BITCAST, f16, (0,)))),
  ("bitcast", "bool", 1, "BITCAST", "bool has no bit pattern", P(C(1, dtypes.uint8), U(Ops.BITCAST, bl, (0,)))),
  ("acc", "init", 1, "DEFINE_ACC", "the init value is int32, not the accumulator's float32",
   P(C(0), U(Ops.DEFINE_ACC, f32, (0,), 0))),
  ("acc", "id-twice", 2, "DEFINE_ACC", "accumulator id 0 is used twice",
   P(C(0.0, f32), U(Ops.DEFINE_ACC, f32, (0,), 0), U(Ops.DEFINE_ACC, f32, (0,), 0))),
  ("acc", "assign", 3, "ASSIGN", "accumulator float32, value int32 and result float32 must be one dtype",
   P(C(0.0, f32), U(Ops.DEFINE_ACC, f32, (0,), 0), C(1), U(Ops.ASSIGN, f32, (1, 2)))),
  ("wmma", "shape", 4, "WMMA", "for (N, M, K)=(2, 2, 4) needs a float16.vec(8)",
   P(C(1.0, f16), U(Ops.VECTORIZE, f16.vec(4), (0,) * 4), C(0.0, f32), U(Ops.VECTORIZE, f32.vec(4), (2,) * 4),
     U(Ops.WMMA, f32.vec(4), (1, 1, 3), (2, 2, 4)))),
  ("wmma", "int", 1, "WMMA", "takes float dtypes, got int32 -> int32", P(C(1), U(Ops.WMMA, i32, (0, 0, 0), (1, 1, 1)))),
  ("barrier", "no-local", 1, "BARRIER", "BARRIER in a program with no DEFINE_LOCAL", P(G(), U(Ops.BARRIER))),
  ("barrier", "in-if", 3, "BARRIER", "BARRIER inside IF 2: every thread of the workgroup must reach it",
   P(LOCAL(), C(True, bl), U(Ops.IF, void, (1,)), U(Ops.BARRIER), U(Ops.ENDIF, void, (2,)))),
  ("barrier", "divergent-loop", 4, "BARRIER", "inside RANGE 3 whose bounds depend on lidx",
   P(LOCAL(), U(Ops.SPECIAL, i32, (), ("lidx0", 4)), C(0), RANGE(2, 1), U(Ops.BARRIER),
     U(Ops.ENDRANGE, void, (3,)), ls=(4, 1, 1))),
  ("unclosed-block", "range", 2, "RANGE", "RANGE 2 is never closed", P(C(0), C(4), RANGE(0, 1))),
  ("unclosed-block", "if", 1, "IF", "IF 1 is never closed", P(C(True, bl), U(Ops.IF, void, (0,)))),
  ("launch-specials", "global", None, None, "global_size[0] is 4 but there is no SPECIAL gidx0", P(G(), gs=(4, 1, 1))),
  ("launch-specials", "local", None, None, "local_size[1] is 2 but there is no SPECIAL lidx1",
   P(G(), U(Ops.SPECIAL, i32, (), ("gidx0", 4)), gs=(4, 1, 1), ls=(1, 2, 1))),
]


@pytest.mark.parametrize("rule,case,index,op,detail,program", CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_rule(rule, case, index, op, detail, program):
  with pytest.raises(ProgramError) as e:
    verify(program)
  where = "program" if index is None else f"uop {index} {op}"
  assert str(e.value).startswith(f"{where}: [{rule}] "), str(e.value)
  assert detail in str(e.value), str(e.value)
  assert (e.value.rule, e.value.index) == (rule, index)
  assert isinstance(e.value, ValueError)


def test_every_rule_has_a_case():
  assert set(RULE_NAMES) == {c[0] for c in CASES}


def test_valid_programs_pass():
  # a loop with an accumulator, a gated load, an IF, a vector load, a local buffer and a barrier at top level
  uops = [G(0, f32, 8), G(1, f32, 8), U(Ops.DEFINE_VAR, i32, (), ("n", 0, 8)), LOCAL("tmp", 4),
          U(Ops.SPECIAL, i32, (), ("gidx0", 2)), U(Ops.SPECIAL, i32, (), ("lidx0", 4)),   # 4 5
          C(0.0, f32), U(Ops.DEFINE_ACC, f32, (6,), 0), C(0), RANGE(8, 2),                  # 6 7 8 9
          U(Ops.INDEX, f32.ptr(8), (1, 9)), U(Ops.LOAD, f32, (10,)), U(Ops.ADD, f32, (7, 11)),                      # 10 11 12
          U(Ops.ASSIGN, f32, (7, 12)),                                                                                # 13
          U(Ops.ENDRANGE, void, (9,)),
          U(Ops.INDEX, f32.ptr(4, local=True), (3, 5)), U(Ops.STORE, void, (15, 13)), U(Ops.BARRIER),     # 15 16 17
          U(Ops.CMPLT, bl, (5, 2)), U(Ops.IF, void, (18,)),                                                 # 18 19
          U(Ops.INDEX, f32.ptr(4, local=True), (3, 8)), U(Ops.LOAD, f32, (20, 6, 18)),                      # 20 21
          U(Ops.INDEX, f32.ptr(8), (0, 4)), U(Ops.STORE, void, (22, 21)), U(Ops.ENDIF, void, (19,)),       # 22 23 24
          U(Ops.INDEX, f32.ptr(8), (1, 8)), U(Ops.LOAD, f32.vec(4), (25,)), U(Ops.GEP, f32.vec(2), (26,), (3, 0))]
  p = P(*uops, gs=(2, 1, 1), ls=(4, 1, 1))
  assert verify(p) is p
  assert p.buffers == {0: f32.ptr(8), 1: f32.ptr(8)} and p.vars == (("n", 0, 8),) and p.locals == {"tmp": f32.ptr(4, local=True)}


# The spec's dtype table, written out independently of the verifier: which ALU op takes which operand dtype.
FLOATS = {dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64}
INTS = {dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64}
ALLOWED = {**{op: FLOATS for op in (Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.FDIV, Ops.TRUNC)},
           **{op: INTS for op in (Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR)},
           **{op: INTS | {bl} for op in (Ops.XOR, Ops.OR, Ops.AND)},
           **{op: INTS | FLOATS for op in (Ops.SUB, Ops.NEG)},
           **{op: INTS | FLOATS | {bl} for op in (Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPLT, Ops.CMPNE, Ops.WHERE, Ops.MULACC)},
           Ops.THREEFRY: {u64}}

def test_alu_dtype_table():
  assert set(ALLOWED) == set(GroupOp.ALU)
  for op, ok in ALLOWED.items():
    for dt in INTS | FLOATS | {bl, dtypes.fp8e4m3, dtypes.fp8e5m2}:
      assert alu_allows(op, dt) == (dt in ok), (op, dt)
      assert alu_allows(op, dt.vec(4)) == (dt in ok), (op, dt)


@pytest.mark.parametrize("op", sorted(GroupOp.ALU, key=lambda o: o.value), ids=lambda o: o.name)
def test_elementwise_kernels_verify_for_every_allowed_dtype(op):
  for dt in sorted(ALLOWED[op], key=str):
    verify(elementwise(op, dt, n=8))
