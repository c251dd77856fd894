"""Fuzz campaigns end to end (refimpl/fuzz/campaign.py, isolate.py, corpus.py), against deliberately broken backends
(refimpl/fuzz/planted.py): planted bugs are found and reduced, crashes and hangs are findings while the campaign goes
on, an interrupted campaign keeps its findings, finding files round-trip and replay, corrupt ones are named."""
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from refimpl.device import Device
from refimpl.dtype import dtypes
from refimpl.fuzz import Case, CaseFormatError, Config, Finding, Signature, load_finding, replay, run_campaign, save_finding
from refimpl.fuzz.__main__ import main
from refimpl.fuzz.campaign import Campaign
from refimpl.fuzz.edits import unused_declarations
from refimpl.fuzz.execute import BackendRef
from refimpl.fuzz.graph import Graph
from refimpl.fuzz.reduce import MAX_CANDIDATES
from refimpl.fuzz.summary import Summary
from refimpl.ir import Ops, elementwise

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning"),
              pytest.mark.skipif(Device.open_error("CLANG") is not None, reason="the planted backends subclass CLANG")]
PLANTED = "refimpl.fuzz.planted:"
ROOT = Path(__file__).resolve().parents[1]


def _by_backend(summary: Summary) -> dict[str, list]:
  out: dict[str, list] = {}
  for r in summary.findings: out.setdefault(r.finding.signature.backend, []).append(r.finding)
  return out


def test_planted_wrong_value_bugs_are_found_and_reduced(tmp_path):
  """Rule: a backend whose IDIV floors (instead of truncating) and one whose float MAX drops a NaN operand are found
  within 96 programs, each reduced to a few uops, filed under the op that is wrong and the rule of the element's
  certainty level, and saved with a pytest file."""
  s = run_campaign(Config(seed=5, iterations=96, backends=[PLANTED + "FloorDivClang", PLANTED + "NanMaxClang"], jobs=2,
                          out=tmp_path, quiet=True, reduce_time=None))
  found = _by_backend(s)
  floor = [f for f in found.get("FLOORDIVCLANG", []) if f.signature.op == "IDIV"]
  nanmax = [f for f in found.get("NANMAXCLANG", []) if f.signature.op == "MAX"]
  assert floor and nanmax, s.render()
  for f in floor + nanmax:
    assert f.reduced and len(f.case.program.uops) <= 16, f.case.program.listing()
  assert {f.signature.kind for f in floor} == {"wrong-value:exact"}
  assert {f.signature.kind for f in nanmax} == {"wrong-value:exact"}  # a NaN result is NAN_PAYLOAD: any NaN, but a NaN
  assert {f.signature.dtypes for f in floor} <= {"signed char", "short", "int", "long"}
  assert s.exit_code == 1
  files = sorted(tmp_path.glob("*.json"))
  assert len(files) == len(s.findings) and all((tmp_path / f"test_{p.stem.replace('-', '_')}.py").exists() for p in files)
  reloaded = load_finding(files[0])
  assert reloaded.signature in {r.finding.signature for r in s.findings}


def test_crashes_and_hangs_are_findings_and_the_campaign_goes_on(tmp_path):
  """Rule: a kernel that segfaults or spins forever is a finding (crash:SIGSEGV, hang), the worker is replaced, and
  every program of the campaign still runs on every backend."""
  s = run_campaign(Config(seed=0, iterations=8, backends=[PLANTED + "SegfaultClang", PLANTED + "HangClang"], jobs=2,
                          out=tmp_path, quiet=True, timeout=1.0, reduce=False, batch=4))
  kinds = {(r.finding.signature.backend, r.finding.signature.kind) for r in s.findings}
  assert ("SEGFAULTCLANG", "crash:SIGSEGV") in kinds and ("HANGCLANG", "hang") in kinds, s.render()
  assert s.programs == 8
  for b in s.backends.values(): assert b.runs == 8 - sum(s.discarded.values()) - b.unsupported
  assert all(load_finding(p).case.program.uops for p in tmp_path.glob("*.json"))


