"""The worker protocol shared by `local.Pool` and `cluster.ClusterPool`.

A `Work` says what a worker does: `open()` once when it starts (a fuzz worker opens its backends; it returns the state
its jobs need and {name: why} of what did not open), then `run(job, state, send)` for each job it is given. Before each
risky step `run` sends a `Phase` (the item's key, the backend, what: "compile", "run", ...), and an `Answer` per result
as soon as it is known (a result has `key` and `backend` attributes). So when a worker dies (a signal) or overruns its
phase's time limit (it is killed), the pool knows which item, backend and phase did it: a `Lost` event with that culprit
and the (key, backend) pairs already answered. Messages travel pickled through multiprocessing's pipes or Dask's queue,
between processes of one run: nothing is read from a file.
"""
from __future__ import annotations

import os
import signal
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np


class Work(Protocol):
  """What a pool's workers do (see the module docstring). Picklable and hashable: it travels to each worker."""
  def open(self) -> tuple[Any, dict[str, str]]: ...
  def run(self, job: Any, state: Any, send: Callable[[Phase | Answer], None]) -> None: ...


# ***** a worker's messages *****

@dataclass(frozen=True)
class Ready:
  """Worker: it has opened what its jobs need (`errors`: what did not open, and why)."""
  pid: int
  errors: dict[str, str]

@dataclass(frozen=True)
class Phase:
  """Worker: it starts a risky step `what` of item `key` (None: a whole batch) on `backend` (None: no backend's)."""
  key: Any
  backend: str | None
  what: str

@dataclass(frozen=True)
class Answer:
  """Worker: one result (it has `key` and `backend` attributes)."""
  result: Any

@dataclass(frozen=True)
class Failure:
  """Worker: an exception in its own code (the traceback); the job ends."""
  text: str

@dataclass(frozen=True)
class JobDone:
  """Worker: its job is over."""


# ***** the pool's events *****

@dataclass(frozen=True)
class Answered:
  """Event: a result of `job` arrived."""
  job: Any
  result: Any

@dataclass(frozen=True)
class Finished:
  """Event: `job` is over."""
  job: Any

@dataclass(frozen=True)
class WorkerFailed:
  """Event: an exception in a worker's own code while it ran `job` (the traceback)."""
  job: Any
  text: str

@dataclass
class Lost:
  """Event: a worker died or was killed during `job`: `culprit` is (item key, backend, phase) of what it was doing."""
  job: Any
  culprit: tuple[Any, str | None, str] | None
  reason: str          # "crash:SIGSEGV", "crash:exit 3", "crash:killed", "hang"
  answered: set        # (key, backend) pairs whose result arrived


def signal_name(exitcode: int | None) -> str:
  """How a process ended, as a Lost reason: "crash:SIGSEGV" (a signal), "crash:exit 3", "crash:killed" (unknown)."""
  if exitcode is None: return "crash:killed"
  if exitcode < 0:
    try: return f"crash:{signal.Signals(-exitcode).name}"
    except ValueError: return f"crash:signal {-exitcode}"
  return f"crash:exit {exitcode}"


def worker_setup(silent: bool = False, env: dict[str, str] | None = None) -> None:
  """What a process does before it runs jobs (a local pool's worker, or a cluster's): its own process group, so killing
  the group also kills the compilers it started (clang, zig's children), and Ctrl-C at the terminal does not reach it;
  silent: stderr goes to /dev/null (toolchains print warnings there); warnings and numpy's floating point errors off;
  `env` set where not already set."""
  if os.getpgrp() != os.getpid(): os.setpgrp()
  if silent:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 2)
    os.close(null)
  warnings.filterwarnings("ignore")
  np.seterr(all="ignore")
  for k, v in (env or {}).items(): os.environ.setdefault(k, v)
