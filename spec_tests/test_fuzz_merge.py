"""Merging the findings of shards (refimpl/fuzz/merge.py, `python -m refimpl.fuzz merge DIR... --out DIR`): the shards of
a campaign merge into the unsharded campaign's findings; one signature keeps its smallest reproducer with the counts
summed; corrupt files and folders that cannot be merged are clear errors that write nothing."""
import json

import numpy as np
import pytest

from refimpl.device import Device
from refimpl.dtype import dtypes
from refimpl.fuzz import (
  Case,
  CaseFormatError,
  Config,
  Finding,
  Profile,
  Signature,
  load_finding,
  make_program,
  run_campaign,
  save_finding,
)
from refimpl.fuzz.__main__ import main
from refimpl.fuzz.execute import BackendRef
from refimpl.fuzz.merge import MergeError, merge
from refimpl.ir import Ops, elementwise

PLANTED = "refimpl.fuzz.planted:"


def _counts(folder) -> dict[str, int]:
  return {str(f.signature): f.seen for f in map(load_finding, sorted(folder.glob("*.json")))}


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@pytest.mark.skipif(Device.open_error("CLANG") is not None, reason="the planted backends subclass CLANG")
def test_merged_shards_equal_the_unsharded_campaign(tmp_path):
  """Rule: shards 1/2 and 2/2 of a campaign (seed 42, 16 programs, findings unreduced), merged, hold the signatures of
  the unsharded campaign (four here) with the same counts, each with its smallest reproducer, the sum of the shards'
  counts, and its pytest file."""
  cfg = dict(seed=42, iterations=16, mode="random", max_steps=5, batch=4, reduce=False, quiet=True,
             backends=[PLANTED + "ContractClang", PLANTED + "FlushMulClang"])
  run_campaign(Config(jobs=2, out=tmp_path / "whole", **cfg))
  for k in (1, 2): run_campaign(Config(jobs=1, shard=(k, 2), out=tmp_path / f"shard{k}", **cfg))
  assert main(["merge", str(tmp_path / "shard1"), str(tmp_path / "shard2"), "--out", str(tmp_path / "merged")]) == 0
  whole, merged = _counts(tmp_path / "whole"), _counts(tmp_path / "merged")
  assert merged == whole and len(whole) >= 2
  for p in (tmp_path / "merged").glob("*.json"):
    f = load_finding(p)
    theirs = [load_finding(q) for k in (1, 2) for q in (tmp_path / f"shard{k}").glob("*.json")
              if load_finding(q).signature == f.signature]
    assert f.seen == sum(g.seen for g in theirs)
    assert len(f.case.program.uops) == min(len(g.case.program.uops) for g in theirs)
    assert (p.parent / f"test_{p.stem.replace('-', '_')}.py").exists()


def _case(large: bool) -> Case:
  """An IDIV program of 11 uops, or (large) a generated program of dozens."""
  if large:
    gen = make_program(0, 0, Profile())
    return Case(gen.program, gen.inputs(), gen.vals)
  p = elementwise(Ops.IDIV, dtypes.int8, n=4)
  return Case(p, [np.zeros(4, np.int8), np.full(4, -7, np.int8), np.full(4, 2, np.int8)])

def _finding(sig: Signature, index: int, seen: int, reduced: bool = False, large: bool = False) -> Finding:
  return Finding(sig, _case(large), BackendRef("CLANG"), "planted", {"seed": 0, "index": index}, reduced, 99, seen)

IDIV = Signature("CLANG", "IDIV", "signed char", "wrong-value:exact")
MAX = Signature("CLANG", "MAX", "float", "wrong-value:exact")


def test_merge_keeps_the_smallest_reproducer_and_sums_the_counts(tmp_path):
  """Rule: of one signature's files the one with the fewest uops is kept (a reduced one on a tie), `seen` is the sum of
  all; a signature of one shard only is copied as it is; merging into one of the folders replaces its files."""
  a, b = tmp_path / "a", tmp_path / "b"
  save_finding(a, _finding(IDIV, 8, 2, large=True))
  save_finding(b, _finding(IDIV, 2, 3))
  save_finding(b, _finding(MAX, 4, 1, large=True))
  ms = merge([a, b], tmp_path / "out")
  assert sorted((str(m.finding.signature), m.finding.seen, m.files) for m in ms) == [(str(IDIV), 5, 2), (str(MAX), 1, 1)]
  small, large = len(_case(False).program.uops), len(_case(True).program.uops)
  assert small < large
  out = {str(f.signature): f for f in map(load_finding, (tmp_path / "out").glob("*.json"))}
  assert len(out[str(IDIV)].case.program.uops) == small and out[str(IDIV)].found == {"seed": 0, "index": 2}
  assert len(out[str(MAX)].case.program.uops) == large
  c, d = tmp_path / "c", tmp_path / "d"
  save_finding(c, _finding(IDIV, 1, 1), "an-older-name")
  save_finding(d, _finding(IDIV, 2, 4, reduced=True))
  merge([c, d], c)
  assert [(p.name, load_finding(p).seen, load_finding(p).reduced) for p in c.glob("*.json")] == \
         [(f"{IDIV.slug()}.json", 5, True)]
  assert [p.name for p in c.glob("test_*.py")] == [f"test_{IDIV.slug().replace('-', '_')}.py"]


def test_merge_errors_name_the_problem_and_write_nothing(tmp_path, capsys):
  """Rule: a corrupt finding file stops the merge with CaseFormatError naming the file (exit 2), before anything is
  written; so do a missing folder, a folder given twice and an --out that already holds findings it would count again."""
  a, b, out = tmp_path / "a", tmp_path / "b", tmp_path / "out"
  save_finding(a, _finding(IDIV, 2, 1))
  b.mkdir()
  doc = json.loads(next(a.glob("*.json")).read_text())
  (b / "bad.json").write_text(json.dumps({**doc, "seen": "three"}))
  with pytest.raises(CaseFormatError) as e: merge([a, b], out)
  assert str(e.value).startswith(str(b / "bad.json")) and "seen must be a int" in str(e.value)
  assert main(["merge", str(a), str(b), "--out", str(out)]) == 2
  assert str(b / "bad.json") in capsys.readouterr().err and not out.exists()
  for folders, dest, phrase in (([a, tmp_path / "nope"], out, "not a folder"), ([a, a], out, "given twice"),
                                ([a], b, "already holds findings")):
    with pytest.raises(MergeError, match=phrase): merge(folders, dest)
  assert main(["merge", str(a), "--out", str(b)]) == 2 and "already holds findings" in capsys.readouterr().err
  assert not out.exists() and [p.name for p in b.iterdir()] == ["bad.json"]
