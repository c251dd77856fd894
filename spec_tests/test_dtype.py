"""The dtype contract (docs/contract.md, "dtype.py") and refimpl's additions: fp8, exact truncate, numpy mapping."""
import copy
import itertools
import math
import os
import pickle
import subprocess
import sys
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.dtype import (
  DTYPES_DICT,
  INVERSE_DTYPES_DICT,
  DType,
  ImageDType,
  PtrDType,
  dtypes,
  from_np,
  least_upper_dtype,
  least_upper_float,
  promo_lattice,
  sum_acc_dtype,
  to_dtype,
  to_np,
  truncate,
)

SCALARS = sorted(set(DTYPES_DICT.values()))  # every scalar dtype except void
FLOATS, INTS = list(dtypes.floats), list(dtypes.ints)
POINTERS = [dtypes.float.ptr(), dtypes.float.ptr(16, local=True), dtypes.int.vec(4).ptr(8), dtypes.half.ptr().vec(4)]
IMAGES = [dtypes.imagef((2, 3, 4)), dtypes.imageh((8, 8, 4)), dtypes.imagef((2, 3, 4)).vec(4)]

def names(dts): return [repr(d) for d in dts]

# ---------------------------------------------------------------- the table of scalar dtypes

CONTRACT = [("void", -1, 0, "void", None), ("bool", 0, 1, "bool", "?"), ("int8", 1, 1, "signed char", "b"),
            ("uint8", 2, 1, "unsigned char", "B"), ("int16", 3, 2, "short", "h"), ("uint16", 4, 2, "unsigned short", "H"),
            ("int32", 5, 4, "int", "i"), ("uint32", 6, 4, "unsigned int", "I"), ("int64", 7, 8, "long", "q"),
            ("uint64", 8, 8, "unsigned long", "Q"), ("float16", 9, 2, "half", "e"), ("bfloat16", 10, 2, "__bf16", None),
            ("float32", 11, 4, "float", "f"), ("float64", 12, 8, "double", "d"),
            ("fp8e4m3", 9, 1, "float8_e4m3", None), ("fp8e5m2", 9, 1, "float8_e5m2", None)]

@pytest.mark.parametrize("attr,priority,itemsize,name,fmt", CONTRACT, ids=[c[0] for c in CONTRACT])
def test_scalar_dtypes_have_the_contract_fields(attr, priority, itemsize, name, fmt):
  dt = getattr(dtypes, attr)
  assert (dt.priority, dt.itemsize, dt.name, dt.fmt, dt.count, dt._scalar) == (priority, itemsize, name, fmt, 1, None)
  assert DType.new(priority, itemsize, name, fmt) is dt

def test_aliases_are_the_same_objects():
  aliases = {"half": "float16", "float": "float32", "double": "float64", "uchar": "uint8", "ushort": "uint16",
             "uint": "uint32", "ulong": "uint64", "char": "int8", "short": "int16", "int": "int32", "long": "int64"}
  for alias, attr in aliases.items(): assert getattr(dtypes, alias) is getattr(dtypes, attr)

def test_dtype_tuples_group_the_scalars():
  assert dtypes.floats == (dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64)
  assert dtypes.uints == (dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64)
  assert dtypes.sints == (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64)
  assert dtypes.ints == dtypes.uints + dtypes.sints
  assert set(SCALARS) == set(dtypes.floats + dtypes.ints + (dtypes.bool,))

def test_dtypes_dict_maps_every_attribute_name_but_void_and_defaults():
  assert dtypes.fields() is DTYPES_DICT
  assert set(DTYPES_DICT) == {c[0] for c in CONTRACT if c[0] != "void"} | {
    "half", "float", "double", "uchar", "ushort", "uint", "ulong", "char", "short", "int", "long"}
  for k, v in DTYPES_DICT.items(): assert getattr(dtypes, k) is v

def test_inverse_dtypes_dict_maps_c_names_to_the_c_style_alias():
  assert INVERSE_DTYPES_DICT == {"bool": "bool", "signed char": "char", "unsigned char": "uchar", "short": "short",
                                 "unsigned short": "ushort", "int": "int", "unsigned int": "uint", "long": "long",
                                 "unsigned long": "ulong", "half": "half", "__bf16": "bfloat16", "float": "float",
                                 "double": "double", "float8_e4m3": "fp8e4m3", "float8_e5m2": "fp8e5m2", "void": "void"}

