"""The fuzzer finds the four classes real backends have (refimpl/fuzz/planted.py: Contract, LongToFloat, DoubleToHalf,
FlushMul), planted in CLANG, LLVM and GPU variants, and reduces each to a handful of uops.

CI runs one short campaign per backend variant, all four planted backends at once, with a fixed seed whose first
programs reach every class (found by a search over seeds, generation mode "random", 5 steps at most): what the test
checks is that generation reaches the classes, that the comparison flags them on a real backend, and that reduction
gets each to at most 10 uops within the default candidate budget (no clock limit: the result is the same on any
machine). A 60 s campaign finding each class on each variant from the default seed is measured outside CI (README,
Fuzzing)."""
import pytest

from refimpl.device import Device
from refimpl.fuzz import Config, run_campaign
from refimpl.fuzz.planted import CLASSES, VARIANTS

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
SEED, PROGRAMS, MAX_STEPS, MAX_UOPS = 42, 6, 5, 10


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_short_campaign_finds_and_reduces_every_planted_class(variant, tmp_path):
  """Rule: programs 0..5 of the campaign reach every class; each class is found on its planted backend (filed under its
  op and dtypes), and its smallest finding is reduced to at most 10 uops."""
  base = VARIANTS[variant]
  why = Device.open_error(base)
  if why is not None: pytest.skip(f"the {variant} variants subclass {base}, which does not open here: {why}")
  backends = [f"refimpl.fuzz.planted:{cls}{variant}" for cls in CLASSES]
  s = run_campaign(Config(seed=SEED, iterations=PROGRAMS, backends=backends, jobs=2, out=tmp_path, quiet=True, batch=4,
                          reduce_time=None, mode="random", max_steps=MAX_STEPS))
  for cls, (_, signatures) in CLASSES.items():
    name = f"{cls}{variant}".upper()
    found = [r.finding for r in s.findings if r.finding.signature.backend == name]
    assert found, f"{name} not found\n{s.render()}"
    assert all((f.signature.op, f.signature.dtypes) in signatures for f in found), [str(f.signature) for f in found]
    best = min(found, key=lambda f: len(f.case.program.uops))
    assert best.reduced and len(best.case.program.uops) <= MAX_UOPS, best.case.program.listing()
