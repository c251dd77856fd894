"""The real-kernel corpora (corpus/tinygrad-0.10.1: every distinct kernel tinygrad 0.10.1 ran for workload.py on its
CLANG, GPU and PYTHON devices, captured by `python -m refimpl.tinygrad capture`; corpus/tinygrad-0.14.0: tinygrad
0.14's PYTHON, CPU and CL kernels of the same workload, whose own rules are in test_tinygrad14_import.py). Rules:
- every case is a defined program (no undefined behaviour on its inputs) and every backend agrees with the emulator on
  it (replayed in isolated workers, as `python -m refimpl.fuzz replay` does);
- the emulator computes what tinygrad's own emulator computed, bit for bit, on every kernel whose float constants are
  exact in their dtype (where they are not, tinygrad's emulator computes with the float64 value and its C backends with
  the rounded one, and refimpl takes the C backends' side: translation rule 8);
- the case files round-trip through their JSON form."""
import fcntl
import json
import os
from pathlib import Path

import pytest

from refimpl.fuzz.corpus import finding_to_json, load_finding, replay
from refimpl.fuzz.execute import BackendRef
from refimpl.tinygrad.cases import tinygrad_outputs
from refimpl.tinygrad.program import compare_run

CORPUS = Path(__file__).resolve().parents[1] / "corpus" / "tinygrad-0.10.1"
CORPUS_14 = CORPUS.parent / "tinygrad-0.14.0"  # tinygrad 0.14's PYTHON, CPU, CL kernels (test_tinygrad14_import.py)
FILES = sorted(CORPUS.glob("*/*.json")) + sorted(CORPUS_14.glob("*/*.json"))
IDS = [f"{p.parent.name}-{p.stem}" if p.is_relative_to(CORPUS) else f"0.14-{p.parent.name}-{p.stem}" for p in FILES]
_RUNS: dict[str, dict[str, list[str]]] = {}


def test_the_corpus_has_real_kernels_of_every_form():
  forms = {p.parent.name for p in FILES if p.is_relative_to(CORPUS)}
  assert forms == {"CLANG", "GPU", "PYTHON"} and len(FILES) >= 150, (forms, len(FILES))
  assert all(len(list(CORPUS_14.glob(f"{d}/*.json"))) >= 90 for d in ("PYTHON", "CPU", "CL"))


def _replay(backend: str) -> dict[str, list[str]]:
  """{file name: [status, kind, detail]} of every case on one backend (one pool of workers)."""
  findings = [load_finding(p) for p in FILES]
  results = (r["result"] for r in replay(findings, [BackendRef(backend)], jobs=os.cpu_count() or 1))
  return {str(path): [r.status, r.kind, r.detail] for path, r in zip(FILES, results)}

def _runs(backend: str, shared: Path | None) -> dict[str, list[str]]:
  """The corpus replayed on one backend once per session. Under pytest-xdist the workers of one run share it through
  a JSON file in `shared` (the first to ask replays while the others wait on its lock), so each backend replays once."""
  if backend in _RUNS: return _RUNS[backend]
  if shared is None:
    _RUNS[backend] = _replay(backend)
    return _RUNS[backend]
  done = shared / f"corpus-replay-{backend}.json"
  with open(shared / f"corpus-replay-{backend}.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not done.exists(): done.write_text(json.dumps(_replay(backend)))
    _RUNS[backend] = json.loads(done.read_text())
  return _RUNS[backend]

@pytest.fixture(scope="session")
def shared_dir(tmp_path_factory) -> Path | None:
  """A folder every xdist worker of this test run sees (None when the run has no workers)."""
  run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
  if run is None: return None
  folder = tmp_path_factory.getbasetemp().parent / f"refimpl-{run}"
  folder.mkdir(exist_ok=True)
  return folder


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_real_kernel_agrees_with_the_spec(backend, path, shared_dir):
  status, kind, detail = _runs(backend, shared_dir)[str(path)]
  assert status in ("ok", "unsupported"), f"{path.parent.name}/{path.name} on {backend}: {status} {kind}: {detail}"


# kernels of tinygrad's emulator whose float constants are exact (rule 8 did not rewrite one)
EXACT_CONSTANTS = [p for p in FILES if p.is_relative_to(CORPUS) and p.parent.name == "PYTHON" and
                   "float-const" not in load_finding(p).found["rules"]]

def test_most_emulator_kernels_have_exact_constants():
  assert len(EXACT_CONSTANTS) >= 80

@pytest.mark.parametrize("path", EXACT_CONSTANTS, ids=[p.stem for p in EXACT_CONSTANTS])
def test_the_emulator_computes_what_tinygrads_emulator_computed(path):
  f = load_finding(path)
  assert compare_run(f.case.program, f.case.inputs, tinygrad_outputs(f), f.case.vals) is None


@pytest.mark.parametrize("path", FILES, ids=IDS)
def test_case_files_round_trip(path):
  assert finding_to_json(load_finding(path)) == path.read_text()