def test_dtype_order_is_by_priority_then_itemsize_name_fmt_count():
  assert names(sorted(SCALARS + [dtypes.void], reverse=True)[::-1]) == [
    "dtypes.void", "dtypes.bool", "dtypes.char", "dtypes.uchar", "dtypes.short", "dtypes.ushort", "dtypes.int", "dtypes.uint",
    "dtypes.long", "dtypes.ulong", "dtypes.fp8e4m3", "dtypes.fp8e5m2", "dtypes.half", "dtypes.bfloat16", "dtypes.float",
    "dtypes.double"]
  assert dtypes.float < dtypes.float.vec(2) < dtypes.float.vec(4) < dtypes.double
  assert dtypes.int <= dtypes.int and dtypes.float >= dtypes.int and not dtypes.int > dtypes.int

# ---------------------------------------------------------------- interning, pickling, repr

EVERY_KIND = [dtypes.float, dtypes.void, dtypes.bool.vec(3), dtypes.half.vec(16), *POINTERS, *IMAGES]

def test_constructing_equal_dtypes_returns_the_same_object():
  assert DType(11, 4, "float", "f", 1, None) is dtypes.float32
  assert DType(priority=11, itemsize=4, name="float", fmt="f", count=1, _scalar=None) is dtypes.float32
  assert dtypes.float.vec(4) is dtypes.float.vec(4)
  assert dtypes.float.ptr(16, local=True) is dtypes.float.ptr(size=16, local=True)
  assert dtypes.float.ptr() is PtrDType(11, 4, "float", "f", 1, None, dtypes.float, False, 1)
  assert dtypes.float.ptr().vec(4) is dtypes.float.ptr().vec(4)
  assert dtypes.imagef((2, 3, 4)) is dtypes.imagef([2, 3, 4])
  assert dtypes.float.ptr(16) is not dtypes.float.ptr(17) and dtypes.float.ptr() is not dtypes.float.ptr(local=True)

@pytest.mark.parametrize("dt", EVERY_KIND, ids=names(EVERY_KIND))
def test_pickle_and_copy_round_trip_to_the_interned_object(dt):
  assert pickle.loads(pickle.dumps(dt)) is dt
  assert copy.copy(dt) is dt and copy.deepcopy(dt) is dt

def test_pickle_in_a_fresh_process_gives_the_interned_object():
  blob = pickle.dumps([dtypes.float.vec(4), dtypes.imagef((2, 3, 4)), dtypes.half.ptr(16, local=True).vec(2)])
  code = ("import pickle, sys; from refimpl.dtype import dtypes; d = pickle.loads(sys.stdin.buffer.read()); "
          "print(d[0] is dtypes.float.vec(4), d[1] is dtypes.imagef((2, 3, 4)), d[2] is dtypes.half.ptr(16, local=True).vec(2))")
  out = subprocess.run([sys.executable, "-c", code], input=blob, capture_output=True, check=True).stdout.decode()
  assert out.split() == ["True", "True", "True"]

REPRS = {dtypes.float: "dtypes.float", dtypes.int8: "dtypes.char", dtypes.bfloat16: "dtypes.bfloat16", dtypes.void: "dtypes.void",
         dtypes.float.vec(4): "dtypes.float.vec(4)", dtypes.float.ptr(): "dtypes.float.ptr()",
         dtypes.float.ptr(16): "dtypes.float.ptr(16)", dtypes.float.ptr(local=True): "dtypes.float.ptr(local=True)",
         dtypes.float.ptr(16, local=True).vec(4): "dtypes.float.ptr(16, local=True).vec(4)",
         dtypes.int.vec(2).ptr(): "dtypes.int.vec(2).ptr()", dtypes.imagef((2, 3, 4)): "dtypes.imagef((2, 3, 4))",
         dtypes.imageh((2, 3)).vec(4): "dtypes.imageh((2, 3)).vec(4)"}

@pytest.mark.parametrize("dt", list(REPRS), ids=list(REPRS.values()))
def test_repr_is_the_expression_that_builds_the_dtype(dt):
  assert repr(dt) == REPRS[dt]
  assert eval(repr(dt), {"dtypes": dtypes}) is dt

def test_repr_of_an_unregistered_dtype_is_its_constructor():
  assert repr(DType.new(20, 3, "custom", None)) == "DType.new(20, 3, 'custom', None)"

# ---------------------------------------------------------------- vec, ptr, images

