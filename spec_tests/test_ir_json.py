"""The JSON form: exact round trips (hypothesis over random valid programs, and the float edge cases), the dtype
text form, stable output, and clear errors for malformed documents (never anything executed)."""
import json
import math
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from refimpl.dtype import dtypes
from refimpl.ir import Ops, ProgramBuilder, ProgramError, ProgramFormatError, UOp, elementwise, verify
from refimpl.ir.dtype_text import NAME_TO_DTYPE, dtype_to_str, parse_dtype
from refimpl.ir.serialize import load_program, program_from_json, program_to_json, save_program
from refimpl.ir.strategies import programs

f32 = dtypes.float32


def bits(x: float) -> int: return struct.unpack("<Q", struct.pack("<d", x))[0]


@given(programs(barrier=True))
def test_round_trip(p):
  text = program_to_json(p)
  q = program_from_json(text)
  assert q == p
  assert program_to_json(q) == text  # stable: the same program always gives the same text
  for u, v in zip(p.uops, q.uops):
    if isinstance(u.arg, float): assert (math.isnan(u.arg) and math.isnan(v.arg)) or bits(u.arg) == bits(v.arg)
    assert type(u.arg) is type(v.arg)


def test_a_move_store_round_trips():
  """Ops.STORE's MOVE arg (a carry the grid lowering introduces) is kept by the JSON form."""
  b = ProgramBuilder("moves")
  tmp = b.local_buf(f32, 2)
  b.store(tmp, b.lidx(0, 2), b.const(1.0, f32), move=True)
  p = b.build()
  assert program_from_json(program_to_json(p)) == p and p.uops[-1].arg == "move"


FLOAT_EDGES = [0.0, -0.0, math.inf, -math.inf, math.nan, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308,
               0.1, -1 / 3, 1e16, 1e-7, 2.0**-149, 3.4028234663852886e38, 65504.0, 2.0**-24]

def test_float_constants_round_trip_exactly():
  b = ProgramBuilder()
  for dt in (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64, dtypes.fp8e4m3, dtypes.fp8e5m2):
    for x in FLOAT_EDGES: b.const(x, dt)
  p = b.build()
  q = program_from_json(program_to_json(p))
  for u, v in zip(p.uops, q.uops):
    assert u.dtype == v.dtype and ((math.isnan(u.arg) and math.isnan(v.arg)) or bits(u.arg) == bits(v.arg)), (u, v)
  doc = json.loads(program_to_json(p), parse_constant=lambda s: pytest.fail(f"non-standard JSON literal {s}"))
  args = [u["arg"] for u in doc["uops"]]
  assert "nan" in args and "inf" in args and "-inf" in args and any(isinstance(a, float) and bits(a) == bits(-0.0) for a in args)


def test_integer_constants_any_size():
  b = ProgramBuilder()
  for dt in (dtypes.uint64, dtypes.int64, dtypes.int8, dtypes.bool):
    b.const(dtypes.max(dt), dt)
    b.const(dtypes.min(dt), dt)
  p = b.build()
  q = program_from_json(program_to_json(p))
  assert q == p and q.uops[0].arg == 2**64 - 1 and q.uops[3].arg == -(2**63) and q.uops[6].arg is True


def test_format_header_and_layout():
  text = program_to_json(elementwise(Ops.ADD, f32, n=4))
  doc = json.loads(text)
  head = (doc["format"], doc["version"], doc["name"], doc["global_size"], doc["local_size"])
  assert head == ("refimpl-program", 1, "E_add_4", [4, 1, 1], [1, 1, 1])
  assert '    {"op": "SPECIAL", "dtype": "int32", "src": [], "arg": ["gidx0", 4]},\n' in text  # one uop per line
  assert '    {"op": "LOAD", "dtype": "float32", "src": [4], "arg": null},\n' in text


def test_files(tmp_path):
  p = elementwise(Ops.MULACC, dtypes.float16, n=8)
  save_program(p, tmp_path / "p.json")
  assert load_program(tmp_path / "p.json") == p
  save_program(p, tmp_path / "q.json")
  assert (tmp_path / "q.json").read_text() == program_to_json(p)
  assert sorted(x.name for x in tmp_path.iterdir()) == ["p.json", "q.json"]  # no temporary files left behind


ALL_DTYPES = [*NAME_TO_DTYPE.values(), f32.vec(4), dtypes.bool.vec(2), dtypes.uint64.vec(16), f32.ptr(16),
              f32.ptr(16, local=True), dtypes.int8.ptr(1, local=True), f32.vec(4).ptr(8)]

@pytest.mark.parametrize("dt", ALL_DTYPES, ids=str)
def test_dtype_text_round_trip(dt):
  assert parse_dtype(dtype_to_str(dt)) is dt


def test_dtype_text_examples():
  assert dtype_to_str(f32.vec(4)) == "float32.vec(4)" and dtype_to_str(f32.ptr(16)) == "float32.ptr(16)"
  assert dtype_to_str(dtypes.half.ptr(16, local=True)) == "float16.ptr(16, local=True)"
  assert parse_dtype(" float32.ptr( 16 ,local=True ) ") is f32.ptr(16, local=True)
  assert parse_dtype("float32.ptr(16, local=False)") is f32.ptr(16)


@pytest.mark.parametrize("text,msg", [
  ("float33", "unknown dtype name 'float33'"), ("half", "unknown dtype name 'half'"), ("float32.vec(1)", "bad vector"),
  ("void.vec(4)", "bad vector"), ("float32.vec(4", "malformed dtype"), ("__import__('os').system('true')", "malformed dtype"),
  ("float32.ptr(16).vec(4)", "malformed dtype"), (3, "a dtype must be a string, got int")])
