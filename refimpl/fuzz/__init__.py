"""`python -m refimpl.fuzz`: random whole programs, run on every backend and the emulator, compared by the spec's rules.

  generate.py  programs defined by construction, weighted to reach every op x dtype pair; UB rewritten away (YARPGen);
               the generation modes (random, tinygrad, corpus, mix)
  grow.py      mode "random": the Profile, the op x dtype pairs, the generator the other modes build on too
  bias.py      inputs at the halfway cases of conversions, double-rounding values, factors of subnormal products
  shapes.py    mode "tinygrad": upcast vectors, reductions, local reductions with barriers, gated stencils, vars
  mutate.py    mode "corpus": kernels of corpus/tinygrad-0.10.1 with ops, dtypes, constants and shapes mutated
  graph.py     the editable program graph the generator, the UB rewrites and the reducer work on
  case.py      a case (program, inputs, vars), its expectation from the emulator, which cases run natively
  expect.py    what the spec expects of each buffer: exact, NaN payloads, tolerance, allowed sets, WMMA bounds,
               monotone chains, skipped (loose) and wild elements; the check of a run against it
  kinds.py     the static kind of each buffer (what looseness can reach it); whether undefined values reach control
  variants.py  the below and above runs beside the reference (allowed-set alternatives, errors moved down and up)
  execute.py   batch compile (many kernels per compiler call) and run on one backend
  isolate.py   the workers' jobs (refimpl.workers runs them: spawned processes or a Dask cluster's, --cluster): a
               crash or a hang is a finding, and the worker is replaced
  reduce.py    delta debugging of a failing case over uops, constants and inputs: the reducer's passes
  editable.py  the case as the reducer edits it: an editable graph with its inputs and vars (State)
  edits.py     the reducer's edits of a case's structure: remove units, retarget stores, one work item or iteration
  value_edits.py  the reducer's edits of a case's values: int folds, loads to constants, constants, inputs, vars
  finding.py   finding files (JSON + a pytest file), written atomically, loaded with clear errors
  corpus.py    replaying findings (and the finding file names again); fuzz/corpus/ holds known bugs
  config.py    a campaign's settings
  campaign.py  the scheduler: jobs to workers, their results and losses, new findings filed, replayed, reduced
  record.py    the findings record: one per signature, deduplicated, renamed to the final signature, dismissed
  reductions.py  driving the reductions of new findings, one batch of candidates per worker job
  summary.py   what a campaign counted: the status line and the summary
  merge.py     `merge`: the findings of many shards in one folder (by signature, smallest reproducer, counts summed)
  planted.py   deliberately broken backends (to test the fuzzer, or to see it work), the four classes real backends have
  __main__.py  the command line
"""
from refimpl.fuzz.campaign import run_campaign
from refimpl.fuzz.case import Case
from refimpl.fuzz.config import Config
from refimpl.fuzz.corpus import CaseFormatError, Finding, Signature, assert_case_passes, load_finding, replay, save_finding
from refimpl.fuzz.generate import Profile, make_program
from refimpl.fuzz.summary import Summary

__all__ = ["Case", "CaseFormatError", "Config", "Finding", "Profile", "Signature", "Summary", "assert_case_passes",
           "load_finding", "make_program", "replay", "run_campaign", "save_finding"]