@pytest.mark.parametrize("dt", SCALARS, ids=names(SCALARS))
def test_vec_builds_a_vector_named_like_c(dt):
  v = dt.vec(4)
  assert (v.count, v.vcount, v.itemsize, v.priority, v.fmt) == (4, 4, 4 * dt.itemsize, dt.priority, None)
  assert v.name == INVERSE_DTYPES_DICT[dt.name] + "4" and v.scalar() is dt and v.base is v
  assert dt.scalar() is dt and dt.base is dt and dt.vcount == 1
  assert dt.vec(1) is dt

def test_vec_of_void_is_void():
  assert dtypes.void.vec(4) is dtypes.void

def test_vectorising_a_vector_raises_value_error():
  with pytest.raises(ValueError, match="already a vector"): dtypes.float.vec(4).vec(2)
  with pytest.raises(ValueError, match="already a vector"): dtypes.float.vec(4).vec(1)
  with pytest.raises(ValueError, match="already a vector of pointers"): dtypes.float.ptr().vec(4).vec(2)
  with pytest.raises(ValueError, match=">= 1"): dtypes.float.vec(0)
  with pytest.raises(ValueError, match=">= 1"): dtypes.float.ptr().vec(-1)

def test_ptr_records_base_size_and_local():
  p = dtypes.half.ptr(16, local=True)
  assert isinstance(p, PtrDType) and (p.base, p.size, p.local, p.v, p.vcount) == (dtypes.half, 16, True, 1, 1)
  assert (p.priority, p.itemsize, p.name, p.fmt, p.count) == (dtypes.half.priority, 2, "half", "e", 1)
  assert dtypes.half.ptr().size == -1 and not dtypes.half.ptr().local
  pv = p.vec(4)
  assert (pv.base, pv.v, pv.vcount, pv.size, pv.local, pv.count) == (dtypes.half, 4, 4, 16, True, 1)
  assert pv.scalar() is p and p.vec(1) is p
  q = dtypes.half.vec(4).ptr()
  assert q.base is dtypes.half.vec(4) and q.count == 4 and q.vcount == 1

def test_ptr_of_a_pointer_raises():
  with pytest.raises(ValueError, match="pointer"): dtypes.float.ptr().ptr()

def test_image_dtypes_are_float32_pointers_sized_by_shape():
  for img, itemsize, fmt in [(dtypes.imagef((2, 3, 4)), 4, "f"), (dtypes.imageh((2, 3, 4)), 2, "e")]:
    assert isinstance(img, ImageDType) and isinstance(img, PtrDType)
    assert (img.priority, img.itemsize, img.fmt, img.base, img.size, img.shape, img.local) == (
      100, itemsize, fmt, dtypes.float32, 24, (2, 3, 4), False)
    assert dtypes.is_float(img) and img.ptr() is img
    assert img.vec(4).base is dtypes.float32 and img.vec(4).shape == (2, 3, 4)

def test_images_refuse_local():
  with pytest.raises(ValueError, match="local"): dtypes.imagef((2, 3, 4)).ptr(local=True)

# ---------------------------------------------------------------- classification, from_py, as_const, min/max, finfo

@pytest.mark.parametrize("dt", SCALARS, ids=names(SCALARS))
def test_is_float_is_int_is_unsigned_follow_the_tuples_and_ignore_vector_width(dt):
  for d in (dt, dt.vec(4)):
    assert dtypes.is_float(d) == (dt in dtypes.floats)
    assert dtypes.is_int(d) == (dt in dtypes.ints)
    assert dtypes.is_unsigned(d) == (dt in dtypes.uints)

def test_pointers_are_not_numbers_but_images_are_floats():
  for p in POINTERS: assert not dtypes.is_float(p) and not dtypes.is_int(p) and not dtypes.is_unsigned(p)
  for img in IMAGES: assert dtypes.is_float(img) and not dtypes.is_int(img)

def test_from_py_maps_python_types_and_takes_the_max_of_sequences():
  assert dtypes.from_py(True) is dtypes.bool and dtypes.from_py(3) is dtypes.default_int
  assert dtypes.from_py(3.0) is dtypes.default_float
  assert dtypes.from_py([True, 1]) is dtypes.default_int and dtypes.from_py((1, [2.0, [True]])) is dtypes.default_float
  assert dtypes.from_py([]) is dtypes.default_float and dtypes.from_py([[True], (False,)]) is dtypes.bool
  for bad in ["1", None, np.float32(1), 1j]:
    with pytest.raises(RuntimeError, match="Could not infer dtype"): dtypes.from_py(bad)

