"""A third-party backend as a porter would write one: outside refimpl, importable by name, registered with
`--backend faithful_backend.device:FaithfulDevice` or through its entry point (the .dist-info beside this package)."""
