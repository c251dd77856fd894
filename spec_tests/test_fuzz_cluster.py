"""Fuzz campaigns on a Dask cluster (refimpl/fuzz/cluster.py, `python -m refimpl.fuzz --cluster ...`): the engine's
worker processes run the batches the local pool runs, a worker killed by a signal or a hang is a finding exactly as in
the local pool, the findings and the summary are the local pool's, a cluster started with Dask's own CLI works, Ctrl-C
keeps every finding, every process started is gone afterwards, and without Dask the local pool runs and --cluster says
what to install.

The planted backends and the seed: program 5 of seed 42 (mode random, at most 5 steps) meets ContractClang's bug, and
programs 0 and 6 have a float CMPNE, on which SegfaultClang's kernels write through a null pointer and HangClang's spin.
"""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from refimpl.device import Device
from refimpl.fuzz import Config, load_finding, run_campaign
from refimpl.fuzz.__main__ import main
from refimpl.fuzz.summary import Summary

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning"), pytest.mark.filterwarnings("ignore::DeprecationWarning"),
              pytest.mark.skipif(Device.open_error("CLANG") is not None, reason="the planted backends subclass CLANG")]
PLANTED = "refimpl.fuzz.planted:"
ROOT = Path(__file__).resolve().parents[1]
SEED = dict(seed=42, mode="random", max_steps=5, batch=4, reduce=False, quiet=True)


def _distributed():
  return pytest.importorskip("distributed", reason="the cluster extra (pip install 'refimpl[cluster]') is not installed")

def _descendants(pid: int | None = None) -> set[int]:
  """The pids of a process's descendants (this one's by default) but multiprocessing's resource tracker, which lives
  as long as the process that started it."""
  import psutil
  out = set()
  for p in psutil.Process(pid).children(recursive=True):
    try:
      if "resource_tracker" not in " ".join(p.cmdline()): out.add(p.pid)
    except psutil.Error: pass
  return out

def _left(pids) -> list[int]:
  """Those of `pids` still running once each has had a while to exit (a process that ends is not counted)."""
  import psutil
  procs = []
  for p in pids:
    try: procs.append(psutil.Process(p))
    except psutil.NoSuchProcess: pass
  _, alive = psutil.wait_procs(procs, timeout=30)
  out = []
  for p in alive:
    try:
      if p.status() != psutil.STATUS_ZOMBIE: out.append(p.pid)
    except psutil.NoSuchProcess: pass
  return out

def _findings(s: Summary) -> list[tuple[str, int]]:
  return sorted((str(r.finding.signature), r.finding.seen) for r in s.findings)

def _runs(s: Summary) -> dict[str, tuple[int, int, int]]:
  return {n: (b.runs, b.unsupported, b.findings) for n, b in s.backends.items()}


def test_a_local_cluster_finds_what_the_local_pool_finds_and_survives_a_segfault(tmp_path):
  """Rule: a campaign on a local cluster of 2 worker processes finds the planted wrong value, and the worker killed by
  SIGSEGV mid-batch (after the batch's ContractClang answers streamed back) is a crash:SIGSEGV finding that the engine
  replaces; the findings, their counts and every backend's runs are the local pool's on the same seed (a ContractClang
  answer lost with the worker would be run twice and counted twice). No process is left behind."""
  _distributed()
  backends = [PLANTED + "ContractClang", PLANTED + "SegfaultClang"]
  before = _descendants()
  local = run_campaign(Config(iterations=6, backends=backends, jobs=2, out=tmp_path / "pool", **SEED))
  cluster = run_campaign(Config(iterations=6, backends=backends, jobs=2, out=tmp_path / "cluster", cluster="local", **SEED))
  kinds = {(r.finding.signature.backend, r.finding.signature.kind) for r in cluster.findings}
  assert {("CONTRACTCLANG", "wrong-value:exact"), ("SEGFAULTCLANG", "crash:SIGSEGV")} <= kinds, cluster.render()
  assert _findings(cluster) == _findings(local), (cluster.render(), local.render())
  assert cluster.programs == local.programs == 6
  assert _runs(cluster) == _runs(local) and cluster.backends["CONTRACTCLANG"].runs == 6, (cluster.render(), local.render())
  assert sorted(p.name for p in (tmp_path / "cluster").iterdir()) == sorted(p.name for p in (tmp_path / "pool").iterdir())
  assert not _left(_descendants() - before)


