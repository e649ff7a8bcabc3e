"""Compiled replay: tape.compile's planning and execution, guards' replay side, hooks in replay, save/load."""