def test_dtype_text_errors(text, msg):
  with pytest.raises(ValueError, match=msg.replace("(", r"\(")): parse_dtype(text)


def test_dtype_text_refuses_what_the_ir_does_not_use():
  with pytest.raises(ValueError, match="image"): dtype_to_str(dtypes.imagef((2, 2, 4)))
  with pytest.raises(ValueError, match="vectors of pointers"): dtype_to_str(f32.ptr(4).vec(2))


GOOD = json.loads(program_to_json(elementwise(Ops.NEG, f32, n=4)))

def edit(fn):
  doc = json.loads(json.dumps(GOOD))
  fn(doc)
  return json.dumps(doc)

@pytest.mark.parametrize("text,msg", [
  ("{", "not valid JSON"),
  ("[]", "document: expected a JSON object, got list"),
  (edit(lambda d: d.update(format="tinygrad")), "format: expected 'refimpl-program', got 'tinygrad'"),
  (edit(lambda d: d.update(version=2)), "version: unsupported version 2 (this refimpl reads version 1)"),
  (edit(lambda d: d.update(version="1")), "version: unsupported version '1'"),
  (edit(lambda d: d.pop("version")), "version: missing"),
  (edit(lambda d: d.pop("uops")), "document: missing key(s) ['uops']"),
  (edit(lambda d: d.update(extra=1)), "document: unknown key(s) ['extra']"),
  (edit(lambda d: d.update(name=5)), "name: expected a string, got 5"),
  (edit(lambda d: d.update(global_size=[4, 1])), "global_size: expected 3 ints, got [4, 1]"),
  (edit(lambda d: d.update(uops={})), "uops: expected a list, got dict"),
  (edit(lambda d: d["uops"].__setitem__(1, [1])), "uops[1]: expected an object, got list"),
  (edit(lambda d: d["uops"][1].pop("arg")), "uops[1]: missing key(s) ['arg']"),
  (edit(lambda d: d["uops"][1].update(comment="x")), "uops[1]: unknown key(s) ['comment']"),
  (edit(lambda d: d["uops"][1].update(op="FROB")), "uops[1].op: unknown op 'FROB'"),
  (edit(lambda d: d["uops"][1].update(dtype="float128")), "uops[1].dtype: unknown dtype name 'float128'"),
  (edit(lambda d: d["uops"][3].update(src=[1, "2"])), "uops[3].src: expected a list of ints, got [1, '2']"),
  (edit(lambda d: d["uops"][3].update(src=[True])), "uops[3].src: expected a list of ints"),
  (edit(lambda d: d["uops"][3].update(arg={"a": 1})), "uops[3].arg: objects are not valid args"),
  ('{"format": "refimpl-program", "format": "refimpl-program"}', "duplicate key(s) ['format']"),
  ('{"format": NaN}', "the JSON literal NaN is not allowed"),
])
def test_malformed_documents(text, msg):
  with pytest.raises(ProgramFormatError) as e: program_from_json(text)
  assert msg in str(e.value)
  assert isinstance(e.value, ValueError)


def test_float_const_args():
  def doc(arg, dt="float32"):
    return json.dumps({**GOOD, "uops": [{"op": "CONST", "dtype": dt, "src": [], "arg": arg}], "global_size": [1, 1, 1]})
  assert program_from_json(doc(2)).uops[0] == UOp(Ops.CONST, f32, (), 2.0)  # an exact int is accepted for a float
  assert math.isinf(program_from_json(doc("-inf")).uops[0].arg)
  with pytest.raises(ProgramFormatError, match=r"uops\[0\].arg: float string must be one of"): program_from_json(doc("Infinity"))
  with pytest.raises(ProgramFormatError, match="is not exactly a float64"): program_from_json(doc(2**53 + 1, "float64"))
  with pytest.raises(ProgramError, match=r"uop 0 CONST: \[const-value\] value 0.1 is not exactly representable"):
    program_from_json(doc(0.1))
  with pytest.raises(ProgramError, match=r"an integer CONST needs an int arg, got 1\.0"): program_from_json(doc(1.0, "int32"))


def test_invalid_program_is_rejected_unless_asked():
  text = edit(lambda d: d["uops"][4].update(dtype="int32"))  # LOAD int32 from a float32 buffer
  with pytest.raises(ProgramError, match=r"uop 4 LOAD: \[load-store\]"): program_from_json(text)
  assert program_from_json(text, verify=False).uops[4].dtype == dtypes.int32


WORDS = [*(o.name for o in Ops), "float32", "int32.ptr(4)", "nan", "gidx0"]
JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
                           | st.text(max_size=8) | st.sampled_from(WORDS), lambda c: st.lists(c, max_size=3), max_leaves=6)

@given(programs(max_steps=6), st.data())
def test_mutated_documents_fail_cleanly(p, data):
  doc = json.loads(program_to_json(p))
  for _ in range(data.draw(st.integers(1, 3))):
    if data.draw(st.booleans()):
      u = doc["uops"][data.draw(st.integers(0, len(doc["uops"]) - 1))]
      u[data.draw(st.sampled_from(["op", "dtype", "src", "arg"]))] = data.draw(JSON_VALUES)
    else: doc[data.draw(st.sampled_from(["name", "global_size", "local_size", "version"]))] = data.draw(JSON_VALUES)
  try: q = program_from_json(json.dumps(doc))
  except (ProgramFormatError, ProgramError): return
  verify(q)
