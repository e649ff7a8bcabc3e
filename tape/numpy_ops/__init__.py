"""NumPy's functions on tensors: the implementations behind the ``tape.numpy`` namespace
(tape/numpy.py), registered in ``_dispatch.FUNCS`` for NumPy's dispatch protocols."""