def test_interrupted_campaign_keeps_its_findings(tmp_path):
  """Rule: Ctrl-C stops the campaign at once; the findings already made are on disk, whole, and the summary is printed
  with exit status 1."""
  env = {**os.environ, "PYTHONPATH": str(ROOT)}
  proc = subprocess.Popen([sys.executable, "-m", "refimpl.fuzz", "--backend", PLANTED + "FloorDivClang", "--out",
                           str(tmp_path), "--jobs", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, env=env, cwd=ROOT)
  try:  # the campaign has no end of its own; its first "found ... -> FILE" line comes once that file is saved
    seen = []
    for line in proc.stderr:
      seen.append(line)
      if line.startswith("found "): break
    assert list(tmp_path.glob("*.json")), f"the campaign ended without a finding: {''.join(seen)[-3000:]}"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate()
  finally:
    if proc.poll() is None: proc.kill()
  assert proc.returncode == 1, err
  assert "interrupted" in out and "exit status 1" in out
  for p in tmp_path.glob("*.json"): assert load_finding(p).signature.backend == "FLOORDIVCLANG"
  assert not list(tmp_path.glob(".*")), "no temporary files left behind"


def test_a_finding_no_fresh_process_reproduces_is_not_counted(tmp_path, capsys):
  """Rule (refimpl/fuzz/recheck.py): each new finding is replayed alone in a fresh process before it counts; one that
  passes there (StaleClang breaks float MUL only after its 8th program in a process: state, not the case) is not a
  finding: it is not counted, the exit status is 0, and its file moves to <out>/unconfirmed/, saying why."""
  status = main(["--backend", PLANTED + "StaleClang", "--iterations", "30", "--jobs", "1", "--no-reduce", "--seed", "1",
                 "--out", str(tmp_path), "--quiet"])
  out = capsys.readouterr().out
  assert status == 0, out[-3000:]
  assert not list(tmp_path.glob("*.json")) and not list(tmp_path.glob(".*")), out[-3000:]
  unconfirmed = list((tmp_path / "unconfirmed").glob("*.json"))
  assert unconfirmed and "findings: 0 new signature(s), 0 occurrence(s)" in out
  assert f"not counted: {len(unconfirmed)} finding(s) that passed when replayed alone in a fresh process" in out
  for p in unconfirmed: assert "NOT REPRODUCED when replayed alone in a fresh process" in load_finding(p).detail
  assert main(["replay", str(unconfirmed[0])]) == 0  # what a user replaying the file sees


def _floor_case() -> Case:
  p = elementwise(Ops.IDIV, dtypes.int8, n=4)
  return Case(p, [np.zeros(4, np.int8), np.array([-7, 7, -7, 6], np.int8), np.array([2, 2, -2, 3], np.int8)])


def test_replay_reruns_a_finding_on_its_backend_or_others(tmp_path):
  """Rule: `replay` runs a saved case on its own backend (the planted bug still fails) or on the given ones (CLANG,
  which truncates, passes); the CLI exits 1 while a replayed case fails."""
  ref = BackendRef.parse(PLANTED + "FloorDivClang")
  f = Finding(Signature(ref.name, "IDIV", "signed char", "wrong-value:exact"), _floor_case(), ref, "planted")
  path = save_finding(tmp_path, f)
  runs = replay([load_finding(path)])
  assert [(r["backend"], r["result"].status, r["result"].kind) for r in runs] == [(ref.name, "finding", "wrong-value:exact")]
  runs = replay([load_finding(path)], [BackendRef("CLANG")])
  assert [(r["backend"], r["result"].status) for r in runs] == [("CLANG", "ok")]
  assert main(["replay", str(path)]) == 1
  assert main(["replay", str(path), "--backend", "CLANG"]) == 0


class _AnsweringPool:
  """A pool of `n` workers that answers every item of a submitted job at the next poll and keeps the jobs it got."""
  def __init__(self, n: int):
    self.n, self.jobs, self.running = n, [], []
  def size(self) -> int: return self.n
  def busy(self) -> int: return len(self.running)
  def idle(self) -> list[int]: return list(range(self.n - len(self.running)))
  def submit(self, worker: int, job) -> None: self.jobs.append(job); self.running.append(job)
  def poll(self, timeout: float) -> list:
    from refimpl.fuzz.isolate import OK, Result
    from refimpl.workers.messages import Answered
    done, self.running = self.running, []
    return [Answered(job, Result(it.key, b, OK)) for job in done for it in job.items for b in it.backends]


@pytest.mark.parametrize("n_items, workers", [(652, 2), (100, 16), (3, 2)])
def test_run_items_compiles_at_most_job_items_kernels_per_batch_and_runs_every_item_once(n_items, workers):
  """Rule (isolate.run_items): a job (one batch compile per backend, under one compile time limit) holds at most
  JOB_ITEMS items, and fewer when that gives every worker a job; the jobs cover every item once, in runs of consecutive
  items, whatever the pool's size."""
  from refimpl.fuzz.isolate import JOB_ITEMS, Item, run_items
  pool = _AnsweringPool(workers)
  results = run_items(pool, [Item(k, ("CLANG",)) for k in range(n_items)])
  assert sorted(results) == [(k, "CLANG") for k in range(n_items)]
  sizes = [len(job.items) for job in pool.jobs]
  share = min(JOB_ITEMS, -(-n_items // workers))
  assert max(sizes) == share and len(pool.jobs) == -(-n_items // share)
  keys = sorted(tuple(it.key for it in job.items) for job in pool.jobs)
  assert [k for run in keys for k in run] == list(range(n_items))
  assert all(list(run) == list(range(run[0], run[0] + len(run))) for run in keys)


def _corruptions(doc: dict) -> list[tuple[object, str]]:
  """(a corrupted document or text, a phrase its error must contain)."""
  def edit(fn):
    d = json.loads(json.dumps(doc))
    fn(d)
    return d
  return [
    ("{not json", "not valid JSON"),
    ([1, 2], "expected a JSON object"),
    (edit(lambda d: d.update(format="something-else")), "format must be"),
    (edit(lambda d: d.update(version=99)), "unsupported version"),
    (edit(lambda d: d.pop("inputs")), "missing key"),
    (edit(lambda d: d.update(extra=1)), "unknown key"),
    (edit(lambda d: d["inputs"][1]["bits"].__setitem__(0, 256)), "is not a 8-bit pattern"),
    (edit(lambda d: d["inputs"][1]["bits"].pop()), "must list 4 bit patterns"),
    (edit(lambda d: d["inputs"].pop()), "inputs must be a list of 3 buffers"),
    (edit(lambda d: d["inputs"][0].update(dtype="float32")), "buffer 0 holds int8"),
    (edit(lambda d: d["program"]["uops"][0].update(op="NOPE")), "program: uops[0].op: unknown op"),
    (edit(lambda d: d["program"]["uops"][-1].update(src=[99, 0])), "program: uop"),
    (edit(lambda d: d.update(vals=[1])), "vals must be a list of 0 ints"),
    (edit(lambda d: d.update(signature={"backend": "CLANG"})), "signature must be"),
  ]


def test_corrupt_finding_files_give_a_clear_error(tmp_path):
  """Rule: a finding file that is not one raises CaseFormatError starting with its path and saying what is wrong; the
  CLI prints it and exits 2 (replay, and a campaign whose --out holds one)."""
  path = save_finding(tmp_path, Finding(Signature("CLANG", "IDIV", "signed char", "wrong-value:exact"), _floor_case(),
                                        BackendRef("CLANG")))
  doc = json.loads(path.read_text())
  for k, (bad, phrase) in enumerate(_corruptions(doc)):
    p = tmp_path / f"bad{k}.json"
    p.write_text(bad if isinstance(bad, str) else json.dumps(bad))
    with pytest.raises(CaseFormatError) as e: load_finding(p)
    assert str(e.value).startswith(str(p)) and phrase in str(e.value), (phrase, str(e.value))
  assert main(["replay", str(tmp_path / "bad0.json")]) == 2
  assert main(["--iterations", "1", "--backend", "CLANG", "--out", str(tmp_path), "--quiet"]) == 2


def test_shards_split_one_campaign(tmp_path):
  """Rule: shard K/N takes the indices i with i % N == K-1: the shards are disjoint and together make the campaign."""
  got = []
  for k in (1, 2, 3):
    c = Campaign(Config(iterations=20, backends=["CLANG"], shard=(k, 3), out=tmp_path, quiet=True))
    got.append(list(c.indices))
  assert sorted(i for g in got for i in g) == list(range(20))
  assert got[1] == list(range(1, 20, 3))


def test_exit_status_says_whether_something_was_found():
  """Rule: exit status 1 when the campaign found anything (even only occurrences of known bugs), 0 otherwise."""
  s = Summary(Config())
  assert s.exit_code == 0
  s.occurrences = 1
  assert s.exit_code == 1


NATIVE = ["CLANG", "LLVM", "GPU"]

@pytest.mark.parametrize("name", NATIVE)
def test_a_batch_compiles_once_and_runs_like_separate_builds(name, monkeypatch):
  """Rule: every native backend compiles a batch of programs in one compiler call (the GPU: one cl.Program, built
  once and reused when its kernels load), and each kernel of the batch computes what the same program built alone
  computes, bit for bit, which is what the emulator allows."""
  if Device.open_error(name) is not None: pytest.skip(f"{name} does not open here")
  from refimpl.fuzz.campaign import profile_for
  from refimpl.fuzz.case import prepare
  from refimpl.fuzz.execute import build, run
  from refimpl.fuzz.generate import make_program
  dev = Device[name]
  assert hasattr(dev.compiler, "compile_batch")
  profile = profile_for({name: dev})
  gens = [g for g in (make_program(7, i, profile) for i in range(12)) if g.emulation is not None and g.error is None][:6]
  cases = [Case(g.program, g.inputs(), g.vals) for g in gens]
  calls: list = []
  compiler_cls = type(dev.compiler)
  real = getattr(compiler_cls, {"GPU": "build", "LLVM": "optimize"}.get(name, "compile"))  # the step done once a batch
  monkeypatch.setattr(compiler_cls, real.__name__, lambda self, *a: calls.append(1) or real(self, *a))
  batch = build(dev, [c.program for c in cases], cache=False)
  assert len(calls) == 1 and all(b.kernel is not None for b in batch), [b.detail for b in batch]
  for c, b in zip(cases, batch):
    (alone,) = build(dev, [c.program], cache=False)
    got, ref = run(b.kernel, c.inputs, c.vals), run(alone.kernel, c.inputs, c.vals)
    assert all(x.tobytes() == y.tobytes() for x, y in zip(got, ref))
    assert prepare(c).expected.check(c.program, got)[0] is None


def test_summary_ends_with_rate_time_split_coverage_and_findings(tmp_path):
  """Rule: the summary gives programs/s (overall and once the workers had started), per backend its runs, rate and
  findings, the time split (shared phases per program, each backend's phases per run, its reductions), coverage and the
  findings."""
  s = run_campaign(Config(seed=0, iterations=16, backends=["CLANG", PLANTED + "FloorDivClang"], jobs=2, out=tmp_path,
                          quiet=True, reduce_time=None, reduce_candidates=64))
  text = s.render()
  for phrase in ("/s once the workers had started", "worker time per program (ms): generate", "coverage: ALU op x dtype",
                 "findings: "):
    assert phrase in text, text
  assert s.steady_rate is not None and s.steady_rate > 0
  for name in ("CLANG", "FLOORDIVCLANG"):
    assert re.search(rf"^  {name} +(\d+\.\d +){{6}} (-|\d+\.\ds/\d+)$", text, re.M), text  # 5 phases, total, reduce
    b = s.backends[name]
    assert b.runs > 0 and b.times["compile"] > 0 and b.times["render"] > 0, (name, b)
  if s.backends["FLOORDIVCLANG"].findings: assert s.backends["FLOORDIVCLANG"].reduce_runs > 0, text


@pytest.mark.skipif(Device.open_error("GPU") is not None, reason="the GPU planted backend needs the GPU device")
def test_gpu_findings_reduce_to_ten_uops_within_the_candidate_budget(tmp_path):
  """Rule: on the GPU, whose kernels cost PoCL a compile at first launch, findings of a planted contraction reduce to at
  most 10 uops with no unused declaration, within the default --reduce-candidates (a count: no clock decides it)."""
  s = run_campaign(Config(seed=0, iterations=8, backends=[PLANTED + "ContractGPU"], jobs=2, out=tmp_path, quiet=True,
                          reduce_time=None))
  found = [r for r in s.findings if r.finding.signature.backend == "CONTRACTGPU"]
  assert found, s.render()
  for r in found:
    p = r.finding.case.program
    assert r.finding.reduced and len(p.uops) <= 10 and r.candidates <= MAX_CANDIDATES, (r.candidates, p.listing())
    assert not unused_declarations(Graph.from_program(p)), p.listing()
