"""Work split among threads: the crew of worker threads and native BLAS pieces (no tape knowledge)."""
