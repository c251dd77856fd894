"""refimpl: the executable specification of a GPU-style kernel language and its differential harness."""
from refimpl.errors import UndefinedBehavior

__all__ = ["UndefinedBehavior"]
