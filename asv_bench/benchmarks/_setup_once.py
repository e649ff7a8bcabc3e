"""``setup_once``: a benchmark's setup that runs once per process (per parameter), not before
every sample.

asv_runner 0.3 re-runs ``setup`` before every sample and, when a class has one, times a single
call per sample (asv#966). Each sample is then the first call after a fresh setup: a replay
timed right after its own recording, its buffers cold and, for a value-only call, its plan
still to build (W1: 212 us per value_and_grad and 387 us per value, against 67-150 and 35-85
timed in a loop). These benchmarks only read what setup builds, and the use they stand for is a
loop calling the same function again and again, so setup builds it once and every sample times
a warm call, as the hand-written and JAX baselines beside them are timed too.
"""
import functools

_UNSET = object()


def setup_once(setup):
    @functools.wraps(setup)
    def once(self, *params):
        if self.__dict__.get("_set_up_for", _UNSET) == params:
            return
        self.__dict__.pop("_set_up_for", None)  # a failed or other-parameter setup runs again
        setup(self, *params)
        self._set_up_for = params

    return once
