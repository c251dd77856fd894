"""`UOp` (one instruction) and `Program` (a linearized kernel: uops + launch dims), and the text listing.

Conventions (the verifier enforces them; see `Ops` for what each op takes):
- A program is a list; `src` holds indices of earlier uops. The list order is the execution order.
- The index dtype is int32 (`INDEX_DTYPE`): SPECIAL, RANGE, DEFINE_VAR and INDEX's index operand are int32.
- Launch: `global_size` is the number of workgroups per dimension and `local_size` the threads per workgroup
  (tinygrad's convention; an OpenCL NDRange is global_size * local_size). Both are 3-tuples of positive ints.
  A SPECIAL gidx{d} has size global_size[d], lidx{d} has size local_size[d]; a dimension larger than 1 needs its SPECIAL.
- The call signature is the buffers in DEFINE_GLOBAL number order, then the int vars in DEFINE_VAR order.
- UOp equality compares float args by their bits ignoring NaN payloads: 0.0 != -0.0, nan == nan, 1 != 1.0 != True.
"""
from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

from refimpl.dtype import DType, PtrDType, dtypes
from refimpl.ir.dtype_text import dtype_to_str
from refimpl.ir.ops import GroupOp, Ops

INDEX_DTYPE: DType = dtypes.int32


def _arg_key(arg: Any) -> Any:
  """A key that tells apart what Python's == confuses: -0.0 vs 0.0, 1 vs 1.0 vs True, and makes NaN equal to NaN."""
  if isinstance(arg, float): return ("f", "nan" if math.isnan(arg) else arg.hex())
  if isinstance(arg, tuple): return ("t", *map(_arg_key, arg))
  return (type(arg).__name__, arg)


@dataclass(frozen=True, eq=False)
class UOp:
  """One instruction: op, result dtype, src (indices of earlier uops) and arg (plain immutable data)."""
  op: Ops
  dtype: DType
  src: tuple[int, ...] = ()
  arg: Any = None

  def _key(self): return (self.op, self.dtype, self.src, _arg_key(self.arg))
  def __eq__(self, other) -> bool: return isinstance(other, UOp) and self._key() == other._key()
  def __hash__(self) -> int: return hash(self._key())


@dataclass(frozen=True)
class Program:
  """A linearized kernel. `uops` is a tuple of UOp; the signatures are derived from the uops."""
  name: str
  uops: tuple[UOp, ...]
  global_size: tuple[int, int, int] = (1, 1, 1)
  local_size: tuple[int, int, int] = (1, 1, 1)

  def __post_init__(self):
    # normalize the containers so that equal programs compare equal whatever sequence type they were built with
    for f in ("uops", "global_size", "local_size"):
      if isinstance(v := getattr(self, f), list): object.__setattr__(self, f, tuple(v))

  def __len__(self) -> int: return len(self.uops)
  def __getitem__(self, i: int) -> UOp: return self.uops[i]

  @functools.cached_property
  def buffers(self) -> dict[int, PtrDType]:
    """The buffer signature: DEFINE_GLOBAL number -> its pointer dtype (element dtype and size in elements)."""
    return {u.arg: u.dtype for u in self.uops if u.op is Ops.DEFINE_GLOBAL}

  @functools.cached_property
  def signature(self) -> tuple[PtrDType, ...]:
    """The buffers' pointer dtypes in call order (DEFINE_GLOBAL numbers ascending)."""
    return tuple(self.buffers[k] for k in sorted(self.buffers))

  @functools.cached_property
  def vars(self) -> tuple[tuple[str, int, int], ...]:
    """The int-var signature: (name, min, max) of each DEFINE_VAR, in call order."""
    return tuple(u.arg for u in self.uops if u.op is Ops.DEFINE_VAR)

  @property
  def locals(self) -> dict[str, PtrDType]:
    """DEFINE_LOCAL name -> its pointer dtype (per-workgroup memory)."""
    return {u.arg: u.dtype for u in self.uops if u.op is Ops.DEFINE_LOCAL}

  @property
  def specials(self) -> dict[str, int]:
    """SPECIAL name -> size."""
    return {u.arg[0]: u.arg[1] for u in self.uops if u.op is Ops.SPECIAL}

  def listing(self) -> str:
    """A numbered, block-indented listing: index, op, dtype, src, arg."""
    def dstr(dt):
      try: return dtype_to_str(dt)
      except (ValueError, AttributeError): return repr(dt)
    lines = [f"program {self.name}  global_size={self.global_size}  local_size={self.local_size}"]
    depth = 0
    for i, u in enumerate(self.uops):
      if u.op in GroupOp.BlockEnd: depth = max(depth - 1, 0)
      src = "[" + ", ".join(map(str, u.src)) + "]"
      arg = "" if u.arg is None else repr(u.arg)
      lines.append(f"{i:4d} {'  ' * depth}{u.op.name:<14} {dstr(u.dtype):<28} {src:<16} {arg}".rstrip())
      if u.op in GroupOp.BlockStart: depth += 1
    return "\n".join(lines)

  def __str__(self) -> str: return self.listing()
