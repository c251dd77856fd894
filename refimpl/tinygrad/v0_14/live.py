"""record_of(uops): tinygrad 0.14's linearized UOp list as a KernelRecord (record.py). Needs tinygrad 0.14."""
from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from refimpl.tinygrad.lines import require
from refimpl.tinygrad.v0_14.record import KernelRecord, Rec, float_arg

ANSI = re.compile(r"\x1b\[[0-9;]*m")


def _dtype_name(dt: Any) -> str:
  from tinygrad.dtype import INVERSE_DTYPES_DICT
  return INVERSE_DTYPES_DICT.get(dt.name, dt.name)


def _arg(u: Any) -> Any:
  from tinygrad.uop.ops import KernelInfo, ParamArg
  a, op = u.arg, u.op.name
  if op == "CONST":
    if isinstance(a, (bool, int)): return a
    return float_arg(float(a))
  if isinstance(a, ParamArg):
    lo, hi = a.vmin_vmax if a.vmin_vmax is not None else (None, None)
    return {"slot": a.slot, "name": a.name, "min": lo, "max": hi}
  if isinstance(a, KernelInfo): return {"name": ANSI.sub("", a.name)}
  if op == "SPECIAL": return str(a)
  if op == "RANGE" and isinstance(a, tuple): return [a[0], getattr(a[-1], "name", str(a[-1]))]
  if op in ("CAST", "BITCAST") or a is None: return None
  return repr(a)


def _shape(u: Any) -> tuple[int, ...] | None:
  s = u._shape
  if s is None: return None
  if not all(isinstance(x, int) for x in s): return tuple(int(x.vmax) for x in s)  # a symbolic size: at most its vmax
  return tuple(s)


def record_of(uops: Sequence[Any], global_size=(1, 1, 1), local_size=(1, 1, 1)) -> KernelRecord:
  """The record of a linearized tinygrad 0.14 kernel (the PROGRAM's LINEAR list, or what a renderer is given) and the
  dims it was launched with."""
  require("0.14.0", "refimpl.tinygrad.v0_14")
  uops = list(uops)
  pos = {id(u): i for i, u in enumerate(uops)}
  name = next((a["name"] for a in (_arg(u) for u in uops if u.op.name == "SINK") if isinstance(a, dict)), "kernel")
  recs = tuple(Rec(u.op.name, _dtype_name(u.dtype), _shape(u), None if u.addrspace is None else u.addrspace.name, _arg(u),
                   tuple(pos[id(s)] for s in u.src)) for u in uops)
  dims = [tuple((*map(int, d), 1, 1, 1)[:3]) for d in (global_size, local_size)]
  return KernelRecord(name, recs, dims[0], dims[1])
