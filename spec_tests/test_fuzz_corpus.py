"""Every reproducer in fuzz/corpus (real bugs the fuzzer found, see its README) replayed on every selected backend
(the plugin's `backend` fixture; PYTHON replays it on the emulator alone): a fixed bug stays fixed everywhere. A case
whose "open" field names a known, unfixed bug is an expected failure (strict: the test turns red when the bug is fixed,
so that "open" gets cleared)."""
from pathlib import Path

import pytest

from refimpl.fuzz.corpus import corpus_files, load_finding, replay
from refimpl.fuzz.edits import unused_declarations
from refimpl.fuzz.execute import BackendRef
from refimpl.fuzz.graph import Graph
from refimpl.ir import Ops

FILES = corpus_files()
_RUNS: dict[str, dict] = {}


def _params():
  for path in FILES:
    f = load_finding(path)  # a corrupt corpus file fails collection with its path and what is wrong
    marks = [pytest.mark.xfail(strict=True, reason=f"open bug: {f.open}")] if f.open else []
    yield pytest.param(path, marks=marks, id=path.stem)


def _runs(backend: str) -> dict:
  """{path: Result} of every corpus case on one backend (one pool of workers per backend, once per session)."""
  if backend not in _RUNS:
    findings = [load_finding(p) for p in FILES]
    _RUNS[backend] = {FILES[findings.index(r["finding"])]: r["result"] for r in replay(findings, [BackendRef(backend)])}
  return _RUNS[backend]


def test_corpus_is_not_empty():
  """Rule: fuzz/corpus holds the reproducers of the bugs found so far (at least one)."""
  assert FILES


@pytest.mark.parametrize("path", list(_params()))
def test_corpus_case_agrees_with_the_spec(backend, path):
  """Rule: a corpus case runs on the backend and agrees with the emulator by the fuzzer's comparison rules (or the
  backend declares it unsupported)."""
  r = _runs(backend)[path]
  assert r.status in ("ok", "unsupported"), f"{path.name} on {backend}: {r.status} {r.kind}: {r.detail}"


REPRODUCERS = FILES + sorted((Path(__file__).resolve().parents[1] / "docs" / "conformance" / "fuzz").rglob("*.json"))


@pytest.mark.parametrize("path", REPRODUCERS, ids=lambda p: p.stem)
def test_a_committed_reproducer_has_no_unused_buffer(path):
  """Rule (the reducer's pass 9): a reduced reproducer in fuzz/corpus or docs/conformance/fuzz (the published tinygrad
  findings) takes no kernel argument that nothing uses: no unused DEFINE_GLOBAL or DEFINE_VAR. (An unused DEFINE_LOCAL
  may stay where the failure needs it: TINYGRAD_LLVM-program---render-error is a renderer that cannot declare one.)"""
  f = load_finding(path)
  unused = [n.op for n in unused_declarations(Graph.from_program(f.case.program)) if n.op is not Ops.DEFINE_LOCAL]
  assert not unused, f.case.program.listing()
