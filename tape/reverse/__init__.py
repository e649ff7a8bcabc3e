"""Reverse mode: the backward drivers (jitted and differentiable), vector-Jacobian rules, split backward, custom Functions."""
