"""Stop signals: SIGTERM (``docker stop``, systemd, Kubernetes, a Prefect cancellation) stops a run as Ctrl-C does.

A run that is stopped commits the documents it had embedded whole, writes its ledger row as ``interrupted`` and
ends (``citeline.ingest.pipeline``). Ctrl-C reaches it as Python's :class:`KeyboardInterrupt`; SIGTERM, whose default
action kills the process at once (losing everything embedded since the last commit), reaches it as
:class:`StopSignal`, a :class:`KeyboardInterrupt` too, once a handler of this module is installed:

- the CLI installs :func:`handle_stop_signals` for the whole command (exit status 128 + the signal: 130, 143);
- :func:`deferred_sigterm` (``pipeline.run``: :meth:`citeline.Index.ingest` in a user's program) installs it only
  in the main thread and only while SIGTERM has its default action; afterwards it restores the default and sends
  the signal again, so the program still ends as a SIGTERM ends it, only after the commit. A program's own SIGTERM
  handler is left alone (raise :class:`KeyboardInterrupt` from it to get the same commit);
- a host that turns stop signals into an exception of its own (Prefect's ``TerminationSignal``) registers that
  type with :func:`register_stop_exception`; the run treats it as a stop and raises it again after the commit.

Work running in other threads (a task runner's batches) cannot receive the exception: it polls
:func:`stop_requested` between encode batches (``embed_step.embed_chunks``), set by :func:`request_stop`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any

#: The signals handled as Ctrl-C is.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_stop_exceptions: tuple[type[BaseException], ...] = (KeyboardInterrupt,)
_requested = threading.Event()
_received: list[int] = []  # the stop signals received, in order
_interrupted: list[Any] = []  # the ledger rows of the runs a stop interrupted (RunSummary), in order


class StopSignal(KeyboardInterrupt):
    """A stop signal (SIGTERM) received while a handler of this module was installed."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    def __reduce__(self) -> tuple[type[StopSignal], tuple[int]]:
        # Pickled by its number (a shard's worker process sends it back to the coordinator): its args hold the name.
        return StopSignal, (self.signum,)


def register_stop_exception(kind: type[BaseException]) -> None:
    """Treat exceptions of ``kind`` (a host's own for a stop signal) as a stop: the run commits what it embedded."""
    global _stop_exceptions
    if kind not in _stop_exceptions:
        _stop_exceptions = (*_stop_exceptions, kind)


def is_stop(error: BaseException) -> bool:
    """Whether ``error`` means "stop" (Ctrl-C, a stop signal) rather than a failure."""
    return isinstance(error, _stop_exceptions)


def describe(error: BaseException) -> str:
    """What stopped a run, for its ledger row: ``Ctrl-C``, ``SIGTERM``, or a host's exception's name."""
    if isinstance(error, StopSignal):
        return error.args[0]
    if isinstance(error, KeyboardInterrupt):
        return "SIGTERM" if _received and _received[-1] == signal.SIGTERM else "Ctrl-C"
    signum = getattr(error, "signal", None)  # Prefect's TerminationSignal carries its signal
    return signal.Signals(signum).name if isinstance(signum, int) else type(error).__name__


def request_stop(signum: int | None = None) -> None:
    """Ask work running in other threads to stop at its next step (:func:`stop_requested`)."""
    if signum is not None:
        _received.append(signum)
    _requested.set()


def stop_requested() -> bool:
    """Whether a stop was asked for (polled by work that a signal's exception cannot reach)."""
    return _requested.is_set()


def received_signal() -> int | None:
    """The first stop signal a handler of this module received, if any."""
    return _received[0] if _received else None


def note_interrupted(run: Any, *, covers_earlier: bool = False) -> None:
    """Remember the ledger row of a run a stop interrupted (the CLI's last line says what it kept);
    ``covers_earlier``: it sums the rows noted so far (a sharded run's, over its shards' runs in this process)."""
    if covers_earlier:
        _interrupted.clear()
    _interrupted.append(run)


def interrupted_runs() -> list[Any]:
    """The ledger rows of the runs a stop interrupted in this process."""
    return list(_interrupted)


def clear_request() -> None:
    """Forget a stop asked of an earlier run (a run starts with none asked)."""
    _requested.clear()


def reset() -> None:
    """Forget the stops received (a long-lived process, or a test, that runs again)."""
    _requested.clear()
    _received.clear()
    _interrupted.clear()


def _raise_stop(signum: int, frame: FrameType | None) -> None:
    request_stop(signum)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    raise StopSignal(signum)


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


@contextlib.contextmanager
def handle_stop_signals() -> Iterator[None]:
    """While inside: SIGTERM raises :class:`StopSignal` and SIGINT :class:`KeyboardInterrupt` in the main thread,
    each also setting :func:`stop_requested` for other threads. A signal whose handler is not the default (a
    program's own, or ignored: ``nohup``, a shell's background job) is left as it is. Outside the main thread this
    does nothing (Python runs signal handlers there only)."""
    if not _in_main_thread():
        yield
        return
    previous: dict[int, Any] = {}
    for signum in STOP_SIGNALS:
        current = signal.getsignal(signum)
        if current in (signal.SIG_DFL, signal.default_int_handler):
            previous[signum] = signal.signal(signum, _raise_stop)
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


@contextlib.contextmanager
def deferred_sigterm() -> Iterator[None]:
    """Around a run in a program that left SIGTERM at its default action (kill): a SIGTERM stops the run as Ctrl-C
    does (it commits what it embedded whole), then the default is restored and the signal sent again, so the
    process ends as SIGTERM would have ended it. Does nothing outside the main thread or when SIGTERM has a
    handler (the CLI's, Prefect's, the program's own)."""
    if not _in_main_thread() or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        yield
        return
    before = len(_received)
    signal.signal(signal.SIGTERM, _raise_stop)
    try:
        yield
    finally:
        if signal.getsignal(signal.SIGTERM) is _raise_stop:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        if signal.SIGTERM in _received[before:]:  # the run has committed and recorded itself: end as SIGTERM ends
            os.kill(os.getpid(), signal.SIGTERM)
