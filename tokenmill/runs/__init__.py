"""Runs on the instance as processes: which process executes each, which are dead, and what a
step waits for before it claims its pool slot."""