@pytest.mark.parametrize("dt", SCALARS, ids=names(SCALARS))
def test_as_const_coerces_to_the_python_type_of_the_dtype(dt):
  py_type = int if dt in dtypes.ints else float if dt in dtypes.floats else bool
  for val in (True, 0, 3, 2.0):
    got = dtypes.as_const(val, dt)
    assert type(got) is py_type and got == py_type(val)
  got = dtypes.as_const((1, 0, 2.0), dt.vec(3))
  assert isinstance(got, tuple) and got == tuple(py_type(v) for v in (1, 0, 2.0))
  assert all(type(g) is py_type for g in got)

def test_as_const_rejects_a_tuple_of_the_wrong_length():
  with pytest.raises(ValueError, match="lanes"): dtypes.as_const((1, 2), dtypes.int.vec(3))

@pytest.mark.parametrize("dt", SCALARS, ids=names(SCALARS))
def test_min_max_are_the_full_int_range_inf_for_floats_and_false_true_for_bool(dt):
  bits = 8 * dt.itemsize
  expected = {**{d: (0, 2**bits - 1) for d in dtypes.uints}, **{d: (-2**(bits - 1), 2**(bits - 1) - 1) for d in dtypes.sints},
              **{d: (-math.inf, math.inf) for d in dtypes.floats}, dtypes.bool: (False, True)}[dt]
  for d in (dt, dt.vec(4)):  # a vector's range is its scalar's
    assert (dtypes.min(d), dtypes.max(d)) == expected and type(dtypes.min(d)) is type(expected[0])

def test_min_max_of_images_are_float_and_of_void_or_pointers_raise():
  assert (dtypes.min(IMAGES[0]), dtypes.max(IMAGES[0])) == (-math.inf, math.inf)
  for dt in [dtypes.void, dtypes.float.ptr(), dtypes.int.ptr(4).vec(2)]:
    with pytest.raises(ValueError, match="holds no values"): dtypes.min(dt)
    with pytest.raises(ValueError, match="holds no values"): dtypes.max(dt)

FINFO = {dtypes.fp8e4m3: (4, 3), dtypes.fp8e5m2: (5, 2), dtypes.float16: (5, 10), dtypes.bfloat16: (8, 7),
         dtypes.float32: (8, 23), dtypes.float64: (11, 52)}

@pytest.mark.parametrize("dt", SCALARS, ids=names(SCALARS))
def test_finfo_is_exponent_and_mantissa_bits_and_rejects_non_floats(dt):
  if dt in FINFO:
    assert dtypes.finfo(dt) == dtypes.finfo(dt.vec(2)) == FINFO[dt]
    e, m = FINFO[dt]
    assert 1 + e + m == 8 * dt.itemsize  # the bits add up to the storage
    assert (ml_dtypes.finfo(to_np(dt)).nexp, ml_dtypes.finfo(to_np(dt)).nmant) == (e, m)
  else:
    with pytest.raises(ValueError, match="float"): dtypes.finfo(dt)

def test_finfo_of_an_image_is_its_storage_format():
  assert dtypes.finfo(dtypes.imageh((2, 2))) == (5, 10) and dtypes.finfo(dtypes.imagef((2, 2))) == (8, 23)
  with pytest.raises(ValueError): dtypes.finfo("float")

# ---------------------------------------------------------------- to_dtype and DEFAULT_FLOAT

def test_to_dtype_takes_attribute_names_in_any_case_and_passes_dtypes_through():
  assert to_dtype("float32") is dtypes.float32 and to_dtype("HALF") is dtypes.float16 and to_dtype("Void") is dtypes.void
  assert to_dtype("fp8e4m3") is dtypes.fp8e4m3 and to_dtype(dtypes.int.vec(2)) is dtypes.int.vec(2)
  for bad in ["float128", "default_float", "is_float", "imagef"]:
    with pytest.raises(ValueError, match="unknown dtype name"): to_dtype(bad)

def _default_float_in_subprocess(value):
  env = {k: v for k, v in os.environ.items() if k != "DEFAULT_FLOAT"}
  if value is not None: env["DEFAULT_FLOAT"] = value
  return subprocess.run([sys.executable, "-c", "from refimpl.dtype import dtypes; print(repr(dtypes.default_float))"],
                        env=env, capture_output=True, text=True)

def test_default_float_env_sets_default_float_at_import():
  assert _default_float_in_subprocess(None).stdout.strip() == "dtypes.float"
  assert _default_float_in_subprocess("HALF").stdout.strip() == "dtypes.half"
  bad = _default_float_in_subprocess("INT32")
  assert bad.returncode != 0 and "not a float dtype" in bad.stderr

# ---------------------------------------------------------------- the promotion lattice

