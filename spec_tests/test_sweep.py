"""The float32 sweep (refimpl.sweep): a sweep killed (SIGKILL) or interrupted (Ctrl-C) and rerun redoes no finished
chunk; a wrong backend's violations come with their inputs; a backend that kills its worker loses only its own record;
a device that does not open is tried again; a corrupt chunk file is named and redone; chunks run as Dask tasks give
the records local workers give; the published tables count what the chunk files hold. Small sweeps: chunks of 2^12
inputs over a --range of the float32 space, as subprocesses (the CLI, its spawned workers)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from refimpl.sweep import report, store
from refimpl.sweep.plan import SPACE

THIRD_PARTY = Path(__file__).parent / "third_party"
ONE = 0x3F800000            # the bits of 1.0f
BITS = 12                   # chunks of 4096 inputs in these tests
PLANTED = "sweep_planted:SqrtUlpClang"

def _env() -> dict:
  path = os.pathsep.join([str(THIRD_PARTY), *sys.path])
  return {**os.environ, "PYTHONPATH": path}

def sweep(out: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess:
  cmd = [sys.executable, "-m", "refimpl.sweep", "--out", str(out), "--chunk-bits", str(BITS), "--jobs", "1", *args]
  res = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=600)
  if check: assert res.returncode in (0, 1), res.stderr
  return res

def _range(first: int, n: int) -> str: return f"{first:#x}:{first + (n << BITS):#x}"

def _files(out: Path) -> dict[Path, tuple[int, bytes]]:
  return {p: (p.stat().st_mtime_ns, p.read_bytes()) for ps in store.chunk_files(out).values() for p in ps}

SLOW = "sweep_planted:SlowClang"  # 50 ms a launch: 4096 chunks take minutes whatever the machine

def _start_and_wait(out: Path, chunks: int, stderr=subprocess.DEVNULL, env: dict | None = None,
                    sigint: signal.Handlers = signal.SIG_DFL) -> subprocess.Popen:
  """A SlowClang SQRT sweep of 4096 chunks (minutes from done when this returns), once `chunks` chunk files are written;
  it starts with SIGINT's disposition `sigint` (what it inherits: SIG_IGN from a parent that ignores Ctrl-C)."""
  cmd = [sys.executable, "-m", "refimpl.sweep", "--out", str(out), "--chunk-bits", str(BITS), "--jobs", "1",
         "--backend", SLOW, "--ops", "SQRT", "--range", _range(0, 4096), "--quiet"]
  proc = subprocess.Popen(cmd, env=env or _env(), start_new_session=True, stdout=subprocess.DEVNULL, stderr=stderr, text=True,
                          preexec_fn=lambda: signal.signal(signal.SIGINT, sigint))
  while not (out / "SQRT-f32").is_dir() or len(_files(out)) < chunks:  # SlowClang's sweep cannot end first
    if proc.poll() is not None: pytest.fail(f"the sweep ended before writing {chunks} chunks (exit {proc.poll()})")
    time.sleep(0.05)
  return proc

def _marked(mark: str) -> list[int]:
  """The live (not zombie) processes whose environment holds SWEEP_TEST_MARK=mark (Linux /proc): a sweep started with it
  and every process it started (its workers run in process groups of their own)."""
  out = []
  for stat in Path("/proc").glob("[0-9]*/stat"):
    try:
      fields = stat.read_text().rsplit(")", 1)[1].split()
      marked = f"SWEEP_TEST_MARK={mark}".encode() in (stat.parent / "environ").read_bytes().split(b"\0")
    except OSError: continue
    if fields[0] != "Z" and marked: out.append(int(stat.parent.name))
  return out

def test_a_sweep_resumed_after_a_kill_redoes_no_finished_chunk(tmp_path):
  out = tmp_path / "sweep"
  mark = str(tmp_path)
  proc = _start_and_wait(out, 5, env={**_env(), "SWEEP_TEST_MARK": mark})
  assert len(_marked(mark)) >= 2, "the sweep and its worker carry the mark"
  os.kill(proc.pid, signal.SIGKILL)  # the main process alone: its worker ends by itself
  proc.wait()
  before = _files(out)
  starts = sorted(int(p.stem, 16) for p in before)
  assert starts == [k << BITS for k in range(len(starts))], "chunks are written in order, each whole"
  res = sweep(out, "--backend", SLOW, "--ops", "SQRT", "--range", _range(0, len(starts) + 3))
  assert f"{len(starts)} done, 3 to run" in res.stderr
  after = _files(out)
  assert {p: after[p] for p in before} == before, "a finished chunk was written again"
  assert len(after) == len(before) + 3
  assert "3 chunks written this run" in res.stderr
  for _ in range(300):  # a worker whose main process is gone ends within a second or so (a budget of 300 polls)
    if not _marked(mark): break
    time.sleep(0.2)
  left = _marked(mark)
  for pid in left: os.kill(pid, signal.SIGKILL)
  assert not left, f"processes {left} outlived the killed sweep"

