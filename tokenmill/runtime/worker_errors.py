"""What the failure of a worker process becomes in the process that waits for it.

An exception raised in a worker crosses back pickled: one that does not survive that (a
constructor with required arguments other than its message) would break the whole pool and hide
its cause, so `portable` converts it first. A worker that dies (a signal) is a
`WorkerDiedError`, a `BrokenProcessPool` that says how it died and what it was working on.
"""

from __future__ import annotations

import pickle
import signal
from concurrent.futures.process import BrokenProcessPool


class WorkerDiedError(BrokenProcessPool):
    """A worker process died (killed by a signal: the kernel at the pod's memory limit, an
    operator; or a crash in C code) while it worked on the files this names."""


class WorkerError(Exception):
    """An exception of a worker process that could not cross back to the run as itself (it
    does not pickle): its type, message and traceback as text."""


def portable(error: Exception) -> Exception:
    """`error` itself when it survives pickling (its type then decides on retries), else the
    nearest built-in class it derives from (a ValueError stays a ValueError) or a WorkerError,
    with its type and message: never a worker's error lost as a broken pool."""
    if _survives_pickling(error):
        return error
    message = f"{type(error).__module__}.{type(error).__qualname__}: {error}"
    general = (Exception, BaseException, object)
    builtin = [c for c in type(error).__mro__ if c.__module__ == "builtins" and c not in general]
    for kind in [*builtin, WorkerError]:
        try:
            converted = kind(message)
        except TypeError:  # a built-in that takes more than a message (UnicodeDecodeError)
            continue
        for note in getattr(error, "__notes__", ()):
            converted.add_note(note)
        if _survives_pickling(converted):
            return converted
    return WorkerError(message)


def _survives_pickling(error: BaseException) -> bool:
    try:
        pickle.loads(pickle.dumps(error))
    except Exception:
        return False
    return True


def exit_description(code: int) -> str:
    if code >= 0:
        return f"exited with status {code}"
    name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
    why = {
        "SIGKILL": "killed: the kernel's OOM killer at the pod's memory limit, or an operator",
        "SIGABRT": "aborted: often a failed allocation in C code under the address-space cap",
        "SIGSEGV": "crashed in C code",
        "SIGBUS": "crashed in C code",
    }.get(name, "killed by a signal")
    return f"died of {name} ({why})"
