"""The real-kernel corpus (corpus/tinygrad-0.10.1: every distinct kernel tinygrad 0.10.1 ran for workload.py on its
CLANG, GPU and PYTHON devices, captured by `python -m refimpl.tinygrad capture`). Rules:
- every case is a defined program (no undefined behaviour on its inputs) and every backend agrees with the emulator on
  it (replayed in isolated workers, as `python -m refimpl.fuzz replay` does);
- the emulator computes what tinygrad's own emulator computed, bit for bit, on every kernel whose float constants are
  exact in their dtype (where they are not, tinygrad's emulator computes with the float64 value and its C backends with
  the rounded one, and refimpl takes the C backends' side: translation rule 8);
- the case files round-trip through their JSON form."""
from pathlib import Path

import pytest

from refimpl.fuzz.corpus import finding_to_json, load_finding, replay
from refimpl.fuzz.execute import BackendRef
from refimpl.tinygrad.cases import tinygrad_outputs
from refimpl.tinygrad.reference import compare_run

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "tinygrad-0.10.1"
FILES = sorted(CORPUS.glob("*/*.json"))
IDS = [f"{p.parent.name}-{p.stem}" for p in FILES]
_RUNS: dict[str, dict] = {}


def test_the_corpus_has_real_kernels_of_every_form():
  forms = {p.parent.name for p in FILES}
  assert forms == {"CLANG", "GPU", "PYTHON"} and len(FILES) >= 150, (forms, len(FILES))


def _runs(backend: str) -> dict:
  """{path: Result} of every case on one backend (one pool of workers per backend, once per session)."""
  if backend not in _RUNS:
    findings = [load_finding(p) for p in FILES]
    _RUNS[backend] = {path: r["result"] for path, r in zip(FILES, replay(findings, [BackendRef(backend)]))}
  return _RUNS[backend]


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_real_kernel_agrees_with_the_spec(backend, path):
  r = _runs(backend)[path]
  assert r.status in ("ok", "unsupported"), f"{path.parent.name}/{path.name} on {backend}: {r.status} {r.kind}: {r.detail}"


# kernels of tinygrad's emulator whose float constants are exact (rule 8 did not rewrite one)
EXACT_CONSTANTS = [p for p in FILES if p.parent.name == "PYTHON" and "float-const" not in load_finding(p).found["rules"]]

def test_most_emulator_kernels_have_exact_constants():
  assert len(EXACT_CONSTANTS) >= 80

@pytest.mark.parametrize("path", EXACT_CONSTANTS, ids=[p.stem for p in EXACT_CONSTANTS])
def test_the_emulator_computes_what_tinygrads_emulator_computed(path):
  f = load_finding(path)
  assert compare_run(f.case.program, f.case.inputs, tinygrad_outputs(f), f.case.vals) is None


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_case_files_round_trip(path):
  assert finding_to_json(load_finding(path)) == path.read_text()