@pytest.mark.parametrize("sig, inherited", [(signal.SIGINT, signal.SIG_DFL), (signal.SIGINT, signal.SIG_IGN),
                                            (signal.SIGTERM, signal.SIG_DFL)],
                         ids=["ctrl-c", "ctrl-c-inherited-ignore", "sigterm"])
def test_an_interrupted_sweep_keeps_every_finished_chunk(tmp_path, sig, inherited):
  """Ctrl-C or SIGTERM stops a sweep with every finished chunk kept, also one started with SIGINT ignored (a parent
  that ignores Ctrl-C: Python then installs no KeyboardInterrupt handler of its own)."""
  out = tmp_path / "sweep"
  proc = _start_and_wait(out, 3, stderr=subprocess.PIPE, sigint=inherited)
  proc.send_signal(sig)  # the main process only (a terminal's Ctrl-C reaches the whole group; the workers ignore it)
  _, err = proc.communicate(timeout=120)
  assert proc.returncode == 130 and "interrupted" in err, err
  kept = _files(out)
  for p in kept: assert store.read_chunk(p)["backends"]["SLOWCLANG"]["status"] == "pass"
  res = sweep(out, "--backend", SLOW, "--ops", "SQRT", "--range", _range(0, len(kept)))
  assert f"{len(kept)} done, 0 to run" in res.stderr and _files(out) == kept

def test_a_wrong_backend_shows_its_violations_with_their_inputs(tmp_path):
  out = tmp_path / "sweep"
  res = sweep(out, "--backend", f"CLANG,{PLANTED}", "--ops", "SQRT", "--range", _range(ONE, 2))
  assert res.returncode == 1 and "SQRTULPCLANG breaks the spec on SQRT-f32" in res.stderr
  data = json.loads(store.chunk_path(out, "SQRT-f32", ONE).read_text())
  good, bad = data["backends"]["CLANG"], data["backends"]["SQRTULPCLANG"]
  assert (good["status"], good["violations"], good["max_error"], good["checked"]) == ("pass", 0, 0, 4096)
  assert bad["status"] == "fail" and bad["max_error"] == 1 and 0 < bad["violations"] <= 4096
  first = bad["first"][0]
  assert first["input"]["bits"] == f"{ONE:#010x}" and first["input"]["value"] == "1.0"  # sqrt(1) = 1, got 1 + 2^-23
  assert first["expected"]["bits"] == "0x3f800000" and first["got"]["bits"] == "0x3f800001"

def test_a_backend_that_kills_its_worker_loses_only_its_own_record(tmp_path):
  out = tmp_path / "sweep"
  res = sweep(out, "--backend", "CLANG,sweep_planted:SqrtCrashClang", "--ops", "SQRT", "--range", _range(ONE, 1))
  data = json.loads(store.chunk_path(out, "SQRT-f32", ONE).read_text())
  assert data["backends"]["CLANG"]["status"] == "pass" and data["backends"]["CLANG"]["checked"] == 4096
  crash = data["backends"]["SQRTCRASHCLANG"]
  assert crash["status"] == "crash" and "the worker died twice" in crash["detail"], res.stderr

def test_a_backend_that_hangs_gets_a_hang_record_and_the_others_theirs(tmp_path):
  """Rule (refimpl.sweep.schedule): a backend that overruns --timeout on a chunk twice gets a "hang" record there, and
  the chunk keeps its other backends' records. CLANG's record is made first, with the default limit, so no backend
  that finishes is ever held to the short one (whatever the machine's speed); HangClang never finishes."""
  out = tmp_path / "sweep"
  sweep(out, "--backend", "CLANG", "--ops", "SQRT", "--range", _range(ONE, 1))
  res = sweep(out, "--backend", "CLANG,sweep_planted:HangClang", "--ops", "SQRT", "--range", _range(ONE, 1), "--timeout", "3")
  data = json.loads(store.chunk_path(out, "SQRT-f32", ONE).read_text())
  assert data["backends"]["CLANG"]["status"] == "pass" and data["backends"]["CLANG"]["checked"] == 4096
  hang = data["backends"]["HANGCLANG"]
  assert hang["status"] == "hang" and "hang" in hang["detail"], res.stderr

