"""IMPACT's learner thread (paper 004 Figure 1c): draws from C(N, K) and trains in its own thread.

"The learner never waits for workers, workers never wait for the learner": the driver only
hands batches to the buffer, and this thread draws them (Algorithm 1 line 6) and calls the
learner's update on each (lines 7-12, ``step_fn``). The class knows nothing of Ray or RLlib: a
buffer with :class:`~rllib_ext.algorithms.impact.circular_buffer.CircularBuffer`'s draw/pause
calls (:class:`DrawBuffer`) and a function are all it needs, so it is unit-tested on its own.

Its three duties:

* **Run and stop.** The thread draws, calls ``step_fn(item, k)`` and releases the draw, until
  :meth:`LearnerThread.stop`. Every wait is bounded: an idle draw (empty buffer) waits at most
  ``idle_wait_s`` before the thread looks at the stop flag again, and :meth:`~LearnerThread.stop`
  joins for at most ``timeout_s``.
* **Pause at an agreed draw.** With several learners (torch DDP) every update is an all-reduce,
  so all must stop after the same update: :meth:`~LearnerThread.stop_draws` stops new draws at
  once and returns the draws started; :meth:`~LearnerThread.pause` lets the thread draw on to an
  agreed count (the largest any learner returned) and waits, bounded, until its update finished;
  :meth:`~LearnerThread.resume` lets it go on.
* **Error hand-off.** An exception in ``step_fn`` ends the thread and is kept;
  :meth:`~LearnerThread.raise_error` re-raises it in the caller (the learner's next call from the
  driver) with the thread's traceback, once, and the next :meth:`~LearnerThread.resume` starts a
  new thread (e.g. after a restore).

Locks. The buffer's one condition orders draws, pauses and puts. What ``step_fn`` changes (the
weights, the metrics) is the caller's to lock: IMPACT's learner serializes its updates with
checkpoint reads and writes (an update lock), hands weight snapshots over under a second lock
and shares its metrics logger with the thread under RLlib's own (``impact_learner.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

logger = logging.getLogger(__name__)

#: The longest an idle draw (nothing to draw) waits before the thread looks at its stop flag
#: again, in seconds. A put or :meth:`DrawBuffer.close` wakes it at once; this only bounds the wait.
IDLE_WAIT_S = 1.0

#: The longest :meth:`LearnerThread.stop` waits for the running update to finish, in seconds.
STOP_TIMEOUT_S = 30.0

#: How often a bounded :meth:`LearnerThread.pause` looks whether the thread is still alive, in seconds.
_PAUSE_POLL_S = 1.0


class DrawBuffer(Protocol):
    """What the learner thread needs of its buffer (:class:`CircularBuffer` provides it)."""

    num_draws: int

    def draw(self, block: bool = False, timeout: float | None = None) -> tuple[Any, int] | None:
        """``(item, k)`` or None; with ``block`` waits up to ``timeout`` seconds for one."""

    def release(self) -> None:
        """The update on the last drawn item has finished."""

    def hold(self) -> int:
        """Stops new draws; returns the draws started so far."""

    def pause(self, after_draws: int | None = None, timeout: float | None = None) -> bool:
        """Holds after ``after_draws`` draws once nothing is in use; False on timeout."""

    def resume(self) -> None:
        """Lets draws start again."""

    def close(self) -> None:
        """Wakes every waiting draw; later draws return None."""


class LearnerThread:
    """Draws from ``buffer`` and calls ``step_fn`` on each draw, in a daemon thread (module docstring).

    Args:
        buffer: Where the batches come from (:class:`DrawBuffer`).
        step_fn: ``step_fn(item, k)`` trains on one drawn item (``k``: its earlier draws); called
            in the thread, or in the caller by :meth:`run_in_caller`.
        name: The thread's name, and how errors and log lines name it.
        idle_wait_s: The longest one idle draw waits (seconds) before the stop flag is read again.
    """

    def __init__(
        self,
        buffer: DrawBuffer,
        step_fn: Callable[[Any, int], None],
        *,
        name: str = "LearnerThread",
        idle_wait_s: float = IDLE_WAIT_S,
    ):
        self._buffer = buffer
        self._step_fn = step_fn
        self.name = name
        self.idle_wait_s = float(idle_wait_s)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._stopping = threading.Event()

    # -- running ---------------------------------------------------------------------------
    def resume(self) -> None:
        """Lets draws start again (after :meth:`pause`) and starts the thread if it does not run."""
        self._buffer.resume()
        if self._thread is None and not self._stopping.is_set():
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def _run(self) -> None:
        """Draws (each idle wait bounded by ``idle_wait_s``) and steps until :meth:`stop` or an error."""
        try:
            while not self._stopping.is_set():
                drawn = self._buffer.draw(block=True, timeout=self.idle_wait_s)
                if drawn is not None:
                    self._step(*drawn)
        except BaseException as e:  # noqa: BLE001 - handed to the caller by raise_error()
            logger.exception("%s failed", self.name)
            self._error = e

    def _step(self, item: Any, k: int) -> None:
        """``step_fn`` on one drawn item; the draw is released whatever happens."""
        try:
            self._step_fn(item, k)
        finally:
            self._buffer.release()

    def run_in_caller(self, max_steps: int | None = None) -> int:
        """Draws without waiting and steps in the caller's thread, the learner-thread-less mode.

        Args:
            max_steps: The most draws to step on (None: until nothing can be drawn).

        Returns:
            The draws stepped on.
        """
        done = 0
        while max_steps is None or done < max_steps:
            drawn = self._buffer.draw(block=False)
            if drawn is None:
                break
            self._step(*drawn)
            done += 1
        return done

    @property
    def alive(self) -> bool:
        """Whether the thread runs."""
        return self._thread is not None and self._thread.is_alive()

    @property
    def error(self) -> BaseException | None:
        """The exception that ended the thread, until :meth:`raise_error` hands it over."""
        return self._error

    def raise_error(self) -> None:
        """Re-raises (once) the exception that ended the thread, with the thread's traceback.

        The next :meth:`resume` then starts a new thread.
        """
        if self._error is not None:
            error, self._error = self._error, None
            self._thread = None
            raise error

    # -- pausing at an agreed draw ---------------------------------------------------------------
    def stop_draws(self) -> int:
        """Lets no new draw start, without waiting for the running update.

        Waiting here could deadlock several learners: one learner held between updates while
        another waits inside its update for the first one's all-reduce. :meth:`pause` then waits.

        Returns:
            The draws started so far, the running one included.
        """
        return self._buffer.hold()

    def pause(self, after_draws: int | None, *, timeout_s: float, hint: str = "") -> None:
        """Lets the thread draw on up to ``after_draws`` draws, waits for their updates, then holds
        it until :meth:`resume`.

        Args:
            after_draws: The draws (lifetime, as :meth:`stop_draws` counts them) to finish before
                holding; None: hold after the running update.
            timeout_s: The longest wait, in seconds.
            hint: Appended to the timeout's message (what may hold an update up).

        Raises:
            Whatever ended the thread, if it ends before reaching ``after_draws``.
            TimeoutError: The thread neither paused nor ended within ``timeout_s``.
        """
        deadline = time.monotonic() + timeout_s
        while not self._buffer.pause(
            after_draws=after_draws, timeout=max(0.0, min(_PAUSE_POLL_S, deadline - time.monotonic()))
        ):
            if not self.alive:
                break
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"{self.name} did not pause after draw {after_draws} within {timeout_s:.0f} s "
                    f"({self._buffer.num_draws} draws started, the last update still running{hint})"
                )
        self.raise_error()

    # -- stopping --------------------------------------------------------------------------------
    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> bool:
        """Stops the thread: no new draw starts, the running update finishes; joins it.

        Args:
            timeout_s: The longest wait for the running update, in seconds.

        Returns:
            Whether the thread has ended (False: its update was still running after ``timeout_s``).
        """
        self._stopping.set()
        self._buffer.close()
        if self._thread is not None:
            self._thread.join(timeout=timeout_s)
        return not self.alive
