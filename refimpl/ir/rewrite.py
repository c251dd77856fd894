"""Rewriting a program uop by uop: `rewrite(program, {Ops.X: handler, ...})`, the walk every lowering pass shares.

The walk visits the uops in order and writes the new program through one ProgramBuilder opened over the old one
(`ProgramBuilder.over`: the same name and launch dims, new ids past the old ones). It owns the remap from old indices to
new ones: a uop whose op has no handler is copied with its srcs remapped; a handler `handler(b, i, u, src)` gets the
builder, the old uop's index and the uop, and its srcs' new indices, emits any number of uops through `b`, and returns
the new index that stands for the old uop (None for a void op, which nothing reads). For example, every NEG as a SUB
from zero, and every BARRIER dropped:

  def sub_from_zero(b, i, u, src): return b.alu(Ops.SUB, b.const(0, u.dtype), src[0])
  def drop(b, i, u, src): return None
  program = rewrite(program, {Ops.NEG: sub_from_zero, Ops.BARRIER: drop})

The result is not verified (a pass verifies it, or says why not). A handler that keeps state (a decode made once, read
by later handlers) is a bound method of the pass's own object; expressions on the new values are refimpl.lower.emit's.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

from refimpl.ir.builder import ProgramBuilder
from refimpl.ir.ops import Ops
from refimpl.ir.program import Program, UOp

Handler = Callable[[ProgramBuilder, int, UOp, tuple[int, ...]], int | None]


def copy(b: ProgramBuilder, i: int, u: UOp, src: tuple[int, ...]) -> int:
  """The handler of every op without one: uop u as it is, on its srcs' new indices."""
  return b.uop(u.op, u.dtype, src, u.arg)


def rewrite(program: Program, handlers: Mapping[Ops, Handler]) -> Program:
  """The program with each uop replaced by what its op's handler emits (see the module docstring); not verified."""
  b = ProgramBuilder.over(program)
  new: list[int | None] = []
  for i, u in enumerate(program.uops): new.append(handlers.get(u.op, copy)(b, i, u, tuple(new[j] for j in u.src)))
  return b.build(check=False)
