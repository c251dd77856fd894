"""refimpl: the executable specification of a GPU-style kernel language and its differential harness."""
