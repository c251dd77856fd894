"""The dtype system: tinygrad 0.10.1's dtype contract (see docs/contract.md, "dtype.py"), plus fp8 and a numpy mapping.

Decisions beyond the contract (each is tested in spec_tests/test_dtype.py):

- fp8: `dtypes.fp8e4m3` is ml_dtypes' `float8_e4m3fn` ("fn" = finite: no inf, NaN is 0x7f/0xff, max 448);
  `dtypes.fp8e5m2` is IEEE-like `float8_e5m2` (has inf, max 57344). Both share float16's priority (9) and
  sort before it by itemsize, so the contract's priorities are unchanged and the dtype order stays a linear
  extension of the promotion lattice. In the lattice each fp8 format promotes to {float16, bfloat16} (both
  hold every fp8 value exactly); nothing promotes *to* fp8.
- The contract lattice is not a true lattice: int64 and uint64 both go to {float16, bfloat16}, so a pair such
  as (int64, uint64) has two minimal common ancestors. `least_upper_dtype` breaks that tie as tinygrad
  does, by taking the lowest common ancestor in dtype order (float16). The fp8 formats sit on the same fork.
  Consequence: least_upper_dtype is commutative and idempotent but not associative across the fork, e.g.
  lub(lub(int64, uint64), bfloat16) = float32 while lub(int64, uint64, bfloat16) = bfloat16.
- `truncate` rounds exactly once, to nearest even, from the exact Python value (a Python int of any size
  or a float64). ml_dtypes converts float64 arrays (and bfloat16 scalars) through float32, which rounds
  twice; we round to odd into float32 first, which makes the final rounding exact. From float32 inputs
  the result is what ml_dtypes gives. Overflow gives ±inf, except for fp8e4m3, which has no inf: there a
  value that rounds beyond 448 (|x| > 464; 464 itself is a tie and goes to 448) becomes NaN, as in ml_dtypes.
- `dtypes.min`/`max` of every float (fp8e4m3 too) are ±inf as the contract says; note that truncating ±inf
  to fp8e4m3 gives NaN. For vectors they use the scalar's width (0.10.1 used the vector's itemsize).
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math
import operator
import os
from collections.abc import Callable
from typing import Any

import ml_dtypes
import numpy as np

ConstType = float | int | bool
FmtStr = str  # a struct/memoryview format character

class _Interned(type):
  """Metaclass: constructing a DType with arguments already seen returns the object built the first time."""
  _cache: dict[tuple, Any] = {}

  def __call__(cls, *args: Any, **kwargs: Any) -> Any:
    bound = _init_signature(cls).bind(None, *args, **kwargs)
    bound.apply_defaults()
    key = (cls, *tuple(bound.arguments.values())[1:])
    ret = _Interned._cache.get(key)
    if ret is None: ret = _Interned._cache.setdefault(key, super().__call__(*args, **kwargs))
    return ret

@functools.cache
def _init_signature(cls: type) -> inspect.Signature: return inspect.signature(cls.__init__)

@dataclasses.dataclass(frozen=True, eq=False)
class DType(metaclass=_Interned):
  priority: int  # rank in promotion order; ties broken by the rest of the sort key
  itemsize: int  # bytes (for a vector: of the whole vector)
  name: str      # the C name, e.g. "float", "unsigned char"; vectors: "float4"
  fmt: FmtStr | None
  count: int
  _scalar: DType | None

  @staticmethod
  def new(priority: int, itemsize: int, name: str, fmt: FmtStr | None) -> DType:
    return DType(priority, itemsize, name, fmt, 1, None)

  def __reduce__(self): return type(self), tuple(getattr(self, f.name) for f in dataclasses.fields(self))
  def __repr__(self) -> str:
    if self.count > 1: return f"{self.scalar()!r}.vec({self.count})"
    attr = INVERSE_DTYPES_DICT.get(self.name)
    return f"dtypes.{attr}" if attr is not None else f"DType.new({self.priority}, {self.itemsize}, {self.name!r}, {self.fmt!r})"

  def _key(self) -> tuple: return (self.priority, self.itemsize, self.name, self.fmt or "", self.count)
  def __lt__(self, o: DType) -> bool: return self._key() < o._key()
  def __gt__(self, o: DType) -> bool: return self._key() > o._key()
  def __le__(self, o: DType) -> bool: return self is o or self < o
  def __ge__(self, o: DType) -> bool: return self is o or self > o

  @property
  def base(self) -> DType: return self
  @property
  def vcount(self) -> int: return self.count
  def scalar(self) -> DType: return self if self._scalar is None else self._scalar

  def vec(self, sz: int) -> DType:
    if self.count != 1: raise ValueError(f"can't vectorize {self!r}: it is already a vector")
    if sz < 1: raise ValueError(f"vector size must be >= 1, got {sz}")
    if sz == 1 or self is dtypes.void: return self
    return DType(self.priority, self.itemsize * sz, f"{INVERSE_DTYPES_DICT.get(self.name, self.name)}{sz}", None, sz, self)

  def ptr(self, size: int = -1, local: bool = False) -> PtrDType:
    return PtrDType(self.priority, self.itemsize, self.name, self.fmt, self.count, None, self, local, 1, size)

@dataclasses.dataclass(frozen=True, eq=False)
class PtrDType(DType):
  _base: DType  # the pointee
  local: bool   # points into local (workgroup) memory
  v: int        # vector width of the pointer itself
  size: int = -1  # elements; -1 = unbounded

  @property
  def base(self) -> DType: return self._base
  @property
  def vcount(self) -> int: return self.v
  def ptr(self, size: int = -1, local: bool = False) -> PtrDType:
    raise ValueError(f"can't make a pointer to the pointer {self!r}")

  def vec(self, sz: int) -> PtrDType:
    if self.v != 1: raise ValueError(f"can't vectorize {self!r}: it is already a vector of pointers")
    if sz < 1: raise ValueError(f"vector size must be >= 1, got {sz}")
    if sz == 1: return self
    return dataclasses.replace(self, v=sz, _scalar=self)

  def __repr__(self) -> str:
    args = ([str(self.size)] if self.size != -1 else []) + (["local=True"] if self.local else [])
    return f"{self.base!r}.ptr({', '.join(args)})" + (f".vec({self.v})" if self.v != 1 else "")

@dataclasses.dataclass(frozen=True, eq=False)
class ImageDType(PtrDType):
  shape: tuple[int, ...] = ()

  def ptr(self, size: int = -1, local: bool = False) -> PtrDType:
    if local: raise ValueError(f"images can't be local: {self!r}")
    return self
  def __repr__(self) -> str: return f"dtypes.{self.name}({self.shape})" + (f".vec({self.v})" if self.v != 1 else "")

class dtypes:
  """Every dtype by name, and the questions asked about dtypes."""
  void = DType.new(-1, 0, "void", None)
  bool = DType.new(0, 1, "bool", "?")
  int8 = DType.new(1, 1, "signed char", "b")
  uint8 = DType.new(2, 1, "unsigned char", "B")
  int16 = DType.new(3, 2, "short", "h")
  uint16 = DType.new(4, 2, "unsigned short", "H")
  int32 = DType.new(5, 4, "int", "i")
  uint32 = DType.new(6, 4, "unsigned int", "I")
  int64 = DType.new(7, 8, "long", "q")
  uint64 = DType.new(8, 8, "unsigned long", "Q")
  fp8e4m3 = DType.new(9, 1, "float8_e4m3", None)  # ml_dtypes.float8_e4m3fn: no inf, max 448
  fp8e5m2 = DType.new(9, 1, "float8_e5m2", None)  # ml_dtypes.float8_e5m2: IEEE-like, max 57344
  float16 = DType.new(9, 2, "half", "e")
  bfloat16 = DType.new(10, 2, "__bf16", None)
  float32 = DType.new(11, 4, "float", "f")
  float64 = DType.new(12, 8, "double", "d")
  half, float, double = float16, float32, float64
  uchar, ushort, uint, ulong = uint8, uint16, uint32, uint64
  char, short, int, long = int8, int16, int32, int64

  floats = (fp8e4m3, fp8e5m2, float16, bfloat16, float32, float64)
  uints = (uint8, uint16, uint32, uint64)
  sints = (int8, int16, int32, int64)
  ints = uints + sints
  default_float: DType = float32
  default_int: DType = int32

  @staticmethod
  def imageh(shp: tuple[int, ...]) -> ImageDType:
    return ImageDType(100, 2, "imageh", "e", 1, None, dtypes.float32, False, 1, math.prod(shp), tuple(shp))
  @staticmethod
  def imagef(shp: tuple[int, ...]) -> ImageDType:
    return ImageDType(100, 4, "imagef", "f", 1, None, dtypes.float32, False, 1, math.prod(shp), tuple(shp))

  @staticmethod
  def is_float(x: DType) -> bool: return x.scalar() in _FLOATS or isinstance(x, ImageDType)
  @staticmethod
  def is_int(x: DType) -> bool: return x.scalar() in _INTS
  @staticmethod
  def is_unsigned(x: DType) -> bool: return x.scalar() in _UINTS

  @staticmethod
  def from_py(x: Any) -> DType:
    """The dtype a Python constant gets: bool, default_int, default_float; a (nested) list/tuple gets the max."""
    if x.__class__ is float: return dtypes.default_float
    if x.__class__ is int: return dtypes.default_int
    if x.__class__ is bool: return dtypes.bool
    if x.__class__ is list or x.__class__ is tuple: return max(dtypes.from_py(xi) for xi in x) if x else dtypes.default_float
    raise RuntimeError(f"Could not infer dtype of {x!r} with type {type(x)}")

  @staticmethod
  def as_const(val: tuple[ConstType, ...] | ConstType, dtype: DType) -> tuple[ConstType, ...] | ConstType:
    """val coerced to the Python type of dtype (int, float or bool); a tuple (one per lane) for vectors."""
    if isinstance(val, tuple):
      if len(val) != dtype.count: raise ValueError(f"{len(val)} values for {dtype!r}, which has {dtype.count} lanes")
      return tuple(dtypes.as_const(x, dtype) for x in val)
    if dtypes.is_int(dtype): return int(val)
    return float(val) if dtypes.is_float(dtype) else bool(val)

  @staticmethod
  def min(dtype: DType) -> ConstType:
    """The smallest value: ints their full range, floats -inf, bool False."""
    _check_value_dtype(dtype)
    if dtypes.is_int(dtype): return 0 if dtypes.is_unsigned(dtype) else -2**(8 * dtype.scalar().itemsize - 1)
    return -math.inf if dtypes.is_float(dtype) else False
  @staticmethod
  def max(dtype: DType) -> ConstType:
    """The largest value: ints their full range, floats inf, bool True."""
    _check_value_dtype(dtype)
    if dtypes.is_int(dtype): return 2**(8 * dtype.scalar().itemsize) - 1 + dtypes.min(dtype)
    return math.inf if dtypes.is_float(dtype) else True

  @staticmethod
  def finfo(dtype: DType) -> tuple[int, int]:
    """(exponent bits, mantissa bits) of a float dtype (an image: of its storage format)."""
    if not isinstance(dtype, DType) or not dtypes.is_float(dtype): raise ValueError(f"finfo needs a float dtype, got {dtype!r}")
    return _FINFO[_IMAGE_STORAGE[dtype.fmt] if isinstance(dtype, ImageDType) else dtype.scalar()]

  @staticmethod
  def fields() -> dict[str, DType]: return DTYPES_DICT

_FLOATS, _INTS, _UINTS = frozenset(dtypes.floats), frozenset(dtypes.ints), frozenset(dtypes.uints)
_FINFO = {dtypes.fp8e4m3: (4, 3), dtypes.fp8e5m2: (5, 2), dtypes.float16: (5, 10), dtypes.bfloat16: (8, 7),
          dtypes.float32: (8, 23), dtypes.float64: (11, 52)}
_IMAGE_STORAGE = {"e": dtypes.float16, "f": dtypes.float32}

def _check_value_dtype(dtype: DType) -> None:
  if dtype.scalar() is dtypes.void or (isinstance(dtype, PtrDType) and not isinstance(dtype, ImageDType)):
    raise ValueError(f"{dtype!r} holds no values")

# attribute name -> dtype, aliases included (they come after the names they alias); not void, not default_*
DTYPES_DICT: dict[str, DType] = {k: v for k, v in vars(dtypes).items()
                                 if isinstance(v, DType) and not k.startswith(("default", "void"))}
# C name -> attribute name; where an alias exists, the alias (C-style) wins: "float" -> "float", "long" -> "long"
INVERSE_DTYPES_DICT: dict[str, str] = {**{v.name: k for k, v in DTYPES_DICT.items()}, "void": "void"}

DTypeLike = str | DType

def to_dtype(dtype: DTypeLike) -> DType:
  """A DType, or an attribute name of dtypes (any case, aliases included, 'void' too)."""
  if isinstance(dtype, DType): return dtype
  ret = {**DTYPES_DICT, "void": dtypes.void}.get(dtype.lower())
  if ret is None: raise ValueError(f"unknown dtype name {dtype!r}; known: {', '.join(DTYPES_DICT)}, void")
  return ret

_env_default_float = os.environ.get("DEFAULT_FLOAT", "")
if _env_default_float:
  dtypes.default_float = to_dtype(_env_default_float)
  if not dtypes.is_float(dtypes.default_float): raise ValueError(f"DEFAULT_FLOAT={_env_default_float} is not a float dtype")

# JAX-style promotion lattice without weak types: each dtype -> the dtypes it promotes to directly.
promo_lattice: dict[DType, list[DType]] = {
  dtypes.bool: [dtypes.int8, dtypes.uint8], dtypes.int8: [dtypes.int16], dtypes.int16: [dtypes.int32],
  dtypes.int32: [dtypes.int64], dtypes.int64: [dtypes.float16, dtypes.bfloat16],
  dtypes.uint8: [dtypes.int16, dtypes.uint16], dtypes.uint16: [dtypes.int32, dtypes.uint32],
  dtypes.uint32: [dtypes.int64, dtypes.uint64], dtypes.uint64: [dtypes.float16, dtypes.bfloat16],
  dtypes.fp8e4m3: [dtypes.float16, dtypes.bfloat16], dtypes.fp8e5m2: [dtypes.float16, dtypes.bfloat16],
  dtypes.float16: [dtypes.float32], dtypes.bfloat16: [dtypes.float32], dtypes.float32: [dtypes.float64], dtypes.float64: []}

@functools.cache
def _ancestors(dtype: DType) -> frozenset[DType]:
  """dtype and everything it promotes to, transitively."""
  if dtype not in promo_lattice: raise ValueError(f"{dtype!r} is not in the promotion lattice (scalars other than void only)")
  return frozenset({dtype}).union(*(_ancestors(p) for p in promo_lattice[dtype]))

@functools.cache
def least_upper_dtype(*ds: DType) -> DType:
  """The least common ancestor in promo_lattice (the first image dtype among ds wins). Where two common
  ancestors are both minimal (the float16/bfloat16 fork), the lower in dtype order (float16) is taken."""
  if not ds: raise ValueError("least_upper_dtype needs at least one dtype")
  images = [d for d in ds if isinstance(d, ImageDType)]
  if images: return images[0]
  return min(frozenset.intersection(*(_ancestors(d) for d in ds)))

def least_upper_float(dt: DType) -> DType: return dt if dtypes.is_float(dt) else least_upper_dtype(dt, dtypes.float32)

def sum_acc_dtype(dt: DType) -> DType:
  """The accumulator of a sum: unsigned -> lub with uint32, int or bool -> lub with int32, else lub with float32."""
  if dtypes.is_unsigned(dt): return least_upper_dtype(dt, dtypes.uint32)
  if dtypes.is_int(dt) or dt is dtypes.bool: return least_upper_dtype(dt, dtypes.int32)
  return least_upper_dtype(dt, dtypes.float32)

# ---- numpy mapping (scalars only) ----

_NP_OF: dict[DType, np.dtype] = {dt: np.dtype(t) for dt, t in {
  dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16, dtypes.uint16: np.uint16,
  dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64, dtypes.uint64: np.uint64,
  dtypes.fp8e4m3: ml_dtypes.float8_e4m3fn, dtypes.fp8e5m2: ml_dtypes.float8_e5m2, dtypes.float16: np.float16,
  dtypes.bfloat16: ml_dtypes.bfloat16, dtypes.float32: np.float32, dtypes.float64: np.float64}.items()}
_DT_OF_NP_NAME: dict[str, DType] = {npdt.name: dt for dt, npdt in _NP_OF.items()}

def to_np(dtype: DType) -> np.dtype:
  """The numpy dtype storing a scalar dtype (bfloat16 and fp8 from ml_dtypes; fp8e4m3 is float8_e4m3fn)."""
  if isinstance(dtype, PtrDType): raise ValueError(f"pointer dtype {dtype!r} has no numpy dtype; use its .base")
  if dtype.count != 1:
    raise ValueError(f"vector dtype {dtype!r} has no numpy dtype; use .scalar() and a trailing axis of {dtype.count}")
  if dtype not in _NP_OF: raise ValueError(f"{dtype!r} has no numpy dtype")
  return _NP_OF[dtype]

def from_np(np_dtype: Any) -> DType:
  """The dtype of a numpy dtype (or anything np.dtype() accepts) in native byte order."""
  if np_dtype is None: raise ValueError("from_np(None): None is not a numpy dtype")  # np.dtype(None) would be float64
  try: d = np.dtype(np_dtype)
  except TypeError as e: raise ValueError(f"{np_dtype!r} is not a numpy dtype") from e
  if not d.isnative: raise ValueError(f"numpy dtype {d!r} is not in native byte order")
  ret = _DT_OF_NP_NAME.get(d.name)
  if ret is None or _NP_OF[ret] != d:
    raise ValueError(f"numpy dtype {d!r} has no refimpl dtype; supported: {', '.join(_DT_OF_NP_NAME)}")
  return ret

# ---- truncate: a Python value -> the value the dtype stores ----

def _wrap_int(bits: int, signed: bool) -> Callable[[Any], int]:
  """Two's complement wrap-around to `bits` bits. Takes ints (bool and numpy ints too), not floats."""
  mod, off = 1 << bits, (1 << (bits - 1)) if signed else 0
  def wrap(x: Any) -> int:
    try: return (operator.index(x) + off) % mod - off
    except TypeError: raise TypeError(f"truncate to a {bits}-bit int takes an int, got {type(x).__name__} {x!r}") from None
  return wrap