def lattice_ancestors(dt):
  """BFS over promo_lattice: dt and everything reachable from it (independent of the code under test)."""
  seen, todo = {dt}, [dt]
  while todo:
    for parent in promo_lattice[todo.pop()]:
      if parent not in seen: seen.add(parent); todo.append(parent)
  return seen

def minimal_common_ancestors(*ds):
  common = set.intersection(*(lattice_ancestors(d) for d in ds))
  return {c for c in common if not any(o is not c and c in lattice_ancestors(o) for o in common)}

FORK = {dtypes.float16, dtypes.bfloat16}

def expected_lub(*ds):
  """The unique least common ancestor; on the float16/bfloat16 fork (two minimal ones) the tie goes to float16."""
  lcas = minimal_common_ancestors(*ds)
  if len(lcas) == 1: return lcas.pop()
  assert lcas == FORK, f"ambiguity outside the float16/bfloat16 fork: {ds} -> {lcas}"
  return dtypes.float16

PAIRS = list(itertools.combinations_with_replacement(SCALARS, 2))
TRIPLES = list(itertools.combinations_with_replacement(SCALARS, 3))

def test_promo_lattice_covers_every_scalar_and_points_upward_in_dtype_order():
  assert set(promo_lattice) == set(SCALARS)
  for dt, parents in promo_lattice.items():
    for p in parents: assert dt < p, f"{dt} -> {p} goes down in dtype order"  # so min() picks a minimal ancestor
  assert lattice_ancestors(dtypes.bool) == set(SCALARS) - {dtypes.fp8e4m3, dtypes.fp8e5m2}

def test_promo_lattice_sends_fp8_to_float16_and_bfloat16_and_nothing_to_fp8():
  for fp8 in (dtypes.fp8e4m3, dtypes.fp8e5m2):
    assert promo_lattice[fp8] == [dtypes.float16, dtypes.bfloat16]
    assert [d for d in SCALARS if fp8 in lattice_ancestors(d)] == [fp8]
    # both half formats hold every finite fp8 value exactly
    vals = np.arange(256, dtype=np.uint8).view(to_np(fp8)).astype(np.float64)
    vals = vals[np.isfinite(vals)]
    for wide in (dtypes.float16, dtypes.bfloat16): assert all(exact_round(v, wide) == v for v in vals.tolist())

@pytest.mark.parametrize("ds", PAIRS + TRIPLES, ids=[",".join(map(repr, t)).replace("dtypes.", "") for t in PAIRS + TRIPLES])
def test_least_upper_dtype_is_the_least_common_ancestor_in_any_order(ds):
  want = expected_lub(*ds)
  for perm in itertools.permutations(ds): assert least_upper_dtype(*perm) is want

def test_least_upper_dtype_is_idempotent_and_an_upper_bound():
  for dt in SCALARS: assert least_upper_dtype(dt) is dt and least_upper_dtype(dt, dt, dt) is dt
  for ds in PAIRS + TRIPLES:
    lub = least_upper_dtype(*ds)
    assert all(lub in lattice_ancestors(d) for d in ds)
    assert least_upper_dtype(lub, *ds) is lub

def test_least_upper_dtype_is_unique_except_on_the_float16_bfloat16_fork():
  ambiguous = {ds for ds in PAIRS if len(minimal_common_ancestors(*ds)) > 1}
  assert all(minimal_common_ancestors(*ds) == FORK for ds in ambiguous)
  # exactly the pairs whose only common ancestors are the fork and what lies above it
  above_fork = FORK | {dtypes.float32, dtypes.float64}
  assert ambiguous == {ds for ds in PAIRS if set.intersection(*map(lattice_ancestors, ds)) == above_fork}
  for a, b in [(dtypes.int64, dtypes.uint64), (dtypes.fp8e4m3, dtypes.fp8e5m2), (dtypes.int8, dtypes.uint64),
               (dtypes.fp8e4m3, dtypes.bool), (dtypes.fp8e5m2, dtypes.int64)]:
    assert least_upper_dtype(a, b) is dtypes.float16

def test_least_upper_dtype_is_associative_where_the_pair_has_a_least_common_ancestor():
  for a, b, c in itertools.product(SCALARS, repeat=3):
    common = set.intersection(lattice_ancestors(a), lattice_ancestors(b))
    ab = least_upper_dtype(a, b)
    if lattice_ancestors(ab) == common: assert least_upper_dtype(ab, c) is least_upper_dtype(a, b, c), (a, b, c)
    else: assert least_upper_dtype(ab, c) in lattice_ancestors(least_upper_dtype(a, b, c))  # the fold is never below n-ary

