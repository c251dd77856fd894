"""The integer oracle shared by the int families: Python ints with an explicit two's complement wrap, the spec's value of
every int binary op (None where the spec leaves it undefined), and each width's edge values."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from refimpl.dtype import dtypes, to_np
from refimpl.emulator.alu import exec_alu
from refimpl.ir.dtype_text import dtype_to_str
from refimpl.ir.ops import Ops

INTS = (dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64)
IDS = [dtype_to_str(dt) for dt in INTS]
INT8S, INT8_IDS = [dtypes.int8, dtypes.uint8], ["int8", "uint8"]

def info(dt) -> tuple[int, bool, int, int]:
  bits, signed = 8 * dt.itemsize, dt in dtypes.sints
  return bits, signed, (-(2 ** (bits - 1)) if signed else 0), (2 ** (bits - 1) - 1 if signed else 2**bits - 1)

def wrap(v: int, dt) -> int:
  """v modulo 2^bits into dt's range (two's complement)."""
  bits, _, lo, _ = info(dt)
  return (v - lo) % 2**bits + lo

def tdiv(a: int, b: int) -> int:
  """Quotient truncated toward zero."""
  q = abs(a) // abs(b)
  return q if (a < 0) == (b < 0) else -q

def oracle(op, dt, a: int, b: int):
  """The spec's value for ints, or None where it is undefined."""
  bits, signed, lo, _ = info(dt)
  if op in (Ops.IDIV, Ops.MOD):
    if b == 0 or (signed and a == lo and b == -1): return None
    q = tdiv(a, b)
    return q if op is Ops.IDIV else a - q * b
  if op in (Ops.SHL, Ops.SHR):
    if not 0 <= b < bits: return None
    return wrap(a << b, dt) if op is Ops.SHL else a >> b  # Python's >> on a negative int is arithmetic
  return {Ops.ADD: lambda: wrap(a + b, dt), Ops.SUB: lambda: wrap(a - b, dt), Ops.MUL: lambda: wrap(a * b, dt),
          Ops.XOR: lambda: wrap(a ^ b, dt), Ops.OR: lambda: wrap(a | b, dt), Ops.AND: lambda: wrap(a & b, dt),
          Ops.MAX: lambda: max(a, b), Ops.CMPLT: lambda: a < b, Ops.CMPNE: lambda: a != b}[op]()

BINARY = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD, Ops.SHL, Ops.SHR, Ops.XOR, Ops.OR, Ops.AND, Ops.MAX, Ops.CMPLT,
          Ops.CMPNE)

def check(op, dt, a: np.ndarray, b: np.ndarray) -> list[str]:
  out = exec_alu(op, dt, a, b)
  undef = np.zeros(a.shape, bool) if out.undefined is None else out.undefined
  bad = []
  for i, (x, y) in enumerate(zip(a.tolist(), b.tolist())):
    want = oracle(op, dt, x, y)
    if want is None: ok = bool(undef[i]) and out.values[i] == 0
    else: ok = not undef[i] and out.values[i].item() == want
    if not ok: bad.append(f"{op.name}({x}, {y}) = {out.values[i]!r} undefined={bool(undef[i])}, want {want}")
  return bad[:5]

def every_8bit_pair(op, dt) -> list[str]:
  """check() on all 65536 operand pairs of an 8-bit dtype."""
  vals = np.arange(256, dtype=np.uint8).view(to_np(dt))
  a, b = (np.ascontiguousarray(x.reshape(-1)) for x in np.meshgrid(vals, vals, indexing="ij"))
  return check(op, dt, a, b)

def int_edges(dt) -> list[int]:
  bits, _, lo, hi = info(dt)
  vals = {0, 1, 2, 3, lo, lo + 1, hi, hi - 1, bits - 1, bits, bits + 1, 7, 100}
  ks = {*range(0, bits, max(1, bits // 8)), bits // 2 - 1, bits - 2, bits - 1}
  vals |= {wrap(s * 2**k + d, dt) for k in ks for s in (1, -1) for d in (-1, 0, 1)}
  return sorted(vals)

def int_values(dt) -> st.SearchStrategy[int]:
  _, _, lo, hi = info(dt)
  return st.one_of(st.sampled_from(int_edges(dt)), st.integers(lo, hi))
