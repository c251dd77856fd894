"""Worker processes for long campaigns: fuzz campaigns (refimpl.fuzz) and float32 sweeps (refimpl.sweep) share them.

  messages.py  the protocol: a `Work` (what a worker opens once, then how it runs a job), the worker's messages
               (Ready, Phase, Answer, Failure, JobDone) and the pool's events (Answered, Finished, WorkerFailed, Lost)
  local.py     `Pool`: spawned processes on this machine; a worker that dies or overruns its phase's limit is a `Lost`
               event naming what it was doing, and is replaced
  cluster.py   `ClusterPool`: the same interface over the worker processes of a Dask cluster; `open_pool` picks one
  progress.py  one status line on stderr (tqdm when installed) and messages between its updates

What a lost job stands for (a finding, a "crash" record, a rerun) is the caller's decision: the pool only reports it.
"""
