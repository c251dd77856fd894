"""The cases a sweep covers and the chunks it splits each into.

A sweep case is an OpCase with one float32 operand: each unary float ALU op on float32 (NEG, RECIP, SQRT, EXP2, LOG2,
SIN, TRUNC: every one alu_cases lists) and CAST from float32 to every other value dtype. A chunk is (case, start,
count): the float32 bit patterns start .. start+count-1, with count = 2^chunk_bits and start a multiple of it."""
from __future__ import annotations

from dataclasses import dataclass

from refimpl.dtype import dtypes
from refimpl.testing.differential import OpCase, alu_cases, cast_cases

SPACE = 1 << 32  # every float32 bit pattern

def sweep_cases() -> list[OpCase]:
  """Every case a sweep may cover, in the default order: the unary float32 ALU ops, then the casts from float32."""
  ops = [c for c in alu_cases() if c.input_dtypes == (dtypes.float32,)]
  return ops + [c for c in cast_cases() if c.dtype == dtypes.float32]

CASES = {c.id: c for c in sweep_cases()}

def select(names: list[str]) -> list[OpCase]:
  """The cases named: a case id (EXP2-f32, CAST-f32-to-i32) or an op name (EXP2; CAST: every cast from float32)."""
  if not names: return list(CASES.values())
  out: list[OpCase] = []
  for name in names:
    picked = [CASES[name]] if name in CASES else [c for c in CASES.values() if c.op.name == name.upper()]
    if not picked:
      ops = sorted({c.op.name for c in CASES.values()})
      raise ValueError(f"no sweep case {name!r}: give an op ({', '.join(ops)}) or a case id ({', '.join(CASES)})")
    out += [c for c in picked if c not in out]
  return out

@dataclass(frozen=True)
class Chunk:
  """The inputs start .. start+count-1 (float32 bit patterns) of one case."""
  case: str
  start: int
  count: int

def chunks(case: OpCase, chunk_bits: int, lo: int = 0, hi: int = SPACE) -> list[Chunk]:
  """The chunks of the case whose inputs lie in [lo, hi) (both multiples of 2^chunk_bits)."""
  size = 1 << chunk_bits
  return [Chunk(case.id, s, size) for s in range(lo, hi, size)]

def parse_range(text: str, chunk_bits: int) -> tuple[int, int]:
  """"START:STOP" (ints, hex allowed) -> (lo, hi), checked to be chunk-aligned and inside the float32 space."""
  lo_text, sep, hi_text = text.partition(":")
  try: lo, hi = int(lo_text or "0", 0), int(hi_text or str(SPACE), 0)
  except ValueError: raise ValueError(f"--range {text!r}: expected START:STOP, two integers (0x... allowed)") from None
  size = 1 << chunk_bits
  if not sep or not 0 <= lo < hi <= SPACE or lo % size or hi % size:
    raise ValueError(f"--range {text!r}: need 0 <= START < STOP <= 2^32, both multiples of the chunk size {size}")
  return lo, hi