def test_a_sweep_runs_as_dask_tasks(tmp_path):
  pytest.importorskip("distributed", reason="the cluster extra (pip install 'refimpl[cluster]') is not installed")
  out, local = tmp_path / "dask", tmp_path / "local"
  sweep(out, "--backend", "CLANG", "--ops", "EXP2", "--range", _range(ONE, 2), "--cluster", "local")
  sweep(local, "--backend", "CLANG", "--ops", "EXP2", "--range", _range(ONE, 2))
  for k in range(2):
    dask, pool = (json.loads(store.chunk_path(d, "EXP2-f32", ONE + (k << BITS)).read_text()) for d in (out, local))
    assert dask["backends"]["CLANG"]["checked"] == 4096
    assert {**dask["backends"]["CLANG"], "seconds": 0} == {**pool["backends"]["CLANG"], "seconds": 0}

def test_cluster_mode_without_dask_names_the_extra_to_install(tmp_path):
  (tmp_path / "distributed.py").write_text("raise ImportError('no module named distributed (blocked by the test)')\n")
  env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
  res = subprocess.run([sys.executable, "-m", "refimpl.sweep", "--out", str(tmp_path / "sweep"), "--backend", "CLANG",
                        "--ops", "NEG", "--chunk-bits", "12", "--range", "0:0x1000", "--cluster", "local"],
                       env=env, capture_output=True, text=True, timeout=120)
  assert res.returncode == 2 and "pip install 'refimpl[cluster]'" in res.stderr

def test_a_backend_that_does_not_open_is_tried_again_on_the_next_run(tmp_path):
  out = tmp_path / "sweep"
  (tmp_path / "absent_backend.py").write_text("from refimpl.device import DeviceUnavailable\n"
                                              "class AbsentDevice:\n  subprocess_safe = True\n"
                                              "  def __init__(self, name):\n    raise DeviceUnavailable('ABSENT: not here')\n")
  env = {**_env(), "PYTHONPATH": os.pathsep.join([str(tmp_path), _env()["PYTHONPATH"]])}
  cmd = [sys.executable, "-m", "refimpl.sweep", "--out", str(out), "--chunk-bits", str(BITS), "--jobs", "1",
         "--backend", "CLANG,absent_backend:AbsentDevice", "--ops", "NEG", "--range", _range(0, 2)]
  first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
  record = json.loads(store.chunk_path(out, "NEG-f32", 0).read_text())["backends"]["ABSENT"]
  assert record["status"] == "unavailable" and "ABSENT: not here" in record["detail"], first.stderr
  again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
  assert "0 done, 2 to run" in again.stderr

def test_a_corrupt_chunk_file_is_named_and_redone(tmp_path):
  out = tmp_path / "sweep"
  sweep(out, "--backend", "CLANG", "--ops", "NEG", "--range", _range(0, 3))
  path = store.chunk_path(out, "NEG-f32", 1 << BITS)
  path.write_text('{"case": "NEG-f32", "start": 40')  # a torn write (what an atomic rename never leaves, but a disk may)
  res = sweep(out, "--backend", "CLANG", "--ops", "NEG", "--range", _range(0, 3))
  assert f"{path}: not a readable chunk file" in res.stderr and "2 done, 1 to run" in res.stderr
  assert store.read_chunk(path)["backends"]["CLANG"]["status"] == "pass"

def test_a_sweep_removes_the_temporary_files_of_a_writer_that_is_gone(tmp_path):
  """store.py: a chunk file is written as .NAME.PID.tmp and renamed; a SIGKILL between leaves the temporary file, which
  the next sweep into the directory removes unless its writer still runs."""
  out = tmp_path / "sweep"
  store.open_dir(out, BITS)
  (out / "NEG-f32").mkdir()
  dead = out / "NEG-f32" / f".00000000.json.{(1 << 22) + 1}.tmp"  # above Linux's largest pid: no such process
  live = out / "NEG-f32" / f".00001000.json.{os.getpid()}.tmp"
  for tmp in (dead, live): tmp.write_text("{")
  sweep(out, "--backend", "CLANG", "--ops", "NEG", "--range", _range(0, 1))
  assert not dead.exists() and live.exists()
  assert [p.name for p in store.chunk_files(out)["NEG-f32"]] == ["00000000.json"]

