"""Integrations with other tools: SciPy-style optimizers, pipeline parallelism, Dask."""
