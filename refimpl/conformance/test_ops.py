"""Every backend against the spec, op by op and dtype by dtype (refimpl.testing.differential).

For each selected backend (see --backend) and each case (ALU op x operand dtype, CAST and BITCAST pairs), one compiled
kernel serves:
  - the sweep: every input / pair of 8-bit inputs / 16-bit input where that fits one launch, else every edge value
    (tuple) plus random values, in one launch of 65536 lanes;
  - hypothesis examples (a few per case; the `thorough` profile runs many), shrunk to a single lane on failure.
Undefined lanes are never run or compared. Results go to the conformance report (--conformance-report)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from refimpl.device import Device
from refimpl.errors import NotTranslatable
from refimpl.sweep.chunk import run_chunk
from refimpl.sweep.plan import sweep_cases
from refimpl.testing.differential import OpCase, alu_cases, bitcast_cases, cast_cases, harness, supported, sweep_inputs
from refimpl.testing.values import value_strategy

CASES = alu_cases() + cast_cases() + bitcast_cases()

def _run_sweep(backend: str, case: OpCase, conformance) -> None:
  if not supported(backend, case):
    conformance.record(backend, case.id, "unsupported", f"{backend} does not support the dtypes of {case.id}")
    pytest.skip(f"{backend} does not support {case.id}")
  inputs = sweep_inputs(case)
  try:
    h = harness(backend, case)
    verdict = h.check(inputs)
  except NotTranslatable: raise  # refimpl's limit: "not tested" (the plugin records it), never the device's failure
  except Exception as e:  # a supported case that does not render, compile or run is a failure, in the report too
    conformance.record(backend, case.id, "fail", f"{backend}: {case.id} does not run: {type(e).__name__}: {e}")
    raise
  report = "" if verdict.ok else h.failure_report(inputs, verdict)
  if not verdict.ok and case.op in Device[backend].renderer.inexact_ops:  # declared by the device: reported, not failed
    conformance.record(backend, case.id, "relaxed", report, verdict.checked)
    pytest.xfail(f"{backend} declares {case.op.name} inexact (Renderer.inexact_ops)")
  conformance.record(backend, case.id, "pass" if verdict.ok else "fail", report, verdict.checked)
  assert verdict.ok, report

@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_backend_matches_the_spec_on_the_sweep(backend, case, conformance):
  _run_sweep(backend, case, conformance)

def _lanes(case: OpCase):
  """Up to 8 lanes of inputs for the case, each operand from its edge-biased strategy (shrinks towards one lane)."""
  return st.lists(st.tuples(*(value_strategy(dt) for dt in case.input_dtypes)), min_size=1, max_size=8).map(
    lambda rows: [np.array([r[k] for r in rows], dtype=np.asarray(rows[0][k]).dtype) for k in range(len(case.input_dtypes))])

HYPOTHESIS_CASES = alu_cases() + [c for c in cast_cases() if c.dtype.itemsize >= 4]

@pytest.mark.parametrize("case", HYPOTHESIS_CASES, ids=lambda c: c.id)
def test_backend_matches_the_spec_on_hypothesis_examples(backend, case, conformance):
  if not supported(backend, case): pytest.skip(f"{backend} does not support {case.id}")
  h = harness(backend, case)
  examples = max(3, settings().max_examples // 40)

  @settings(max_examples=examples, database=None)
  @given(inputs=_lanes(case))
  def check(inputs):
    verdict = h.check(inputs)
    report = "" if verdict.ok else h.failure_report(inputs, verdict)
    if not verdict.ok: conformance.record(backend, case.id, "fail", report)
    assert verdict.ok, report
  check()

# *** the `thorough` profile: every float32 input of each unary float op and float32 cast (as the OpenCL CTS sweeps) ***

THOROUGH = getattr(settings, "_current_profile", None) == "thorough"
CHUNK = 1 << 20

# collected with the `thorough` profile only (hours per backend): other profiles have no such test, rather than a skip
if THOROUGH:
  @pytest.mark.parametrize("case", sweep_cases(), ids=lambda c: c.id)
  def test_backend_matches_the_spec_on_every_float32_input(backend, case, conformance):
    """The chunks of refimpl.sweep, run in this process (`python -m refimpl.sweep` runs them resumably, in parallel)."""
    if not supported(backend, case): pytest.skip(f"{backend} does not support {case.id}")
    checked = 0
    for start in range(0, 1 << 32, CHUNK):
      rec = run_chunk(case.id, start, CHUNK, ((backend, None),))["backends"][backend]
      if rec["status"] != "pass":
        report = f"{backend}: {case.id} on the float32 inputs {start:#x}..{start + CHUNK - 1:#x}: {rec}"
        conformance.record(backend, case.id, "fail", report)
        pytest.fail(report)
      checked += rec["checked"]
    conformance.record(backend, case.id, "pass", "", checked)