def test_a_cluster_pool_keeps_its_live_workers_whatever_the_clients_cached_view_lists(monkeypatch):
  """Rule: the pool counts a worker lost only when the scheduler no longer lists it. Dask's client replaces its cached
  scheduler identity every few seconds with one that lists no worker (Client.scheduler_info documents it); read just
  after such a refresh, that cache once made the pool retire both live workers of a campaign, which then waited
  forever for a worker (seen twice on a loaded machine). Here the cache always lists none: the pool keeps both."""
  distributed = _distributed()
  from refimpl.sweep.schedule import SweepWork
  from refimpl.workers.cluster import ClusterPool
  monkeypatch.setattr(distributed.Client, "scheduler_info", lambda self, *a, **k: {"workers": {}})
  with ClusterPool("local:2", SweepWork(), silent=True) as pool:
    pool.wait_ready()
    for _ in range(20): pool.poll(0.05)  # no job: each poll sleeps 0.05 s, so the list is read at least 3 times
    assert pool.size() == 2 and not pool.gone and all(s.ready for s in pool.slots.values())


def test_a_dead_workers_signal_is_read_from_its_nanny_itself():
  """Rule: how a cluster worker died is its nanny's log line ("Worker process P was killed by signal 11"), asked of the
  nanny itself as soon as the worker is gone; waiting for the nanny's new worker first made a loaded machine's crash
  "crash:killed" (the new worker took over 30 s to join in half the campaigns of a loop on 2 cores)."""
  _distributed()
  from refimpl.sweep.schedule import SweepWork
  from refimpl.workers.cluster import ClusterPool
  with ClusterPool("local:1", SweepWork(), silent=True) as pool:
    pool.wait_ready()
    (slot,) = pool.slots.values()
    os.kill(slot.pid, signal.SIGSEGV)
    said = None
    for _ in range(600):  # a generous bound: the nanny logs the line when it sees its process exit
      said = pool._nanny_says(slot)
      if said is not None: break
      time.sleep(0.1)
    assert said == "crash:SIGSEGV"


def test_a_hung_worker_is_killed_through_the_engine_and_is_a_hang_finding(tmp_path):
  """Rule: a kernel that spins past --timeout on a cluster worker is a `hang` finding: the worker is killed through the
  engine (its nanny starts another) and the campaign ends with every program run."""
  _distributed()
  before = _descendants()
  s = run_campaign(Config(iterations=2, backends=[PLANTED + "HangClang"], jobs=2, out=tmp_path, cluster="local",
                          timeout=1.0, **SEED))
  assert [(str(r.finding.signature), r.finding.seen) for r in s.findings] == [("HANGCLANG - - hang", 1)], s.render()
  assert s.programs == 2 and s.backends["HANGCLANG"].runs == 2
  assert not _left(_descendants() - before)


def _wait_for(path: Path, proc: subprocess.Popen, log: Path) -> None:
  for _ in range(600):  # a generous bound for a loaded machine; only a dead process ends it early
    if path.exists() and path.stat().st_size: return
    assert proc.poll() is None, f"the scheduler exited with {proc.returncode}: {log.read_text()[-3000:]}"
    time.sleep(0.1)
  raise AssertionError(f"the scheduler did not write {path}: {log.read_text()[-3000:]}")


