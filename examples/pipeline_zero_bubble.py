"""A 4-stage MLP pipeline with micro-batches and a zero-bubble-style schedule, in one process.

Each stage is a layer of an MLP that lives on its own (simulated) device. The forward of a
micro-batch goes stage 0 -> 3; its backward comes back 3 -> 0. A plain schedule (1F1B) runs each
stage's whole backward at once, so stage s waits for stage s+1's *whole* backward. Splitting it
(``tape.pipelining``) into B (input gradients: what stage s-1 waits for) and W (weight
gradients: nobody waits) lets B go first and W fill the idle slots ("bubbles").

The simulator runs one op per stage per tick, greedily: B if one is ready, else F, else a
deferred W. It records the timeline and the bytes each stage holds between its B's and W's, and
checks that the weight gradients equal a plain backward over the whole batch.

    python examples/pipeline_zero_bubble.py
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

import tape
from tape import pipelining

WIDTHS = (32, 64, 64, 64, 8)  # stage s maps WIDTHS[s] -> WIDTHS[s + 1]


def make_weights(seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.normal(size=(a, b)) / np.sqrt(a), 0.1 * rng.normal(size=b))
            for a, b in zip(WIDTHS[:-1], WIDTHS[1:])]


def stage_forward(s, x, W, b, target=None, n_micro=1):
    """Stage s: a tanh layer; the last stage also computes its micro-batch's share of the loss."""
    h = x @ W + b
    if target is None:
        return np.tanh(h)
    return np.sum((h - target) ** 2) / (target.size * n_micro)


@dataclass
class Pipeline:
    split: bool = True  # B and W separately (zero-bubble style) or a whole backward (1F1B)
    n_micro: int = 8
    seed: int = 0
    max_pending_w: int = 2  # deferred W's a stage may hold before it runs one instead of an F
    timeline: list = field(default_factory=list)  # per tick, per stage: "F3", "B3", "W" or "."
    held_peak: int = 0  # bytes held between B and W (frontier adjoints), summed over stages

    def run(self, X, Y):
        S = len(WIDTHS) - 1
        weights = [[tape.tensor(W, requires_grad=True), tape.tensor(b, requires_grad=True)]
                   for W, b in make_weights(self.seed)]
        xs = np.array_split(X, self.n_micro)
        ys = np.array_split(Y, self.n_micro)
        M = self.n_micro
        inputs = {}  # (s, m) -> the stage's input tensor (a leaf: the received activations)
        outputs = {}  # (s, m) -> the stage's output tensor (or the loss on the last stage)
        grads_in = {}  # (s, m) -> gradient for the stage's output, received from stage s + 1
        pending_w = [[] for _ in range(S)]  # per stage: param_groups awaiting their W
        next_f = [0] * S
        next_b = [0] * S
        done_w = [0] * S
        busy = [0] * S  # ticks a stage is still occupied (a whole backward takes two)
        now = 0
        while any(d < M for d in done_w):
            tick = []
            events = []
            for s in range(S):
                m_b, m_f = next_b[s], next_f[s]
                if busy[s]:
                    events.append((s, "busy", None))
                elif m_b < M and (s, m_b) in outputs and (
                        s == S - 1 or grads_in.get((s, m_b), (None, now + 1))[1] <= now):
                    events.append((s, "B", m_b))
                elif len(pending_w[s]) >= self.max_pending_w:
                    events.append((s, "W", None))  # bound the memory held for deferred W's
                elif m_f < M and (s == 0 or (s - 1, m_f) in outputs) and m_f - m_b < S - s:
                    events.append((s, "F", m_f))  # at most S - s micro-batches in flight
                elif pending_w[s]:
                    events.append((s, "W", None))
                else:
                    events.append((s, ".", None))
            # every stage acts on the state at the start of the tick (they run in parallel)
            for s, op, m in events:
                W, b = weights[s]
                if op == "F":
                    x = tape.tensor(xs[m]) if s == 0 else \
                        tape.tensor(outputs[(s - 1, m)].detach().numpy(), requires_grad=True)
                    inputs[(s, m)] = x
                    last = s == S - 1
                    outputs[(s, m)] = stage_forward(s, x, W, b, ys[m] if last else None, M)
                    next_f[s] += 1
                    tick.append(f"F{m}")
                elif op == "B":
                    out, x = outputs[(s, m)], inputs[(s, m)]
                    dout = None if s == S - 1 else grads_in.pop((s, m))[0]
                    if self.split:
                        dx, groups = pipelining.stage_backward_input(out, dout, [x], [W, b])
                        pending_w[s].append(groups)
                        tick.append(f"B{m}")
                    else:  # B and W together: two ticks, and dx is ready after both
                        dx = pipelining.stage_backward(out, dout, [x])
                        busy[s] = 1
                        tick.append(f"B{m}")
                    if s > 0:
                        grads_in[(s - 1, m)] = (dx[0], now + (1 if self.split else 2))
                    next_b[s] += 1
                    del outputs[(s, m)], inputs[(s, m)]
                elif op == "W":
                    pipelining.stage_backward_weight([W, b], pending_w[s].pop(0))
                    done_w[s] += 1
                    tick.append("W")
                elif op == "busy":  # the second tick of a whole backward
                    busy[s] -= 1
                    done_w[s] += 1
                    tick.append("W")
                else:
                    tick.append(".")
            self.timeline.append(tick)
            now += 1
            self.held_peak = max(self.held_peak,
                                 sum(g.held_bytes for ws in pending_w for g in ws))
        return [(W.grad, b.grad) for W, b in weights]

    def bubbles(self):
        """Idle stage-ticks between a stage's first and last op."""
        total = 0
        for s in range(len(self.timeline[0])):
            row = [t[s] for t in self.timeline]
            busy = [i for i, op in enumerate(row) if op != "."]
            total += sum(op == "." for op in row[busy[0]:busy[-1] + 1])
        return total

    def show(self):
        S = len(self.timeline[0])
        for s in range(S):
            print(f"stage {s}: " + " ".join(f"{t[s]:>3}" for t in self.timeline))


def reference_grads(X, Y, seed=0):
    """A plain backward over the whole batch: the gradients the pipeline must reproduce."""
    weights = [[tape.tensor(W, requires_grad=True), tape.tensor(b, requires_grad=True)]
               for W, b in make_weights(seed)]
    h = tape.tensor(X)
    for W, b in weights[:-1]:
        h = np.tanh(h @ W + b)
    W, b = weights[-1]
    loss = np.sum((h @ W + b - Y) ** 2) / Y.size
    loss.backward()
    return [(W.grad, b.grad) for W, b in weights]


def main():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(64, WIDTHS[0]))
    Y = rng.normal(size=(64, WIDTHS[-1]))
    ref = reference_grads(X, Y)
    for split in (False, True):
        p = Pipeline(split=split)
        grads = p.run(X, Y)
        err = max(np.abs(g - r).max() / np.abs(r).max()
                  for gr, rr in zip(grads, ref) for g, r in zip(gr, rr))
        name = "zero-bubble (B, then W deferred)" if split else "1F1B (whole backward)"
        print(f"\n{name}: {len(p.timeline)} ticks, {p.bubbles()} idle stage-ticks, "
              f"max relative gradient difference to a plain backward {err:.1e}, "
              f"peak bytes held between B and W {p.held_peak}")
        p.show()
        assert err < 1e-12


if __name__ == "__main__":
    main()
