"""The kernel IR: tinygrad 0.10.1's linearized kernel language (see docs/ir.md).

  ops.py        Ops (every op, with its src convention) and GroupOp (op families)
  program.py    UOp, Program (uops + launch dims + derived buffer/var signatures), the text listing, INDEX_DTYPE
  verify.py     verify(program) and ProgramError: one check function per rule, in a table
  dtype_text.py the readable dtype strings ("float32.vec(4)", "int8.ptr(16, local=True)") and their parser
  serialize.py  the versioned JSON form (to_json / from_json / save / load) and ProgramFormatError
  builder.py    ProgramBuilder and elementwise() for writing programs by hand
  rewrite.py    rewrite(program, {Ops.X: handler}): the uop-by-uop rewrite every lowering pass is written with
  strategies.py random valid programs (for hypothesis and fuzzers)

Departures from tinygrad 0.10.1's linearized uops, and why:
- DEFINE_ACC takes src (init,) and an int id. tinygrad also lists the RANGEs it reduces over as srcs, yet places the
  DEFINE_ACC before those RANGEs in the list; here every src points backwards, so the loops are implied by where the
  ASSIGNs are. DEFINE_ACC and ASSIGN both read as the accumulator's register (what tinygrad's C renderer does).
- ASSIGN targets only a DEFINE_ACC (no ASSIGN to buffers: memory is written by STORE only).
- Vector memory access: LOAD/STORE of T.vec(n) through a plain scalar INDEX (n consecutive elements, no alignment
  requirement) instead of a CAST of the INDEX pointer to a vector pointer; there are no pointer CASTs at all.
- Order is the list order: BARRIER has no srcs (tinygrad: the local STOREs it orders), LOAD and IF take no barrier src.
  A gated STORE has its bool gate as src 2 (tinygrad 0.10.1 also accepts an IF there).
- BARRIER is rejected inside IF and inside loops whose bounds depend on lidx (tinygrad does not check divergence).
- SHL/SHR: the shift count has the value's dtype (tinygrad also allows a uint32 count).
- CONST is scalar only (no VCONST: vectors are VECTORIZE of CONSTs) and a float CONST must be exactly representable in
  its dtype (tinygrad keeps any Python float and rounds when rendering), so a program means one thing on every backend.
- SPECIAL: only gidx0-2 / lidx0-2 (no "idx" global-id form), int sizes (no symbolic launch dims), and the launch dims
  must equal the SPECIAL sizes (a dimension larger than 1 without its SPECIAL would run duplicate threads).
- WMMA: one thread computes the whole a@b + c, arg (N, M, K), instead of tinygrad's warp-distributed fragments with
  arg (name, dims, dtype_in, dtype_out, device, threads, upcast_axes, reduce_axes): one layout, readable semantics.
- Buffers are bounded (size >= 1; tinygrad allows -1), since bounds are part of the spec (out of bounds is undefined).
- The index dtype is always int32. fp8 dtypes are storage only (no ALU). Ops that never reach a rendered kernel
  (SINK, NOOP, CUSTOM, VIEW, ...) are not in the op set.
"""
from refimpl.ir.builder import ProgramBuilder, elementwise
from refimpl.ir.dtype_text import dtype_to_str, parse_dtype
from refimpl.ir.ops import MOVE, GroupOp, Ops
from refimpl.ir.program import INDEX_DTYPE, Program, UOp
from refimpl.ir.rewrite import rewrite
from refimpl.ir.serialize import ProgramFormatError, load_program, program_from_json, program_to_json, save_program
from refimpl.ir.verify import RULE_NAMES, ProgramError, alu_allows, verify

__all__ = ["INDEX_DTYPE", "MOVE", "RULE_NAMES", "GroupOp", "Ops", "Program", "ProgramBuilder", "ProgramError",
           "ProgramFormatError", "UOp", "alu_allows", "dtype_to_str", "elementwise", "load_program", "parse_dtype",
           "program_from_json", "program_to_json", "rewrite", "save_program", "verify"]