def test_least_upper_dtype_is_not_associative_across_the_fork():
  assert least_upper_dtype(least_upper_dtype(dtypes.int64, dtypes.uint64), dtypes.bfloat16) is dtypes.float32
  assert least_upper_dtype(dtypes.int64, dtypes.uint64, dtypes.bfloat16) is dtypes.bfloat16
  assert least_upper_dtype(least_upper_dtype(dtypes.fp8e4m3, dtypes.fp8e5m2), dtypes.bfloat16) is dtypes.float32

def test_least_upper_dtype_fp8_examples():
  assert least_upper_dtype(dtypes.fp8e4m3, dtypes.bfloat16) is dtypes.bfloat16
  assert least_upper_dtype(dtypes.fp8e5m2, dtypes.float16) is dtypes.float16
  assert least_upper_dtype(dtypes.fp8e4m3, dtypes.float32) is dtypes.float32

def test_least_upper_dtype_lets_the_first_image_win():
  img, img2 = dtypes.imagef((2, 2, 4)), dtypes.imageh((4, 4, 4))
  assert least_upper_dtype(dtypes.float64, img) is img and least_upper_dtype(img, img2, dtypes.int8) is img
  assert least_upper_dtype(img2, img) is img2

def test_least_upper_dtype_rejects_non_lattice_dtypes():
  for bad in [dtypes.void, dtypes.float.vec(4), dtypes.float.ptr()]:
    with pytest.raises(ValueError, match="promotion lattice"): least_upper_dtype(dtypes.float, bad)
  with pytest.raises(ValueError, match="at least one"): least_upper_dtype()

@pytest.mark.parametrize("dt", SCALARS, ids=names(SCALARS))
def test_least_upper_float_keeps_floats_and_joins_the_rest_with_float32(dt):
  assert least_upper_float(dt) is (dt if dt in dtypes.floats else expected_lub(dt, dtypes.float32))
  if dt not in dtypes.floats: assert least_upper_float(dt) is dtypes.float32

@pytest.mark.parametrize("dt", SCALARS, ids=names(SCALARS))
def test_sum_acc_dtype_joins_unsigned_with_uint32_ints_and_bool_with_int32_floats_with_float32(dt):
  partner = dtypes.uint32 if dt in dtypes.uints else dtypes.int32 if dt in dtypes.sints or dt is dtypes.bool else dtypes.float32
  assert sum_acc_dtype(dt) is expected_lub(dt, partner)
  want = {dtypes.uint64: dtypes.uint64, dtypes.int64: dtypes.int64, dtypes.float64: dtypes.float64}
  assert sum_acc_dtype(dt) is want.get(dt, dtypes.uint32 if dt in dtypes.uints else dtypes.int32 if partner is dtypes.int32
                                       else dtypes.float32)

# ---------------------------------------------------------------- truncate

def same(a, b):
  """Equal as stored values: NaN equals NaN, and -0.0 differs from 0.0."""
  if isinstance(a, float) and math.isnan(a): return isinstance(b, float) and math.isnan(b)
  return type(a) is type(b) and a == b and (not isinstance(a, float) or math.copysign(1, a) == math.copysign(1, b))

FORMATS = {dt: (*FINFO[dt], dt is not dtypes.fp8e4m3) for dt in FINFO}  # (exponent bits, mantissa bits, has inf)

def fmt_max(dt):
  e, m, has_inf = FORMATS[dt]
  emax = 2**(e - 1) - 1 + (0 if has_inf else 1)  # e4m3fn uses the top exponent for numbers, all but mantissa 111
  return Fraction(2**(m + 1) - (1 if has_inf else 2), 2**m) * Fraction(2)**emax

def exact_round(x, dt):
  """x (an int or a float, taken exactly) rounded once to nearest even in dt's format, as if the exponent were
  unbounded above; results beyond the largest finite value overflow to inf, or to NaN where dt has no inf."""
  e, m, has_inf = FORMATS[dt]
  if isinstance(x, float) and math.isnan(x): return math.nan
  sign = math.copysign(1.0, x) if isinstance(x, float) else -1.0 if x < 0 else 1.0
  if isinstance(x, float) and math.isinf(x): return sign * math.inf if has_inf else math.nan
  a = abs(Fraction(x))
  if a == 0: return sign * 0.0
  exp = a.numerator.bit_length() - a.denominator.bit_length()
  if Fraction(2)**exp > a: exp -= 1
  quantum = Fraction(2)**(max(exp, 2 - 2**(e - 1)) - m)  # subnormals share the smallest normal exponent's quantum
  v = round(a / quantum) * quantum  # Fraction rounds halves to even
  if v > fmt_max(dt): return sign * math.inf if has_inf else math.nan
  return sign * float(v)

