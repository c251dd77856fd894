"""`eval_op`: evaluate one ALU, CAST or BITCAST op elementwise over numpy arrays, on any device.

On PYTHON the emulator runs the op and raises UndefinedBehavior for undefined lanes. On every other device the inputs are
first checked against the spec's undefined domains (the emulator's own rule, refimpl.emulator.alu), and UndefinedBehavior
is raised before any native code runs: a SIGFPE from an integer division by zero must never kill the caller."""
from __future__ import annotations

import functools

import numpy as np

from refimpl.device import Device
from refimpl.dtype import DType, from_np, to_np
from refimpl.errors import UndefinedBehavior
from refimpl.ir import GroupOp, Ops, elementwise

CONVERSIONS = (Ops.CAST, Ops.BITCAST)

def _operand_dtype(op: Ops, dts: list[DType]) -> DType:
  """The op's operand dtype (for WHERE the value dtype), with a clear error when operands disagree."""
  values = dts[1:] if op is Ops.WHERE else dts
  if len(set(values)) != 1:
    raise TypeError(f"{op.name} needs operands of one dtype, got {', '.join(repr(d) for d in values)}")
  return values[0]

def _arity(op: Ops) -> int:
  if op in CONVERSIONS or op in GroupOp.Unary: return 1
  return 2 if op in GroupOp.Binary else 3

@functools.lru_cache(maxsize=256)
def _kernel(op: Ops, operand: DType, out: DType | None, n: int, device: str):
  from refimpl.runner import Kernel
  from refimpl.testing.differential import local_size_for
  return Kernel(elementwise(op, operand, n=n, out_dtype=out, local_size=local_size_for(device, n)), device)

def _check_undefined(op: Ops, operand: DType, out: DType | None, arrays: list[np.ndarray]) -> None:
  """Raises UndefinedBehavior (lane = flat element index) when any element is in the op's undefined domain."""
  from refimpl.emulator import alu
  if op is Ops.CAST: outcome = alu.exec_cast(arrays[0], operand, out)
  elif op is Ops.BITCAST: outcome = alu.exec_bitcast(arrays[0], operand, out)
  else: outcome = alu.exec_alu(op, operand, *arrays)
  if outcome.undefined is None or not outcome.undefined.any(): return
  bad = np.flatnonzero(outcome.undefined)
  lane = int(bad[0])
  raise UndefinedBehavior(op, None, lane, tuple(a[lane].item() for a in arrays), outcome.reason, count=len(bad),
                          kind=outcome.kind)

EVALUABLE = sorted(o.name for o in Ops if o in GroupOp.ALU or o in CONVERSIONS)

def _as_op(op: Ops | str) -> Ops:
  """An Ops member, or its name as a string ("ADD", "add"); a clear error listing what eval_op takes otherwise."""
  if isinstance(op, str):
    if op.upper() not in Ops.__members__: raise ValueError(f"{op!r} is not an op; eval_op takes one of {', '.join(EVALUABLE)}")
    op = Ops[op.upper()]
  if not isinstance(op, Ops): raise TypeError(f"op must be an Ops member or its name, e.g. Ops.ADD or 'ADD'; got {op!r}")
  if op not in GroupOp.ALU and op not in CONVERSIONS:
    raise ValueError(f"eval_op evaluates one ALU op, CAST or BITCAST ({', '.join(EVALUABLE)}); {op.name} is none of them")
  return op

def _as_dtype(dtype) -> DType | None:
  """A refimpl DType, or what numpy takes as a dtype (np.float16, "int8", ml_dtypes.bfloat16), or None."""
  if dtype is None or isinstance(dtype, DType): return dtype
  try: return from_np(dtype)
  except ValueError as e: raise TypeError(f"dtype must be a refimpl dtype (dtypes.float16) or a numpy one: {e}") from None

def eval_op(op: Ops | str, *inputs, dtype: DType | None = None, device: str = "PYTHON") -> np.ndarray:
  """`op` (an Ops member or its name) applied elementwise to `inputs` (numpy arrays or scalars, broadcast together;
  operand dtypes from the arrays, ml_dtypes included). `dtype` (a refimpl or numpy dtype) is the target of CAST and
  BITCAST. Returns an array of the result dtype, the inputs' shape."""
  op, dtype = _as_op(op), _as_dtype(dtype)
  if len(inputs) != _arity(op): raise TypeError(f"{op.name} takes {_arity(op)} operands, got {len(inputs)}")
  if op in CONVERSIONS and dtype is None:
    raise TypeError(f"{op.name} needs the target dtype: eval_op(..., dtype=dtypes.X or a numpy dtype)")
  arrays = [np.asarray(x) for x in inputs]
  shape = np.broadcast_shapes(*(a.shape for a in arrays))
  flat = [np.ascontiguousarray(np.broadcast_to(a, shape)).reshape(-1) for a in arrays]
  if flat[0].size == 0: raise ValueError("eval_op needs at least one element")
  operand = _operand_dtype(op, [from_np(a.dtype) for a in flat])
  out_dtype = dtype if op in CONVERSIONS else None
  name = Device.canonicalize(device)
  if name.split(":")[0] != "PYTHON": _check_undefined(op, operand, out_dtype, flat)
  kernel = _kernel(op, operand, out_dtype, flat[0].size, name)
  out = np.zeros(flat[0].size, to_np(kernel.program.buffers[0].base))
  try: result = kernel(out, *flat)[0]
  except UndefinedBehavior as e:  # one thread per element: report it as an op-level fault, lane = element index
    at = e.origin or e  # a deferred kind is reported where the op's value is stored: the op itself is its origin
    raise UndefinedBehavior(op, None, at.lane, at.operands, at.reason, e.count, e.kind) from None
  return result.reshape(shape)
