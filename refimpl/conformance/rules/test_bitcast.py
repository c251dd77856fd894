"""BITCAST keeps every bit (NaN payloads, signalling NaNs, -0). Rule: alu.bitcast (SPEC.md "Decisions", row
"BITCAST"); its emulator tests: spec_tests/semantics/test_bitcast.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
import numpy as np
import pytest

from refimpl.conformance.rules.common import ALL, bf16, bl, f16, f32, f64, i32, i64, u64
from refimpl.device import Device
from refimpl.dtype import dtypes, to_np
from refimpl.ir import Ops, dtype_to_str
from refimpl.testing.differential import OpCase, local_size_for
from refimpl.testing.programs import ew, ops_kernel, require, run
from refimpl.testing.values import from_bits, to_bits


@pytest.mark.parametrize("src, dst", [(f16, dtypes.int16), (f16, bf16), (bf16, dtypes.uint16), (dtypes.fp8e4m3, dtypes.uint8),
                                      (dtypes.fp8e5m2, dtypes.int8), (dtypes.fp8e4m3, dtypes.fp8e5m2)], ids=dtype_to_str)
def test_bitcast_keeps_every_bit_pattern(backend, src, dst):
  require(backend, src, dst)
  bits = np.arange(1 << (8 * src.itemsize))
  x = from_bits(bits, src)
  assert (to_bits(ew(backend, Ops.BITCAST, src, x, out_dtype=dst)) == bits).all()  # NaN payloads and signalling NaNs included
  assert (to_bits(ew(backend, Ops.BITCAST, dst, from_bits(bits, dst), out_dtype=src)) == bits).all()

def test_bitcast_of_32_and_64_bit_floats_keeps_bits(backend):
  require(backend, f64)
  rng = np.random.default_rng(11)
  b32 = np.concatenate([rng.integers(0, 2**32, 2000, dtype=np.uint64), [0x7f800001, 0xffc00001, 0x80000000, 1]])
  b64 = np.concatenate([rng.integers(0, 2**63, 2000, dtype=np.uint64) * 2 + 1, [0x7ff0000000000001]]).astype(np.uint64)
  assert (ew(backend, Ops.BITCAST, f32, from_bits(b32, f32), out_dtype=dtypes.uint32) == b32).all()
  assert (to_bits(ew(backend, Ops.BITCAST, i32, from_bits(b32, i32), out_dtype=f32)) == b32).all()
  assert (ew(backend, Ops.BITCAST, f64, from_bits(b64, f64), out_dtype=u64) == b64).all()
  assert (to_bits(ew(backend, Ops.BITCAST, i64, from_bits(b64, i64), out_dtype=f64)) == b64).all()

def test_every_bitcast_pair_keeps_every_bit(backend):
  """BITCAST between every same-size pair the device supports, in one kernel: every pattern of 8/16-bit sources (NaN
  payloads and signalling NaNs of the narrow formats included), random patterns of 32/64-bit ones."""
  dev = Device[backend]
  pairs = [(s, d) for s in ALL for d in ALL if s != d and s.itemsize == d.itemsize and bl not in (s, d)
           and dev.supports_dtype(s) and dev.supports_dtype(d)]
  n = 1 << 16
  rng = np.random.default_rng(9)
  pattern = {1: np.arange(n) % 256, 2: np.arange(n), 4: rng.integers(0, 2**32, n, dtype=np.uint64),
             8: rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64)}
  arrays = []
  for s, d in pairs: arrays += [np.zeros(n, to_np(d)), from_bits(pattern[s.itemsize], s)]
  got = run(backend, ops_kernel("bitcasts", [OpCase(Ops.BITCAST, s, d) for s, d in pairs], n,
                                     local_size=local_size_for(backend, n)), *arrays)
  for (s, d), g in zip(pairs, got[0::2]):
    assert (to_bits(g).astype(np.uint64) == pattern[s.itemsize].astype(np.uint64)).all(), f"BITCAST {s.name} -> {d.name}"
