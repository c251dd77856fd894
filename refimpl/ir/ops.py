"""The op set of the kernel language and its families (tinygrad 0.10.1's `Ops` / `GroupOp`, linearized subset).

Only the ops that survive tinygrad's linearizer are here: a kernel is a flat list of these. What each op takes
(its src convention) is written beside it; `refimpl.ir.verify` enforces every line of it.
"""
from __future__ import annotations

from enum import Enum, auto


class Ops(Enum):
  """Every op of a linearized kernel. `src` lists uop indices (all earlier in the program), `arg` is plain data.

  declarations (top level only, never inside a RANGE or IF):
    DEFINE_GLOBAL  src ()                    arg int: buffer number 0..n-1 in order   dtype T.ptr(size)
    DEFINE_VAR     src ()                    arg (name, min, max)                     dtype int32
    DEFINE_LOCAL   src ()                    arg str: name                            dtype T.ptr(size, local=True)
  values:
    CONST          src ()                    arg bool | int | float (exactly representable in dtype)   scalar dtype
    SPECIAL        src ()                    arg (name, size): gidx0-2 = workgroup id, lidx0-2 = id in the workgroup; int32
    DEFINE_ACC     src (init,)               arg int: accumulator id; a mutable register initialised to init
    ASSIGN         src (acc, value)          writes value into the DEFINE_ACC register acc; reads as the register
    RANGE          src (start, end)          arg int: loop id; int32; opens a loop start <= r < end, step 1
    INDEX          src (buffer, index)       dtype = the buffer's pointer dtype; index is an int32 scalar (element units)
    LOAD           src (INDEX[, alt, gate])  dtype T or T.vec(n): n consecutive elements from the index; a false gate
                                             does no access and yields alt (alt has the LOAD's dtype, gate is a bool scalar)
    VECTORIZE      src (x0, ..., xn-1)       n >= 2 scalars of one dtype T -> T.vec(n)
    GEP            src (v,)                  arg tuple of lanes -> v's scalar dtype .vec(len(lanes))
    CAST, BITCAST  src (x,)                  same vector count; BITCAST keeps the bits (same itemsize, no bool)
    WMMA           src (a, b, c)             arg (N, M, K): one thread computes a@b + c, a = Tin.vec(M*K) row-major M x K,
                                             b = Tin.vec(K*N) row-major K x N, c and result Tout.vec(M*N) row-major M x N
    ALU ops        the GroupOp.ALU families below; srcs and result share one dtype except CMPLT/CMPNE (-> bool) and
                   WHERE (cond is bool with the same vector count)
  effects and structure (dtype void, never used as a src except by their closer):
    STORE          src (INDEX, value[, gate])   value is T or T.vec(n); a false gate does no access; arg None, or
                                                MOVE into a DEFINE_LOCAL: a move a compiler pass introduced (a
                                                carry), which stores an undefined value as undefined, not a use
    ENDRANGE       src (RANGE,)                 closes the innermost open RANGE
    IF             src (gate,)                  gate is a bool scalar; opens a block
    ENDIF          src (IF,)                    closes the innermost open IF
    BARRIER        src ()                       workgroup barrier; only in programs with DEFINE_LOCAL, never under
                                                divergent control flow
  """
  # declarations
  DEFINE_GLOBAL = auto(); DEFINE_VAR = auto(); DEFINE_LOCAL = auto()
  # values with no src
  CONST = auto(); SPECIAL = auto()
  # registers and structure
  DEFINE_ACC = auto(); ASSIGN = auto(); RANGE = auto(); ENDRANGE = auto(); IF = auto(); ENDIF = auto()
  # memory
  INDEX = auto(); LOAD = auto(); STORE = auto(); BARRIER = auto()
  # vectors and conversions
  VECTORIZE = auto(); GEP = auto(); CAST = auto(); BITCAST = auto(); WMMA = auto()
  # unary ALU
  EXP2 = auto(); LOG2 = auto(); SIN = auto(); SQRT = auto(); RECIP = auto(); NEG = auto(); TRUNC = auto()
  # binary ALU
  ADD = auto(); SUB = auto(); MUL = auto(); FDIV = auto(); IDIV = auto(); MOD = auto(); MAX = auto()
  CMPLT = auto(); CMPNE = auto(); XOR = auto(); OR = auto(); AND = auto(); SHL = auto(); SHR = auto()
  THREEFRY = auto()
  # ternary ALU
  WHERE = auto(); MULACC = auto()

  def __repr__(self) -> str: return f"Ops.{self.name}"


MOVE = "move"
"""STORE's arg for a move a compiler pass introduced (refimpl.lower's carries across barriers): the value goes into
memory with its undefined lanes, which is not a use of them (the emulator's `_store`); a LOAD of that memory carries
the moved value's origin (`Plan.deferred_sources`)."""


class GroupOp:
  """Op families. The dtype families are the spec's (docs/ir.md, "Ops"; docs/semantics.md, "Decisions"):
  FloatOnly ops take float dtypes only; IntOnly ops take integer dtypes only (never bool, never float);
  IntOrBool ops take integers or bool; NotBool ops are rejected on bool; THREEFRY takes uint64 only.
  Every other ALU op takes any dtype that arithmetic is defined on (ints, floats, bool; fp8 is storage only)."""
  Unary = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.NEG, Ops.TRUNC})
  Binary = frozenset({Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.CMPLT, Ops.CMPNE,
                      Ops.XOR, Ops.OR, Ops.AND, Ops.SHL, Ops.SHR, Ops.THREEFRY})
  Ternary = frozenset({Ops.WHERE, Ops.MULACC})
  ALU = Unary | Binary | Ternary
  Comparison = frozenset({Ops.CMPLT, Ops.CMPNE})
  # f(a, b) == f(b, a)
  Commutative = frozenset({Ops.ADD, Ops.MUL, Ops.MAX, Ops.CMPNE, Ops.XOR, Ops.AND, Ops.OR})
  # f(f(a, b), c) == f(a, f(b, c)) (exactly, on ints and bool)
  Associative = frozenset({Ops.ADD, Ops.MUL, Ops.AND, Ops.OR})
  # f(x, x) == x
  Idempotent = frozenset({Ops.OR, Ops.AND, Ops.MAX})
  Transcendental = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN})

  # dtype families (see the class docstring)
  FloatOnly = frozenset({Ops.EXP2, Ops.LOG2, Ops.SIN, Ops.SQRT, Ops.RECIP, Ops.FDIV, Ops.TRUNC})
  IntOnly = frozenset({Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR})
  IntOrBool = frozenset({Ops.XOR, Ops.OR, Ops.AND})
  NotBool = frozenset({Ops.IDIV, Ops.MOD, Ops.SUB, Ops.NEG, Ops.SHL, Ops.SHR})

  # structure
  Declaration = frozenset({Ops.DEFINE_GLOBAL, Ops.DEFINE_VAR, Ops.DEFINE_LOCAL})
  Buffer = frozenset({Ops.DEFINE_GLOBAL, Ops.DEFINE_LOCAL})
  BlockStart = frozenset({Ops.RANGE, Ops.IF})
  BlockEnd = frozenset({Ops.ENDRANGE, Ops.ENDIF})
  Void = frozenset({Ops.STORE, Ops.ENDRANGE, Ops.IF, Ops.ENDIF, Ops.BARRIER})
  Memory = frozenset({Ops.INDEX, Ops.LOAD, Ops.STORE})
