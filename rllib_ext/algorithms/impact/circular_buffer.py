"""The circular buffer C(N, K) of IMPACT (paper 004, §3.2, Figure 4a, Algorithm 1 lines 4, 6, 10).

Figure 4a: "the learner traverses the buffer"; "upon being traversed K times, a batch is
discarded and replaced by a new worker batch". The buffer has ``N`` slots
(``circular_buffer_num_batches``) and a cursor. Each draw takes the batch in the cursor's slot
and moves the cursor to the next slot, so consecutive draws visit the N held batches in turn
(round robin). A batch leaves its slot after its K-th draw (``circular_buffer_iterations_per_batch``,
Algorithm 1 line 10); when the cursor reaches an empty slot, the slot is refilled with the
oldest waiting worker batch. This is the traversal of RLlib's old-stack ``MinibatchBuffer``
(``ray.rllib.execution.minibatch_buffer``, the ring buffer of the code base IMPACT was written
in; the review of issue 21 calls it the authors'): every batch is drawn exactly K times, and its
K draws are interleaved with the other held batches' draws.

Worker batches that arrive while every slot is full wait in a bounded queue (``queue_size``,
the config's ``circular_buffer_queue_size``). When sampling outpaces the learner and the queue is full,
the oldest waiting batch is dropped before it was ever drawn and counted
(``num_dropped_undrawn``): data that the learner cannot use, as in the paper's regime where
workers are faster than the learner. When the learner outpaces sampling, :meth:`draw` waits on
a condition variable until a batch arrives (``block=True``; no busy wait), or returns None
(``block=False``, the learner in ``training_step``).

Each batch carries its draw count ``k``: the learner evaluates a batch on the target network at
its first draw (k = 0, Algorithm 1 line 7) and stores the output in the batch, so later draws
reuse it. :meth:`draw` therefore returns ``(item, k)``.

``MinibatchBuffer``'s ``init_num_passes`` ramp (the first batches drawn fewer than K times) is
not implemented: every batch gets K draws, as the paper describes.

Placement. IMPACT_EXT keeps the buffer inside the Learner (as RLlib's APPO does), not in a
separate replay actor. Measured with ``benchmarks/impact_vs_appo.py buffer-placement`` on the
2-core development machine (2026-11-22, real 500-step CartPole train batches, N=4, K=2, 200
rounds; see benchmarks/RESULTS.md): one put + K draws per batch cost 0.022 ms in the learner
against 12.5 ms through a ``ray.remote(num_cpus=0)`` actor, about 570x slower.

Pausing at an agreed draw. With several learners (torch DDP) every update is an all-reduce, so
the learners must stop after the same number of draws: :meth:`hold` stops new draws at once and
returns the draws started so far; :meth:`pause` with ``after_draws`` lets the learner draw on to an
agreed count (the largest any learner returned) and then holds it. Buffers that received the
same puts in the same order allow the same draws (the traversal depends only on the order of
arrivals, never on timing, as long as the wait queue never drops; see ``impact.py``), so every
learner can reach the agreed count.

Thread-safe: the driver-facing call puts, the learner thread draws (one lock, one condition).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from typing import Any


@dataclasses.dataclass
class _Entry:
    item: Any
    draws: int = 0


class CircularBuffer:
    """C(N, K): N slots traversed in turn, each batch drawn exactly K times; a bounded wait queue.

    Args:
        num_batches: N, the number of slots (paper §3.2).
        iterations_per_batch: K, how often one batch is drawn before it leaves its slot.
        queue_size: How many worker batches may wait for a free slot; the oldest waiting batch
            is dropped (and counted) when one more arrives.

    Raises:
        ValueError: If N < 1, K < 1 or queue_size < 1.
    """

    def __init__(self, num_batches: int, iterations_per_batch: int, queue_size: int = 1):
        if int(num_batches) < 1:
            raise ValueError(f"circular_buffer_num_batches (N) must be >= 1, got {num_batches}")
        if int(iterations_per_batch) < 1:
            raise ValueError(f"circular_buffer_iterations_per_batch (K) must be >= 1, got {iterations_per_batch}")
        if int(queue_size) < 1:
            raise ValueError(f"circular_buffer_queue_size must be >= 1, got {queue_size}")
        self.num_batches = int(num_batches)
        self.iterations_per_batch = int(iterations_per_batch)
        self.queue_size = int(queue_size)
        self._slots: list[_Entry | None] = [None] * self.num_batches
        self._cursor = 0
        self._waiting: collections.deque[Any] = collections.deque()
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._closed = False
        self._paused = False
        self._draw_limit: int | None = None  # with pause(after_draws=...): draws allowed up to here
        self._in_use = 0  # drawn batches whose update has not finished (release())
        # Lifetime statistics.
        self.num_added = 0
        self.num_draws = 0
        self.num_evicted_used_up = 0  # left their slot after K draws (Algorithm 1 line 10)
        self.num_dropped_undrawn = 0  # dropped from the full wait queue, never drawn
        self.last_dropped: Any = None  # the batch the last put() dropped (None: it dropped none)
        self._draws_of_evicted: list[int] = []
        #: Per draw: (batch number in arrival order, k); kept only when ``record_draws`` is set.
        self.record_draws = False
        self.draw_log: list[tuple[int, int]] = []

    def put(self, item: Any) -> bool:
        """Queues a worker batch for the next free slot.

        Returns:
            True if the wait queue was full and its oldest (never drawn) batch was dropped.
        """
        with self._changed:
            dropped = len(self._waiting) >= self.queue_size
            self.last_dropped = None
            if dropped:
                self.last_dropped = self._waiting.popleft()[1]
                self.num_dropped_undrawn += 1
            self._waiting.append((self.num_added, item))
            self.num_added += 1
            self._changed.notify_all()
        return dropped

    def draw(self, block: bool = False, timeout: float | None = None) -> tuple[Any, int] | None:
        """The batch in the cursor's slot (refilled from the wait queue if empty); moves the cursor.

        The caller calls :meth:`release` when it has finished with the batch (its update).

        Args:
            block: Wait until a batch can be drawn (or :meth:`close`), instead of returning None.
            timeout: With ``block``, the longest wait in seconds (None: no limit).

        Returns:
            ``(item, k)`` where ``k`` counts the batch's earlier draws (0 on its first draw), or
            None when the cursor's slot is empty and no batch waits, the buffer is paused, or it
            was closed.
        """
        with self._changed:
            if block:
                self._changed.wait_for(lambda: self._closed or self._can_draw(), timeout=timeout)
            if not self._can_draw():
                return None
            self._in_use += 1
            slot = self._cursor
            entry = self._slots[slot]
            if entry is None:
                number, item = self._waiting.popleft()
                entry = self._slots[slot] = _Entry((number, item))
            number, item = entry.item
            k = entry.draws
            entry.draws += 1
            self.num_draws += 1
            if self.record_draws:
                self.draw_log.append((number, k))
            if entry.draws >= self.iterations_per_batch:
                self._slots[slot] = None
                self.num_evicted_used_up += 1
                self._draws_of_evicted.append(entry.draws)
            self._cursor = (slot + 1) % self.num_batches
            return item, k

    def _can_draw(self) -> bool:
        if self._draw_limit is not None and self.num_draws >= self._draw_limit:
            return False
        return self._drawable() and not self._paused and not self._closed

    def _drawable(self) -> bool:
        return self._slots[self._cursor] is not None or bool(self._waiting)

    def release(self) -> None:
        """The caller has finished with the batch of its last :meth:`draw`."""
        with self._changed:
            self._in_use -= 1
            self._changed.notify_all()

    def hold(self) -> int:
        """Lets no new draw start (without waiting for the drawn batches).

        Returns:
            The draws started so far (:attr:`num_draws`, those still in progress included).
        """
        with self._changed:
            self._paused = True
            self._draw_limit = None
            return self.num_draws

    def pause(self, after_draws: int | None = None, timeout: float | None = None) -> bool:
        """Holds new draws once ``after_draws`` draws have started, and waits until every drawn
        batch was released.

        After it returns True no update runs until :meth:`resume` (the learner's state stands
        still).

        Args:
            after_draws: Draws (lifetime :attr:`num_draws`) to let start before holding; None
                holds at once (as :meth:`hold`). Draws between the current count and this one
                start as usual (another thread draws them).
            timeout: The longest wait in seconds (None: no limit).

        Returns:
            True once paused at ``after_draws`` with nothing in use; False on timeout.

        Raises:
            ValueError: If more than ``after_draws`` draws have already started.
            RuntimeError: If the buffer can never allow the missing draws (its cursor's slot is
                empty, nothing waits and nothing is in use), or was closed before them.
        """
        with self._changed:
            if after_draws is None:
                self._paused, self._draw_limit = True, None
            elif self.num_draws > after_draws:
                raise ValueError(f"{self.num_draws} draws have already started, more than after_draws={after_draws}")
            else:
                self._paused, self._draw_limit = False, after_draws
                self._changed.notify_all()

            def done_or_stuck() -> bool:
                if self._in_use:
                    return False
                return after_draws is None or self.num_draws >= after_draws or self._closed or not self._drawable()

            if not self._changed.wait_for(done_or_stuck, timeout=timeout):
                return False
            if after_draws is not None and self.num_draws < after_draws:
                why = "was closed" if self._closed else "has nothing to draw (empty cursor slot, nothing waiting)"
                raise RuntimeError(
                    f"cannot pause after {after_draws} draws: the buffer {why} after {self.num_draws} draws"
                )
            self._paused, self._draw_limit = True, None
            return True

    def resume(self) -> None:
        """Lets draws start again after :meth:`pause`."""
        with self._changed:
            self._paused, self._draw_limit = False, None
            self._changed.notify_all()

    def close(self) -> None:
        """Wakes every waiting :meth:`draw` (which returns None from now on)."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()

    def __len__(self) -> int:
        """Batches held in slots or waiting for one (each with at least one draw left)."""
        with self._lock:
            return sum(e is not None for e in self._slots) + len(self._waiting)

    @property
    def entries(self) -> list[tuple[Any, int]]:
        """``(item, draws so far)`` of the batches in slots, in slot order (a snapshot)."""
        with self._lock:
            return [(e.item[1], e.draws) for e in self._slots if e is not None]

    @property
    def num_draws_left(self) -> int:
        """How many draws the held and waiting batches still allow in total."""
        with self._lock:
            held = sum(self.iterations_per_batch - e.draws for e in self._slots if e is not None)
            return held + self.iterations_per_batch * len(self._waiting)

    @property
    def fill(self) -> float:
        """Occupied slots as a fraction of N."""
        with self._lock:
            return sum(e is not None for e in self._slots) / self.num_batches

    @property
    def num_waiting(self) -> int:
        """Worker batches waiting for a slot."""
        with self._lock:
            return len(self._waiting)

    def pop_evicted_draw_counts(self) -> list[int]:
        """Draw counts of the batches discarded since the last call (for 'mean draws per batch')."""
        with self._lock:
            out, self._draws_of_evicted = self._draws_of_evicted, []
        return out

    def clear(self) -> None:
        """Drops every held and waiting batch (statistics are kept)."""
        with self._lock:
            self._slots = [None] * self.num_batches
            self._waiting.clear()

    def get_stats(self) -> dict[str, float]:
        """Lifetime statistics: batches added, draws, evictions, current fill."""
        with self._lock:
            held = sum(e is not None for e in self._slots)
            return {
                "num_batches_held": held,
                "num_waiting": len(self._waiting),
                "fill": held / self.num_batches,
                "num_added": self.num_added,
                "num_draws": self.num_draws,
                "num_evicted_used_up": self.num_evicted_used_up,
                "num_dropped_undrawn": self.num_dropped_undrawn,
            }