def edge_values(dt):
  """Per-format boundary values: zeros, subnormal ties, 1 +- half ulps, the overflow tie and around it, inf, NaN."""
  e, m, _ = FORMATS[dt]
  tiny, mx = Fraction(2)**(2 - 2**(e - 1) - m), fmt_max(dt)
  ulp_max = Fraction(2)**(math.floor(math.log2(mx)) - m)
  halves = [tiny / 2, tiny, tiny * 3 / 2, tiny * 5 / 2, tiny * 2**m, tiny * (2**m - Fraction(1, 2)),
            1 + Fraction(1, 2**(m + 1)), 1 + Fraction(3, 2**(m + 1)), 1 - Fraction(1, 2**(m + 2)), mx, mx + ulp_max / 2, mx * 2]
  vals = [0.0, -0.0, 1.0, math.inf, -math.inf, math.nan, 1e308, 5e-324]
  for h in halves:
    if h >= Fraction(2)**1024 - Fraction(2)**970: continue  # rounds beyond float64
    f = float(h)
    vals += [f, -f, math.nextafter(f, math.inf), math.nextafter(f, 0)]
  return vals

@pytest.mark.parametrize("dt", FLOATS, ids=names(FLOATS))
def test_truncate_rounds_edge_values_to_nearest_even_once(dt):
  for x in edge_values(dt): assert same(truncate[dt](x), exact_round(x, dt)), (x, truncate[dt](x), exact_round(x, dt))

def test_truncate_rounds_once_where_rounding_through_float32_would_tie():
  """Rule: one rounding from the exact value. Each x lies just above a tie of the target whose float32 rounding *is*
  that tie, so rounding through float32 first would go to the even neighbour below."""
  for x, dt, want in ((1 + 2**-8 + 2**-30, dtypes.bfloat16, 1 + 2**-7), (1 + 2**-4 + 2**-40, dtypes.fp8e4m3, 1.125),
                      (1 + 2**-11 + 2**-40, dtypes.float16, 1 + 2**-10)):
    assert truncate[dt](x) == exact_round(x, dt) == want, (dt, x)
  assert truncate[dtypes.float32](2**60 + 2**36 + 1) == 2**60 + 2**37  # an int is not rounded to float64 first

def test_truncate_fp8e4m3_overflows_to_nan_and_fp8e5m2_to_inf():
  f = truncate[dtypes.fp8e4m3]
  assert f(448.0) == 448.0 and f(464.0) == 448.0 and math.isnan(f(464.0001)) and math.isnan(f(-1e9))
  assert math.isnan(f(math.inf)) and math.isnan(f(-math.inf)) and math.isnan(f(2**2000))
  g = truncate[dtypes.fp8e5m2]
  assert g(57344.0) == 57344.0 and g(61439.0) == 57344.0 and g(61440.0) == math.inf and g(-1e9) == -math.inf

def near_ties(dt, lo_shift, hi_shift):
  """Ints a few units from a rounding tie of dt's precision: (2*mantissa + 1) * 2**shift + delta."""
  m = FORMATS[dt][1]
  return st.builds(lambda mant, shift, delta, neg: (-1 if neg else 1) * (((2 * mant + 1) << shift) + delta),
                   st.integers(2**m, 2**(m + 1) - 1), st.integers(lo_shift, hi_shift), st.integers(-3, 3), st.booleans())

@pytest.mark.parametrize("dt", FLOATS, ids=names(FLOATS))
@settings(deadline=None)
@given(data=st.data())
def test_truncate_float64_inputs_match_exact_rounding(dt, data):
  near_tie = st.builds(lambda i, k: math.ldexp(float(i), k), near_ties(dt, 1, 30), st.integers(-60, 20))
  x = data.draw(st.floats(allow_nan=True, allow_infinity=True) | st.floats(-1e6, 1e6) | st.floats(-1e-6, 1e-6) | near_tie)
  assert same(truncate[dt](x), exact_round(x, dt))

@pytest.mark.parametrize("dt", FLOATS, ids=names(FLOATS))
@settings(deadline=None)
@given(x=st.floats(width=32))
def test_truncate_float32_inputs_round_once_to_nearest_even(dt, x):
  got = truncate[dt](x)
  assert same(got, exact_round(x, dt))
  assert same(truncate[dt](got), got)  # what truncate returns is a value of dt

