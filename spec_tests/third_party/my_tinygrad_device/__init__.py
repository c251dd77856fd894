"""A porter's own tinygrad 0.10.1 device, outside refimpl (docs/porting.md, "Porting a tinygrad backend"): a package of
its own, importable by name, judged by refimpl with no change to refimpl:

  PYTHONPATH=spec_tests/third_party python -m refimpl.conformance --backend TINYGRAD:my_tinygrad_device.ops_mydev:MyDevice

ops_mydev.py holds two devices: MyDevice (a faithful port: tinygrad's C renderer, clang compiler and CPU runtime under
classes of its own, so it passes everything tinygrad's CLANG passes) and PlantedDevice (the same with one deliberate
mistake in its renderer, which the suite must report as a failure with a reproducer)."""
