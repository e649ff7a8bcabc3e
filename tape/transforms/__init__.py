"""Function transforms built on both modes: grad, vjp, jacobians, gradcheck, checkpoint."""
