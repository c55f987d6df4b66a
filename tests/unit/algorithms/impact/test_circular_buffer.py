"""IMPACT's circular buffer C(N, K) (paper 004 §3.2, Figure 4a, Algorithm 1 lines 4, 6, 10).

Round-robin traversal of N slots, every batch drawn exactly K times with its draws interleaved
with the other held batches', a bounded wait queue that drops its oldest batch, and a draw that
waits (without spinning) for the next batch. For several learners (torch DDP, every update an
all-reduce): buffers fed the same puts draw the same sequence whatever the timing (unless the wait
queue drops), and learners held at once can deadlock where learners paused at an agreed draw do
not.
"""

from __future__ import annotations

import random
import threading

import pytest

from rllib_ext.algorithms.impact.circular_buffer import CircularBuffer


def _drain(buf):
    out = []
    while (drawn := buf.draw()) is not None:
        out.append(drawn)
    return out


@pytest.mark.parametrize("N,K", [(1, 1), (3, 2), (4, 5)])
def test_full_buffer_is_traversed_in_turn_and_each_batch_drawn_exactly_k_times(N, K):
    buf = CircularBuffer(N, K, queue_size=N)
    for item in range(N):
        buf.put(item)
    draws = _drain(buf)
    # Figure 4a: pass j visits batch 0, 1, ..., N-1, each for the j-th time.
    assert draws == [(item, k) for k in range(K) for item in range(N)]
    assert len(buf) == 0 and buf.num_draws_left == 0
    assert buf.num_evicted_used_up == N and buf.num_draws == N * K
    assert sorted(buf.pop_evicted_draw_counts()) == [K] * N


def test_steady_stream_keeps_n_batches_interleaved():
    """One new batch per K draws: after the warm-up every batch is drawn K times, N draws apart."""
    N, K = 3, 2
    buf = CircularBuffer(N, K, queue_size=1)
    buf.record_draws = True
    for item in range(12):
        buf.put(item)
        _drain(buf)
    log = buf.draw_log
    counts = {}
    for number, k in log:
        assert k == counts.get(number, 0)
        counts[number] = k + 1
    assert all(c == K for n, c in counts.items() if n < 12 - N)  # every finished batch got K draws
    assert buf.num_dropped_undrawn == 0
    # A batch's two draws are not back to back once N batches are held: consecutive draws differ.
    tail = [number for number, _ in log[N * K :]]
    assert all(a != b for a, b in zip(tail, tail[1:], strict=False))


def test_full_wait_queue_drops_its_oldest_batch_undrawn():
    buf = CircularBuffer(1, 2, queue_size=2)
    assert buf.put("a") is False and buf.put("b") is False
    assert buf.draw() == ("a", 0)  # "a" takes the slot; "b" waits
    assert buf.put("c") is False and buf.last_dropped is None
    assert buf.put("d") is True and buf.last_dropped == "b"  # "b" is dropped before any draw (its steps: wasted)
    assert buf.num_dropped_undrawn == 1 and buf.num_waiting == 2
    assert [item for item, _ in _drain(buf)] == ["a", "c", "c", "d", "d"]
    assert buf.num_added == 4 and buf.num_draws == 6


def test_nonblocking_draw_returns_none_when_the_cursor_slot_is_empty_and_nothing_waits():
    buf = CircularBuffer(2, 2, queue_size=2)
    assert buf.draw() is None
    buf.put("a")
    assert buf.draw() == ("a", 0)
    # The cursor moved to the empty slot 1; nothing waits, so the learner would wait here
    # although "a" has a draw left (MinibatchBuffer's traversal).
    assert buf.draw() is None and buf.num_draws_left == 1
    buf.put("b")
    assert buf.draw() == ("b", 0) and buf.draw() == ("a", 1)


def test_blocking_draw_waits_for_a_put_and_close_releases_it():
    buf = CircularBuffer(1, 1, queue_size=1)
    got = []
    started = threading.Event()

    def learner():
        started.set()
        got.append(buf.draw(block=True))
        got.append(buf.draw(block=True))

    thread = threading.Thread(target=learner)
    thread.start()
    started.wait()
    buf.put("x")
    thread.join(timeout=0.01)
    buf.close()  # wakes the second, waiting draw
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert got == [("x", 0), None]


def test_pause_waits_for_the_drawn_batch_and_holds_new_draws_until_resume():
    buf = CircularBuffer(1, 3, queue_size=1)
    buf.put("a")
    assert buf.draw() == ("a", 0)  # drawn, its update not finished
    paused = threading.Event()
    thread = threading.Thread(target=lambda: (buf.pause(), paused.set()))
    thread.start()
    assert not paused.wait(0.05)  # pause() waits for the release
    buf.release()
    assert paused.wait(10)
    thread.join(timeout=10)
    assert buf.draw() is None and buf.draw(block=True, timeout=0.01) is None  # held
    buf.resume()
    assert buf.draw() == ("a", 1)


def test_pause_after_draws_lets_the_missing_draws_start_then_holds():
    buf = CircularBuffer(2, 2, queue_size=2)
    buf.put("a")
    buf.put("b")
    drawn = []

    def learner():
        while (item := buf.draw(block=True)) is not None:
            drawn.append(item)
            buf.release()

    assert buf.hold() == 0  # held before the learner starts: no draw yet
    thread = threading.Thread(target=learner)
    thread.start()
    assert buf.pause(after_draws=3, timeout=30)  # the learner draws exactly three, then is held
    assert drawn == [("a", 0), ("b", 0), ("a", 1)] and buf.num_draws == 3
    assert buf.draw(block=True, timeout=0.01) is None  # held
    buf.resume()
    buf.close()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert drawn[3:] in ([], [("b", 1)])  # after resume it may draw on before the close