def _to_double(x: Any, odd: bool) -> float:
  """x as a float64. A Python int too wide for 53 bits is rounded to nearest even (odd=False) or,
  for a later narrower rounding, to odd (odd=True); beyond float64's range it becomes ±inf."""
  if not isinstance(x, (int, np.integer)): return float(x)
  x = int(x)
  a, sign = abs(x), -1.0 if x < 0 else 1.0
  if a.bit_length() <= 53: return float(x)
  if a.bit_length() > 1024 or not odd:
    try: return float(x)
    except OverflowError: return sign * math.inf
  shift = a.bit_length() - 53
  m = (a >> shift) | (1 if a & ((1 << shift) - 1) else 0)  # truncate, then set the last bit if anything was lost
  return sign * math.ldexp(float(m), shift)

def _round_odd_f32(x: float) -> np.float32:
  """x rounded to float32 by round-to-odd: exact values stay, others go to the neighbour with an odd last bit.
  Rounding this once more to a format at least 2 bits narrower is the same as rounding x directly."""
  with np.errstate(over="ignore"): f = np.float32(x)
  if math.isnan(x) or float(f) == x: return f
  if abs(float(f)) > abs(x): f = np.nextafter(f, np.float32(0))
  if int(f.view(np.uint32)) & 1 == 0: f = np.nextafter(f, np.float32(math.copysign(math.inf, x)))
  return f

def _round_float(np_type: type) -> Callable[[Any], float]:
  if np_type is np.float64: return lambda x: _to_double(x, odd=False)
  if np_type is np.float32:
    def to_f32(x: Any) -> float:
      with np.errstate(over="ignore"): return float(np.float32(_to_double(x, odd=True)))
    return to_f32
  def to_narrow(x: Any) -> float:
    with np.errstate(over="ignore"): return float(np_type(_round_odd_f32(_to_double(x, odd=True))))
  return to_narrow

truncate: dict[DType, Callable[[Any], Any]] = {
  dtypes.bool: bool,
  **{dt: _wrap_int(8 * dt.itemsize, dt in dtypes.sints) for dt in dtypes.ints},
  **{dt: _round_float(_NP_OF[dt].type) for dt in dtypes.floats}}
