"""THREEFRY gives Random123's threefry2x32_20 known answers. Rule: alu.threefry (SPEC.md "Decisions", row
"THREEFRY"); its emulator tests: spec_tests/semantics/test_threefry.py.

Part of the packaged conformance suite (refimpl.conformance.rules, every backend through the `backend` fixture;
the conventions: refimpl/conformance/rules/__init__.py).
"""
from refimpl.conformance.rules.common import u64
from refimpl.ir import Ops
from refimpl.testing.programs import a, ew, require


def test_threefry_matches_the_random123_known_answers(backend):
  require(backend, u64)
  # threefry2x32_20 known-answer vectors (Random123 kat_vectors): (ctr0, ctr1, key0, key1) -> (out0, out1); low word first
  kat = [((0, 0, 0, 0), (0x6b200159, 0x99ba4efe)), ((0xffffffff,) * 4, (0x1cb996fc, 0xbb002be7)),
         ((0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344), (0xc4923a9c, 0x483df7a0))]
  x = a([c1 << 32 | c0 for (c0, c1, _, _), _ in kat], u64)
  key = a([k1 << 32 | k0 for (_, _, k0, k1), _ in kat], u64)
  assert ew(backend, Ops.THREEFRY, u64, x, key).tolist() == [o1 << 32 | o0 for _, (o0, o1) in kat]
