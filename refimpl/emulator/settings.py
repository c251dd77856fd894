"""The emulator's settings: bounds on its memory and the strategies it may use for speed. None of them changes a
result (the tests set them to compare the strategies with the rule itself); each is read when it is needed, so
setting the attribute here takes effect at the next run.
"""
from __future__ import annotations

# bytes: the most the values of one run's lanes may take. A launch that needs more runs in chunks of workgroups; a loop
# runs as lanes in chunks of iterations that fit (sequentially when not even two do).
LANE_MEMORY = 1 << 30
# bytes: what a loop run as lanes takes per chunk of iterations, for speed (LANE_MEMORY still bounds it). Every value of
# a chunk is a new array: past a few tens of MB each one is fresh memory the OS must fault in, below it the body's
# per-uop cost is paid once per chunk too often (bench/bench_real_kernels.py: tinygrad's 256^3 matmul, half the time)
LOOP_CHUNK_MEMORY = 1 << 27
CHUNK_SHARE = 4  # a launch over LANE_MEMORY runs in chunks of workgroups of LANE_MEMORY / CHUNK_SHARE (room for loops)
LOOPS_AS_LANES = True  # False: every RANGE runs its iterations one after another (the rule itself, for comparisons)
IF_BOXES = True  # False: an IF whose gate fixes lidx axes runs its body on every lane too (blocks._if, for comparisons)
# from this run of a plan on, its straight-line stretches run as steps (straight.py): making them costs about one run
# (placing batches, a few more), and each later run is about a fifth faster; None: never
STRAIGHT_FROM: int | None = 4
# a stretch's isomorphic ops (tinygrad's unrolled tiles) run as batches, one numpy call over their stacked lanes
# (batches.py); False: one step per op (for comparisons)
BATCHES = True
BATCH_ELEMENTS = 1 << 20  # elements: a batch stacks at most this many lanes' values (and at least batches.MIN_BATCH ops)
RERUNS = 8  # the most runs one launch may take to find the reads its writes race after the fact (machine._launch)
