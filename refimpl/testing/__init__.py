"""Tools for testing backends against the spec: eval_op (one op, elementwise, any device)."""
from refimpl.testing.eval import eval_op

__all__ = ["eval_op"]