def test_a_two_node_cluster_started_with_dasks_own_cli_runs_a_campaign(tmp_path):
  """Rule: a scheduler and a worker process started apart through Dask's CLI (`dask scheduler`, `dask worker`, 2 worker
  processes of one thread, on localhost, found through a scheduler file) run a campaign to its end from
  `python -m refimpl.fuzz --cluster FILE`, which finds the planted bug and reduces each finding of it there (the driver
  has no worker of its own) to a handful of uops; stopping them leaves no process behind."""
  _distributed()
  sched_file, env = tmp_path / "scheduler.json", {**os.environ, "PYTHONPATH": str(ROOT)}
  dask = [sys.executable, "-m", "dask"]
  with open(tmp_path / "scheduler.log", "w") as log:  # a file, not a pipe: nobody reads it while the scheduler runs
    scheduler = subprocess.Popen(dask + ["scheduler", "--scheduler-file", str(sched_file), "--port", "0", "--no-dashboard"],
                                 stdout=subprocess.DEVNULL, stderr=log, env=env, cwd=tmp_path)
  procs, workers = [scheduler], None
  try:
    _wait_for(sched_file, scheduler, tmp_path / "scheduler.log")
    workers = subprocess.Popen(dask + ["worker", "--scheduler-file", str(sched_file), "--nworkers", "2", "--nthreads", "1",
                                       "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                               cwd=tmp_path)
    procs.append(workers)
    out = tmp_path / "out"
    code = main(["--cluster", str(sched_file), "--backend", PLANTED + "ContractClang", "--iterations", "6", "--seed", "42",
                 "--mode", "random", "--max-steps", "5", "--batch", "4", "--reduce-time", "100000", "--quiet",
                 "--out", str(out)])
    assert code == 1
    found = [load_finding(p) for p in out.glob("*.json")]
    assert found and all((f.signature.backend, f.reduced) == ("CONTRACTCLANG", True) for f in found), found
    for f in found: assert len(f.case.program.uops) <= 16 < f.uops_before, f.case.program.listing()
    spawned = {p for proc in procs for p in _descendants(proc.pid)}
  finally:
    for proc in reversed(procs):
      proc.send_signal(signal.SIGTERM)
      try: proc.wait(60)
      except subprocess.TimeoutExpired: proc.kill()
  assert len(spawned) >= 2 and not _left(spawned)


def test_ctrl_c_on_a_cluster_campaign_keeps_its_findings(tmp_path):
  """Rule: Ctrl-C stops a cluster campaign as it stops a local one: the findings made are on disk, whole, the summary is
  printed with exit status 1, and the local cluster's processes are gone."""
  _distributed()
  env = {**os.environ, "PYTHONPATH": str(ROOT)}
  proc = subprocess.Popen([sys.executable, "-m", "refimpl.fuzz", "--cluster", "local", "--jobs", "2", "--backend",
                           PLANTED + "ContractClang", "--seed", "42", "--mode", "random", "--max-steps", "5", "--batch", "4",
                           "--out", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT)
  try:  # the campaign has no end of its own; its first "found ... -> FILE" line comes once that file is saved
    seen = []
    for line in proc.stderr:
      seen.append(line)
      if line.startswith("found "): break
    spawned = _descendants(proc.pid)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
  finally:
    if proc.poll() is None: proc.kill()
  assert list(tmp_path.glob("*.json")), f"the campaign ended without a finding: {''.join(seen)[-3000:]}"
  assert proc.returncode == 1, err
  assert "interrupted" in out and "exit status 1" in out
  for p in tmp_path.glob("*.json"): assert load_finding(p).signature.backend == "CONTRACTCLANG"
  assert not list(tmp_path.glob(".*")), "no temporary files left behind"
  assert spawned and not _left(spawned)


def test_without_dask_the_local_pool_runs_and_cluster_names_the_extra(tmp_path, monkeypatch, capsys):
  """Rule: with Dask distributed not importable a campaign runs on the local pool as ever, and --cluster is a usage
  error (exit 2) that names `pip install 'refimpl[cluster]'`."""
  monkeypatch.setitem(sys.modules, "distributed", None)  # `import distributed` raises ImportError
  args = ["--backend", "CLANG", "--iterations", "2", "--jobs", "1", "--quiet", "--out", str(tmp_path)]
  assert main(args) == 0
  assert "programs: 2" in capsys.readouterr().out
  assert main(args + ["--cluster", "local"]) == 2
  assert "pip install 'refimpl[cluster]'" in capsys.readouterr().err