@pytest.mark.parametrize("dt", FLOATS, ids=names(FLOATS))
@settings(deadline=None)
@given(data=st.data())
def test_truncate_int_inputs_to_floats_match_exact_rounding(dt, data):
  wide = st.integers(-2**130, 2**130) | st.integers(-2**70, 2**70) | st.integers(-2**1100, 2**1100)
  x = data.draw(wide | near_ties(dt, 1, 200))
  assert same(truncate[dt](x), exact_round(x, dt))

INT_EDGES = [0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32769, 65535, 65536, 2**31 - 1, 2**31, -2**31 - 1,
             2**32 - 1, 2**32, 2**63 - 1, 2**63, -2**63 - 1, 2**64 - 1, 2**64, 2**100 + 5, -2**100 - 5, True, False]

def numpy_wrap(x, dt):
  """numpy's int cast keeps the low bits: go through uint64 (x mod 2**64) and cast."""
  return np.array(int(x) % 2**64, dtype=np.uint64).astype(to_np(dt)).item()

@pytest.mark.parametrize("dt", INTS, ids=names(INTS))
def test_truncate_ints_wrap_like_twos_complement_casts(dt):
  for x in INT_EDGES: assert same(truncate[dt](x), numpy_wrap(x, dt)), x
  lo, hi = dtypes.min(dt), dtypes.max(dt)
  assert truncate[dt](hi + 1) == lo and truncate[dt](lo - 1) == hi and truncate[dt](np.int64(-1)) == (hi if lo == 0 else -1)

@pytest.mark.parametrize("dt", INTS, ids=names(INTS))
@given(x=st.integers(-2**70, 2**70))
def test_truncate_ints_wrap_for_random_ints(dt, x):
  assert same(truncate[dt](x), numpy_wrap(x, dt))

def test_truncate_to_an_int_refuses_floats():
  with pytest.raises(TypeError, match="takes an int"): truncate[dtypes.int8](1.5)

def test_truncate_bool_coerces_by_nonzero():
  f = truncate[dtypes.bool]
  assert [f(v) for v in (0, 3, -0.0, 0.5, math.nan, math.inf, False)] == [False, True, False, True, True, True, False]

def test_truncate_covers_every_scalar_dtype():
  assert set(truncate) == set(SCALARS)

# ---------------------------------------------------------------- numpy mapping

NP_EXPECTED = {dtypes.bool: np.bool_, dtypes.int8: np.int8, dtypes.uint8: np.uint8, dtypes.int16: np.int16,
               dtypes.uint16: np.uint16, dtypes.int32: np.int32, dtypes.uint32: np.uint32, dtypes.int64: np.int64,
               dtypes.uint64: np.uint64, dtypes.float16: np.float16, dtypes.bfloat16: ml_dtypes.bfloat16,
               dtypes.float32: np.float32, dtypes.float64: np.float64, dtypes.fp8e4m3: ml_dtypes.float8_e4m3fn,
               dtypes.fp8e5m2: ml_dtypes.float8_e5m2}

@pytest.mark.parametrize("dt", SCALARS, ids=names(SCALARS))
def test_to_np_and_from_np_round_trip_every_scalar(dt):
  npdt = to_np(dt)
  assert npdt == np.dtype(NP_EXPECTED[dt]) and npdt.itemsize == dt.itemsize
  if dt.fmt is not None: assert np.dtype(dt.fmt) == npdt  # agrees with the struct format
  assert from_np(npdt) is dt and from_np(NP_EXPECTED[dt]) is dt and from_np(npdt.name) is dt

def test_to_np_refuses_void_pointers_vectors_and_images():
  for dt, msg in [(dtypes.void, "no numpy dtype"), (dtypes.float.ptr(), "pointer"), (dtypes.float.vec(4), "vector"),
                  (dtypes.imagef((2, 2, 4)), "pointer")]:
    with pytest.raises(ValueError, match=msg): to_np(dt)

def test_from_np_refuses_unsupported_numpy_dtypes():
  for bad, msg in [(np.complex64, "no refimpl dtype"), (object, "no refimpl dtype"), (np.longdouble, "no refimpl dtype"),
                   (ml_dtypes.float8_e4m3fnuz, "no refimpl dtype"), (np.dtype(">i4"), "byte order"), ("U4", "no refimpl dtype"),
                   (None, "None"), ("garbage", "not a numpy dtype")]:
    with pytest.raises(ValueError, match=msg): from_np(bad)
