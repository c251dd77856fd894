"""A pytest plugin that runs tinygrad 0.14's own tests on the 0.14 REFIMPL device (device.py): from tinygrad 0.14's
source tree (its sdist ships test/test_tiny.py; its repository has the rest),

  python -m pytest -p refimpl.tinygrad.v0_14.pytest_device test/test_tiny.py

The device is installed and made the default before any test module imports tinygrad's tensors. tinygrad's CPU device,
which some tests use beside the default one, gets refimpl's clang first (toolchain.prepare_cpu; where there is none,
those tests fail as they would without refimpl)."""
from __future__ import annotations


def install_for_tests() -> None:
  """REFIMPL becomes tinygrad 0.14's default device, with tinygrad's CPU given refimpl's clang first (tests use it beside
  the default device; without it their results would depend on which kernels tinygrad's disk cache already holds)."""
  from refimpl.tinygrad.v0_14.device import install
  from refimpl.tinygrad.v0_14.toolchain import prepare_cpu
  prepare_cpu()
  install(default=True)


def pytest_configure(config) -> None:
  install_for_tests()
