"""asv benchmarks of the reference workloads W1-W5 (WORKLOADS.md).

Per workload: the tapejit eager gradient (``tape.value_and_grad``), the NumPy primal (the same loss
on plain arrays: the baseline every ratio is taken against), the hand-written gradient where
WORKLOADS.md has one, and PyTorch eager (float64, one thread) when torch is importable; otherwise
the PyTorch benchmarks skip (NotImplementedError in setup, asv's convention). The same holds for
the other peers (peer_workloads.py): HIPS autograd (W1-W5) and JAX (float64, ``jax.jit`` of
``jax.value_and_grad``, W2/W3/W4 only: W1/W5 take over a minute to compile), each skipping when its
package is not importable. The JAX setup compiles, so its times are the steady state.
"""
import peer_workloads
import tape
import torch_workloads
from references import REFERENCES
from workloads import WORKLOADS
from _setup_once import setup_once


class _Workload:
    name = None
    timeout = 120

    @setup_once
    def setup(self):
        w = WORKLOADS[self.name]
        self.args = w.inputs()
        self.loss = w.loss
        self.vg = tape.value_and_grad(w.loss, argnums=w.argnums)
        self.vg(*self.args)                     # load the kernels from Numba's cache
        self.ref = REFERENCES.get(self.name)
        if self.ref is not None:
            self.ref(*self.args)                # compile / load the @njit reference

    def time_tapejit_grad(self):
        self.vg(*self.args)

    def peakmem_tapejit_grad(self):
        self.vg(*self.args)

    def time_numpy_primal(self):
        self.loss(*self.args)

    def peakmem_numpy_primal(self):
        self.loss(*self.args)


class _HandWritten:
    def time_handwritten_grad(self):
        self.ref(*self.args)

    def peakmem_handwritten_grad(self):
        self.ref(*self.args)


class _Torch:
    name = None
    timeout = 120

    @setup_once
    def setup(self):
        if not torch_workloads.available():
            raise NotImplementedError("torch is not installed")
        import torch

        torch.set_num_threads(1)
        w = WORKLOADS[self.name]
        self.run = torch_workloads.value_and_grad(self.name, w.inputs(), w.argnums)
        self.run()

    def time_torch_grad(self):
        self.run()

    def peakmem_torch_grad(self):
        self.run()


class _Peer:
    """A peer library's gradient of workload `name` (skips when `peer` is not importable)."""
    name = None
    peer = None
    timeout = 120

    @setup_once
    def setup(self):
        if not peer_workloads.available(self.peer):
            raise NotImplementedError(f"{self.peer} is not installed")
        w = WORKLOADS[self.name]
        self.run = peer_workloads.value_and_grad(self.peer, self.name, w.inputs(), w.argnums)
        self.run()                              # JAX: compile


class _Autograd(_Peer):
    peer = "autograd"

    def time_autograd_grad(self):
        self.run()

    def peakmem_autograd_grad(self):
        self.run()


class _Jax(_Peer):
    peer = "jax"

    def time_jax_jit_grad(self):
        self.run()

    def peakmem_jax_jit_grad(self):
        self.run()


class W1Lorenz(_Workload, _HandWritten):
    name = "lorenz"


class W2Gmm(_Workload):
    name = "gmm"


class W3Elementwise(_Workload, _HandWritten):
    name = "elementwise"


class W4Mlp(_Workload, _HandWritten):
    name = "mlp"


class W5Nbody(_Workload):
    name = "nbody"


class W1LorenzTorch(_Torch):
    name = "lorenz"


class W2GmmTorch(_Torch):
    name = "gmm"


class W3ElementwiseTorch(_Torch):
    name = "elementwise"


class W4MlpTorch(_Torch):
    name = "mlp"


class W5NbodyTorch(_Torch):
    name = "nbody"


class W1LorenzAutograd(_Autograd):
    name = "lorenz"


class W2GmmAutograd(_Autograd):
    name = "gmm"


class W3ElementwiseAutograd(_Autograd):
    name = "elementwise"


class W4MlpAutograd(_Autograd):
    name = "mlp"


class W5NbodyAutograd(_Autograd):
    name = "nbody"


class W2GmmJax(_Jax):
    name = "gmm"


class W3ElementwiseJax(_Jax):
    name = "elementwise"


class W4MlpJax(_Jax):
    name = "mlp"
