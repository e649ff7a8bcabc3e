"""The recording core: thread state, the tape, the Tensor, recording of every table family, guards."""