def test_a_sweep_into_a_directory_of_another_chunk_size_is_refused(tmp_path):
  out = tmp_path / "sweep"
  store.open_dir(out, BITS)
  res = subprocess.run([sys.executable, "-m", "refimpl.sweep", "--out", str(out), "--backend", "CLANG", "--ops", "NEG",
                        "--chunk-bits", "13", "--range", "0:0x2000"], env=_env(), capture_output=True, text=True, timeout=120)
  assert res.returncode == 2 and "chunks of 2^12 inputs, not 2^13" in res.stderr

def test_the_report_counts_what_the_chunk_files_hold(tmp_path):
  out, docs = tmp_path / "sweep", tmp_path / "docs"
  sweep(out, "--backend", f"CLANG,{PLANTED}", "--ops", "SQRT,CAST-f32-to-i32", "--range", _range(ONE, 3))
  # CAST-f32-to-i32 at 0x4f000000 (2^31) and above: out of range, undefined, not checked
  sweep(out, "--backend", "CLANG", "--ops", "CAST-f32-to-i32", "--range", _range(0x4F000000, 1))
  paths = report.publish(out, docs, "sweeps")
  summary = json.loads(paths[2].read_text())
  assert summary["total"] == SPACE >> BITS
  sqrt = summary["cases"]["SQRT-f32"]["backends"]
  assert (sqrt["CLANG"]["chunks"], sqrt["CLANG"]["checked"], sqrt["CLANG"]["violations"]) == (3, 3 * 4096, 0)
  per_chunk = [json.loads(store.chunk_path(out, "SQRT-f32", ONE + (k << BITS)).read_text())["backends"]["SQRTULPCLANG"]
               for k in range(3)]
  assert sqrt["SQRTULPCLANG"]["violations"] == sum(r["violations"] for r in per_chunk) > 0
  assert len(sqrt["SQRTULPCLANG"]["first"]) == report.FIRST
  cast = summary["cases"]["CAST-f32-to-i32"]["backends"]["CLANG"]
  assert cast["chunks"] == 4 and cast["checked"] == 3 * 4096 and cast["rule"] == "exact"
  md = paths[0].read_text()
  assert f"| SQRT-f32 | SQRTULPCLANG | incomplete: 3/{SPACE >> BITS} chunks | 12,288 | exact | 1 ulp |" in md
  assert "### SQRTULPCLANG: SQRT-f32" in md and "input 0x3f800000 (1.0): expected 0x3f800000 (1.0), got 0x3f800001" in md
  assert "| CAST-f32-to-i32 | CLANG | incomplete: 4/" in md
  assert f"| LOG2-f32 | (every backend) | not run: 0/{SPACE >> BITS} chunks |" in md  # a case the sweep never reached

def test_a_report_of_several_sources_takes_each_row_whole_from_the_source_with_the_most_chunks(tmp_path):
  """report.py, "Sources": a (case, backend) row comes from one source, the one with the most checked chunks (the
  later on a tie), so a chunk two sources hold is counted once; sources of another chunk size are refused."""
  a, b, docs = tmp_path / "a", tmp_path / "b", tmp_path / "docs"
  sweep(a, "--backend", "CLANG", "--ops", "NEG", "--range", _range(0, 2))
  earlier = report.publish(a, docs, "earlier")[2]
  sweep(b, "--backend", f"CLANG,{PLANTED}", "--ops", "NEG", "--range", _range(0, 1))
  def neg(*sources: Path) -> dict:
    return json.loads(report.publish(list(sources), docs, "combined")[2].read_text())["cases"]["NEG-f32"]
  for sources in ((earlier, b), (b, earlier), (b, a), (a, earlier)):
    rows = neg(*sources)["backends"]
    assert (rows["CLANG"]["chunks"], rows["CLANG"]["checked"]) == (2, 2 * 4096), sources
  combined = neg(earlier, b)
  assert combined["chunks"] == 2 and combined["backends"]["SQRTULPCLANG"]["chunks"] == 1
  other = tmp_path / "other"
  store.open_dir(other, BITS + 1)
  with pytest.raises(store.StoreError, match="different sizes"): report.publish([a, other], docs, "combined")
  not_a_report = tmp_path / "notes.json"
  not_a_report.write_text('{"cases": 3}')
  with pytest.raises(store.StoreError, match=r"notes\.json: not a sweep report"): report.publish([not_a_report], docs, "x")

@pytest.mark.parametrize("bad", ["EXP3", "CAST-f32-to-f32"])
def test_an_unknown_op_is_a_usage_error_naming_the_choices(tmp_path, bad):
  res = sweep(tmp_path / "sweep", "--backend", "CLANG", "--ops", bad, check=False)
  assert res.returncode == 2 and f"no sweep case {bad!r}" in res.stderr and "EXP2-f32" in res.stderr