def test_pause_after_draws_rejects_a_passed_count_and_names_a_count_it_cannot_reach():
    buf = CircularBuffer(2, 1, queue_size=2)
    buf.put("a")
    assert buf.draw() == ("a", 0)
    buf.release()
    with pytest.raises(ValueError, match="1 draws have already started, more than after_draws=0"):
        buf.pause(after_draws=0)
    # The cursor's slot is empty and nothing waits: a second draw can never start.
    with pytest.raises(RuntimeError, match="cannot pause after 2 draws: the buffer has nothing to draw"):
        buf.pause(after_draws=2)


def _replay(puts_per_call, draw_budgets, queue_size=10**6):
    """One learner's buffer: call i puts ``puts_per_call[i]`` batches, then up to
    ``draw_budgets[i]`` draws happen before the next call (how far its thread got: timing)."""
    buf = CircularBuffer(3, 2, queue_size=queue_size)
    buf.record_draws = True
    number = 0
    for puts, budget in zip(puts_per_call, draw_budgets, strict=True):
        for _ in range(puts):
            buf.put(number)
            number += 1
        for _ in range(budget):
            if buf.draw() is None:
                break
    while buf.draw() is not None:
        pass
    return buf.draw_log, buf.num_dropped_undrawn


def test_same_puts_give_the_same_draws_whatever_the_timing_unless_the_queue_drops():
    """Why IMPACT_EXT's driver gives several learners the same batches per call and never more
    than their wait queues take: the round-robin traversal then depends only on the order of
    arrivals, so all learners run the same draws (DDP needs the same number of updates)."""
    rng = random.Random(0)
    puts = [rng.randint(0, 3) for _ in range(30)]
    reference, dropped = _replay(puts, [0] * len(puts))  # every draw after the last put
    # Every batch drawn K = 2 times, but for those the cursor waits to reach (fewer than N = 3).
    assert dropped == 0 and 2 * sum(puts) - 2 * 3 < len(reference) <= 2 * sum(puts)
    for _ in range(50):
        assert _replay(puts, [rng.randint(0, 8) for _ in puts]) == (reference, 0)
    # A full wait queue drops by timing: a learner whose thread was behind drops batches that a
    # faster one drew, and the two then differ in the batches and the number of draws.
    fast_log, fast_dropped = _replay([2, 2], [4, 0], queue_size=2)
    slow_log, slow_dropped = _replay([2, 2], [0, 0], queue_size=2)
    assert (fast_dropped, slow_dropped) == (0, 2) and len(fast_log) > len(slow_log)


def test_lockstep_learners_deadlock_when_held_at_once_and_stop_together_at_an_agreed_draw():
    """Two learners whose every update is a collective (a barrier, as DDP's all-reduce).

    Learner 0 lingers after its second update while learner 1 is already inside its third one,
    waiting for learner 0. Held at once, learner 0 stops between updates and learner 1's update
    can never finish (IMPACT.step's first design). Held at the largest draw count either has
    started, learner 0 draws its third batch too and both stop after it.
    """
    barrier = threading.Barrier(2)
    bufs = [CircularBuffer(2, 2, queue_size=4) for _ in range(2)]
    for buf in bufs:
        for item in range(3):
            buf.put(item)
    linger = threading.Event()
    updates = [0, 0]

    def learner(i):
        while bufs[i].draw(block=True) is not None:
            try:
                barrier.wait(timeout=60)  # the all-reduce of this update
                updates[i] += 1
                if i == 0 and updates[i] == 2:
                    linger.wait(timeout=60)
            except threading.BrokenBarrierError:
                return
            finally:
                bufs[i].release()

    threads = [threading.Thread(target=learner, args=(i,), daemon=True) for i in range(2)]
    for thread in threads:
        thread.start()
    for _ in range(6000):  # a liveness bound: learner 1 enters its third update
        if bufs[1].num_draws == 3 and updates == [2, 2]:
            break
        threading.Event().wait(0.01)
    assert bufs[1].num_draws == 3 and bufs[0].num_draws == 2 and updates == [2, 2]

    # Held at once (no agreed count): learner 0 stops after its update, learner 1 never does.
    assert bufs[0].hold() == 2
    holder = threading.Thread(target=bufs[0].pause)
    holder.start()
    linger.set()
    holder.join(timeout=30)
    assert not holder.is_alive() and bufs[0].num_draws == 2
    assert bufs[1].pause(timeout=0.2) is False  # stuck in its update: the deadlock

    # The agreed draw: each stops drawing and reports its draws; all go on to the largest.
    target = max(buf.hold() for buf in bufs)
    assert target == 3
    results = []
    pausers = [threading.Thread(target=lambda b=buf: results.append(b.pause(after_draws=target))) for buf in bufs]
    for pauser in pausers:
        pauser.start()
    for pauser in pausers:
        pauser.join(timeout=60)
    assert results == [True, True] and updates == [3, 3] and [b.num_draws for b in bufs] == [3, 3]
    for buf in bufs:
        buf.close()
    barrier.abort()


def test_buffer_rejects_bad_sizes():
    with pytest.raises(ValueError, match="N"):
        CircularBuffer(0, 1)
    with pytest.raises(ValueError, match="K"):
        CircularBuffer(1, 0)
    with pytest.raises(ValueError, match="circular_buffer_queue_size"):
        CircularBuffer(1, 1, queue_size=0)
