"""``python -m jit.warmup``: fill Numba's on-disk cache for every interpreter entry point."""
from . import warmup

if __name__ == "__main__":
    total = warmup(verbose=True)
    print(f"{'all entry points':16s} {total:7.2f} s")
