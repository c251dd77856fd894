"""Sweeps: every float32 input of a unary float op or a conversion from float32, on backends, as chunks of cluster work.

`python -m refimpl.sweep --backend CLANG,LLVM --out DIR` splits the 2^32 float32 bit patterns of each case (an
OpCase: EXP2-f32, CAST-f32-to-i32, ...) into chunks of 2^chunk_bits inputs. A worker computes the spec's reference of
a chunk once and checks every requested backend against it (refimpl.testing.differential.OpHarness, by the rules of
refimpl.testing.compare); the main process writes each finished chunk as one JSON file, so a rerun skips it.
`python -m refimpl.sweep report DIR` aggregates the chunk files into the published tables (docs/conformance/).

  plan.py      the cases a sweep covers and its chunks
  chunk.py     one chunk: reference once, each backend checked, one record per backend (the worker side)
  store.py     the sweep directory: its manifest and one atomically written JSON file per finished chunk
  schedule.py  the chunks as jobs of refimpl.workers (spawned processes, or a Dask cluster's), resumably
  report.py    the tables (markdown and HTML) of a sweep directory
"""
