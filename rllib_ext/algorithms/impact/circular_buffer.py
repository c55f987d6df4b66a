"""The circular buffer C(N, K) of IMPACT (paper 004, §3.2, Figure 4a, Algorithm 1 lines 4, 6, 10).

The buffer stores at most ``N`` batches (``circular_buffer_num_batches``); each may be drawn at
most ``K`` times (``circular_buffer_iterations_per_batch``, the "replay coefficient"). A batch is
discarded after its K-th draw (Algorithm 1 line 10) or, when a new worker batch arrives while N
batches are held, the oldest batch is replaced by it (§3.2: "Upon being traversed K times, a
batch is discarded and replaced by a new worker batch"; Figure 4a).

Each entry carries its draw count ``k``: the learner evaluates a batch on the target network the
first time it is drawn (k = 0, Algorithm 1 line 7) and stores the output in the batch, so later
draws reuse it. :meth:`CircularBuffer.draw` therefore returns ``(item, k)``.

Placement. IMPACT_EXT keeps the buffer inside the Learner (as RLlib's APPO does), not in a
separate replay actor. Measured with ``benchmarks/impact_vs_appo.py buffer-placement`` on the
2-core development machine (2026-11-22, real 500-step CartPole train batches, N=4, K=2, 200
rounds; see benchmarks/RESULTS.md): one put + K draws per batch cost 0.022 ms in the learner
against 12.5 ms through a ``ray.remote(num_cpus=0)`` actor (a round trip per call plus the
batch's serialisation on every draw), about 570x slower; the in-learner buffer also needs no
extra process on a 2-core machine, so it is the one kept. The class is plain Python so that it
can be wrapped in ``ray.remote`` (that is how the alternative was measured).

Not thread-safe: IMPACT's learner draws from one thread.
"""

from __future__ import annotations

import collections
import dataclasses
from typing import Any

import numpy as np


@dataclasses.dataclass
class _Entry:
    item: Any
    draws: int = 0


class CircularBuffer:
    """C(N, K): at most ``num_batches`` batches, each drawn at most ``iterations_per_batch`` times.

    Args:
        num_batches: N, the number of batches held (paper §3.2).
        iterations_per_batch: K, how often one batch may be drawn before it is discarded.
        seed: Seed of the generator that picks which batch to draw.

    Raises:
        ValueError: If N < 1 or K < 1.
    """

    def __init__(self, num_batches: int, iterations_per_batch: int, seed: int | None = None):
        if int(num_batches) < 1:
            raise ValueError(f"circular_buffer_num_batches (N) must be >= 1, got {num_batches}")
        if int(iterations_per_batch) < 1:
            raise ValueError(f"circular_buffer_iterations_per_batch (K) must be >= 1, got {iterations_per_batch}")
        self.num_batches = int(num_batches)
        self.iterations_per_batch = int(iterations_per_batch)
        self._entries: collections.deque[_Entry] = collections.deque()
        self._rng = np.random.default_rng(seed)
        # Lifetime statistics.
        self.num_added = 0
        self.num_draws = 0
        self.num_evicted_used_up = 0  # discarded after K draws (Algorithm 1 line 10)
        self.num_evicted_overflow = 0  # replaced by a newer batch before K draws
        self._draws_of_evicted: list[int] = []

    def put(self, item: Any) -> int | None:
        """Adds a batch with draw count 0.

        If N batches are already held, the oldest one is dropped to make room.

        Returns:
            The number of times the dropped batch had been drawn, or None if nothing was dropped.
        """
        dropped = None
        if len(self._entries) >= self.num_batches:
            old = self._entries.popleft()
            dropped = old.draws
            self.num_evicted_overflow += 1
            self._draws_of_evicted.append(old.draws)
        self._entries.append(_Entry(item))
        self.num_added += 1
        return dropped

    def draw(self) -> tuple[Any, int]:
        """Draws one held batch uniformly at random (Algorithm 1 line 6).

        Returns:
            ``(item, k)`` where ``k`` is how often the batch had been drawn before this draw
            (k = 0 on its first draw). A batch drawn for the K-th time leaves the buffer.

        Raises:
            IndexError: If the buffer is empty.
        """
        if not self._entries:
            raise IndexError("draw from an empty CircularBuffer")
        idx = int(self._rng.integers(len(self._entries)))
        entry = self._entries[idx]
        k = entry.draws
        entry.draws += 1
        self.num_draws += 1
        if entry.draws >= self.iterations_per_batch:
            del self._entries[idx]
            self.num_evicted_used_up += 1
            self._draws_of_evicted.append(entry.draws)
        return entry.item, k

    def __len__(self) -> int:
        """Number of batches currently held (each with at least one draw left)."""
        return len(self._entries)

    @property
    def num_draws_left(self) -> int:
        """How many draws the held batches still allow in total."""
        return sum(self.iterations_per_batch - e.draws for e in self._entries)

    @property
    def fill(self) -> float:
        """Held batches as a fraction of N."""
        return len(self._entries) / self.num_batches

    def pop_evicted_draw_counts(self) -> list[int]:
        """Draw counts of the batches discarded since the last call (for 'mean draws per batch')."""
        out, self._draws_of_evicted = self._draws_of_evicted, []
        return out

    def clear(self) -> None:
        """Drops every held batch (statistics are kept)."""
        self._entries.clear()

    def get_stats(self) -> dict[str, float]:
        """Lifetime statistics: batches added, draws, evictions, current fill."""
        return {
            "num_batches_held": len(self._entries),
            "fill": self.fill,
            "num_added": self.num_added,
            "num_draws": self.num_draws,
            "num_evicted_used_up": self.num_evicted_used_up,
            "num_evicted_overflow": self.num_evicted_overflow,
        }
