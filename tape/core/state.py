"""Per-thread recording state: the current tape, whether gradients are recorded, the active
dual levels and everything else that is "current". A thread never sees another's: transforms
and dual levels run in many threads at once, each as if it were alone."""
import threading


class _State(threading.local):
    def __init__(self):
        self._tape = None  # the tape new rows go to; None until the first recorded op
        self._grad = True  # False inside no_grad()
        self._saved_hooks = None  # (pack, unpack) inside graph.saved_tensors_hooks()
        # Inside no_grad while tape.compile records: (tape, first slot) of the rows recorded
        # since (_open_stop). A replay runs no Python, so what the block computes
        # from the inputs is recorded (grad stays on, ops take their general paths) and the
        # rows are cut from every gradient and tangent; None elsewhere.
        self._stop = None
        # The tape an op appends its row to without further checks: ``tape`` while gradients
        # are recorded and no saved_tensors_hooks pack values, else None (the ops' general
        # path then reads grad, tape and saved_hooks). A thread-local attribute costs ~45 ns
        # more to read than a plain one (a 0-d op records in ~650 ns): the ops read this one.
        self.rec = None
        self.multi_hooks = None  # multi-grad hooks that saw a gradient in the running backward
        self.transforms = 0  # functional transforms (grad, jvp, ...) running, outermost first
        self.guards = None  # _guards.GuardLog while tape.compile records
        self.levels = []  # active forward_ad dual levels, outermost first

    @property
    def tape(self):
        return self._tape

    @tape.setter
    def tape(self, t):
        self._tape = t
        self._set_rec()

    @property
    def grad(self):
        return self._grad

    @grad.setter
    def grad(self, flag):
        self._grad = flag
        self._set_rec()

    @property
    def stop(self):
        return self._stop

    @stop.setter
    def stop(self, segment):
        self._stop = segment
        self._set_rec()

    @property
    def saved_hooks(self):
        return self._saved_hooks

    @saved_hooks.setter
    def saved_hooks(self, hooks):
        self._saved_hooks = hooks
        self._set_rec()

    def _set_rec(self):
        self.rec = self._tape if self._grad and self._saved_hooks is None and self._stop is None \
            else None

state = _State()


class _GradMode:
    __slots__ = ("_enabled", "_prev")

    def __init__(self, enabled):
        self._enabled = enabled

    def __enter__(self):
        self._prev = (state.grad, state.stop is not None)
        if self._enabled:
            _set_mode(True, False)
        elif state.guards is not None and state.grad:  # tape.compile records: cut, not skip
            _set_mode(True, True)
        else:
            _set_mode(False, False)
        return self

    def __exit__(self, *exc):
        _set_mode(*self._prev)
        return False

    def __call__(self, fn):  # usable as a decorator too
        import functools

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)(self._enabled):
                return fn(*args, **kwargs)

        return wrapper


def _set_mode(grad, stopping):
    if state.stop is not None and not stopping:
        _close_stop()
    elif state.stop is None and stopping:
        _open_stop()
    state.grad = grad


def _open_stop():
    """Start the rows of a no_grad block inside a compiled function (``state.stop``)."""
    t = state.tape
    state.stop = (t, len(t.sv) if t is not None and t.sv is not None else 0)


def _close_stop():
    """End them: the rows recorded since ``_open_stop`` join their tapes' ``stopped`` ranges (the
    one it began on and, if recording moved to a new tape meanwhile, the current one)."""
    t0, first = state.stop
    state.stop = None
    t = state.tape
    for tape, lo in ((t0, first), (t, 0)):
        if tape is not None and tape.sv is not None and lo < len(tape.sv):
            tape.stopped += ((lo, len(tape.sv)),)
        if t is t0:
            break


def no_grad():
    """Context manager (or decorator) in which operations are not recorded.

    >>> with tape.no_grad():
    ...     w -= 0.1 * w.grad      # an optimiser step: updates the leaf in place
    """
    return _GradMode(False)


def enable_grad():
    """Context manager (or decorator) that turns recording back on inside ``no_grad``."""
    return _GradMode(True)


def is_grad_enabled() -> bool:
    return state.grad and state.stop is None
