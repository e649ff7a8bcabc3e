"""Running callables in parallel threads, for the thread suites. Not a test module."""
import threading


def run_threads(workers, timeout=None, after=None):
    """Run the callables in parallel threads (started together), each followed by `after` in
    its thread; re-raise the first error. With a timeout, a thread still running fails."""
    errors = []
    barrier = threading.Barrier(len(workers))

    def wrap(fn):
        def run():
            try:
                barrier.wait()
                fn()
                if after is not None:
                    after()
            except BaseException as e:  # noqa: BLE001  (re-raised in the main thread)
                errors.append(e)
        return run

    threads = [threading.Thread(target=wrap(fn)) for fn in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout)
        assert not t.is_alive(), "a thread did not finish"
    if errors:
        raise errors[0]
