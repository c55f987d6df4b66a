"""The Remember-and-Forget replay memory (paper 003 §2-3, App. B-C), shared by VRACER_EXT,
DDPG_EXT and NAF_EXT.

The memory (RM) stores whole episodes, step by step: the state s_t, the action a_t, the reward
r_{t+1}, the behaviour's statistics μ_t (a float vector whose meaning the algorithm defines:
mean and standard deviation for the Gaussian policies of paper 003), and, refreshed after
every minibatch, the most recent importance weight ρ_t, the value V(s_t) and the V-RACER
target V̂^tbc_t (Eq. 8). Per episode it keeps the last state s_T, whether s_T is terminal and
the bootstrap value V(s_T) (0 after a terminal state).

* FIFO by whole episodes: while the RM holds more than N steps, the oldest episode is removed
  (Algorithm 1; its "n_obs > N_start" is read as N, the RM size). The newest episode is never
  removed, even if it alone is longer than N.
* n_far, the number of far-policy steps, is counted from the stored ρ (Rule 1, Eq. 12). The
  count is kept up to date as steps enter, leave or get a new ρ, against a reference c_max;
  :meth:`far_fraction` recounts the whole memory when its c_max has moved more than
  ``far_recount_tol`` (1e-4) from that reference. In between, the steps whose ρ (or 1/ρ) lies
  between the two bounds are classified with the reference: c_max(t) of Eq. (13) falls by
  C·A ≈ 2·10⁻⁶ per env step at the paper's settings, so the whole memory is recounted about
  every 50 gradient steps, and a stale classification needs ρ within 10⁻⁴ of c_max.
* Sampling: B uniform time steps (``er``, ``refer``, ``refer1``, ``refer2``) or rank-based
  prioritized (``per``, Schaul et al. 2016: P(i) ∝ rank(i)^-α by |TD error|, importance
  weights (N·P(i))^-β normalized by their maximum; ranks are re-sorted when episodes enter or
  leave and every ``per_resort_interval`` write-backs). New steps get the largest stored |TD
  error| (1 in an empty memory) and win ties, so they rank first, as Schaul et al.'s new
  transitions get the maximal priority; the learner anneals β to 1 with
  :func:`per_beta_schedule`. RLlib's
  ``PrioritizedEpisodeReplayBuffer`` is proportional (not rank-based) and samples episode
  chunks without per-step write-back of ρ and V, so it does not fit here.
* :meth:`write_back` takes the new ρ and V of a minibatch and corrects V̂^tbc of the sampled
  steps and of the prior steps of their episodes with Eq. (8) (Algorithm 3). Below an
  episode's earliest sampled step m, a correction Δ_m of V̂^tbc_m reaches step t < m as
  Δ_m·Π_{i=t}^{m−1} γρ̄_i (Eq. 8 is affine in V̂^tbc_{t+1} with slope γρ̄_t ≤ γ): it shrinks
  geometrically and never vanishes (unless a ρ̄ is 0), so no exact method stops early. The
  correction is applied down to the first step s (going back from m) where
  Π_{i=s}^{m−1} γρ̄_i ≤ ``retrace_tolerance`` (ε; 0, the default: down to the episode's
  first step, as the paper's Algorithm 3); every step t < s keeps its V̂^tbc, off from the
  full recompute by at most ε·|Δ_m| for this write-back. A later write-back whose window
  covers t recomputes it from its successors. With 2^18 steps in episodes of 1000 (the
  paper's MuJoCo setting) the full recompute touched ~10⁵ rows per minibatch (8 ms); the
  window is about ln ε / ln(γ·mean ρ̄) steps (~130 at γρ̄ ≈ 0.9, ε = 10⁻⁶), and at most
  ln ε / ln γ.
* App. B: :meth:`state_stats` gives μ_s, σ_s of the stored states (Eq. 14-15);
  :meth:`update_reward_scale` refreshes σ_r = sqrt(mean r²) (Eq. 16) and rescales rewards
  r̂ = r/(σ_r + ε) in every target (stored V̂^tbc are recomputed then).

Storage is flat (struct of arrays) with logical step indices that never change while a step
is stored; the live steps are the range [head, tail). The class is plain Python so that it
runs in a learner or as a Ray actor (``ray.remote(num_cpus=0)(ReplayMemory)``).
"""

from __future__ import annotations

from collections import deque
from typing import Any

import numpy as np

from rllib_ext.common.refer.retrace import retrace_segments_kernel, retrace_tbc
from rllib_ext.common.refer.rules import REPLAY_MODES, near_policy_mask

__all__ = ["ReplayMemory", "per_beta_schedule"]

EPS = 1e-7  # ε of App. B
#: Floor of σ_s relative to the data's scale (:meth:`ReplayMemory.state_stats`, issue 42).
STD_FLOOR = 1e-2


def per_beta_schedule(beta0: float, step: int, horizon: int) -> float:
    """PER's importance-sampling exponent β, annealed linearly from β_0 to 1 over ``horizon`` steps.

    Schaul et al. (2016, §3.4) anneal β from its initial value to 1 by the end of learning, so
    that the importance weights fully correct the prioritized sampling's bias when the policy
    converges. β stays 1 after ``horizon`` steps.

    Args:
        beta0: β at step 0 (Schaul et al.: 0.5 with rank-based PER).
        step: The gradient step k.
        horizon: Gradient steps until β reaches 1 (>= 1).
    """
    return float(beta0 + (1.0 - beta0) * min(1.0, step / horizon))


class ReplayMemory:
    """Replay memory of whole episodes with ReF-ER bookkeeping (see module docstring).

    Args:
        capacity: N, the maximal number of stored steps (paper: 2^18).
        gamma: γ, for the Retrace/TBC targets (Eq. 8) and q_ret.
        mode: Replay mode (``"refer"``, ``"refer1"``, ``"refer2"``, ``"er"``, ``"per"``); only
            ``"per"`` changes sampling.
        per_alpha: α of rank-based PER (Schaul et al.: 0.7).
        per_beta: β of PER's importance weights (Schaul et al.: 0.5 at the start); the learner
            anneals it to 1 (:func:`per_beta_schedule`) by setting this attribute.
        per_resort_interval: Write-backs between re-sorts of the PER ranks.
        seed: Seed of the sampler.
        far_recount_tol: Change of c_max that makes :meth:`far_fraction` recount the whole
            memory (module docstring); 0 recounts whenever c_max changes.
        retrace_tolerance: ε of the write-back's window below the earliest sampled step of an
            episode (module docstring); 0 corrects every prior step.
        compiled_targets: Eq. (8) by the numba loop over each episode's rows
            (:func:`~rllib_ext.common.refer.retrace.retrace_segments_kernel`; numpy's vectorized
            path without numba or when False).
    """

    def __init__(
        self,
        capacity: int = 2**18,
        gamma: float = 0.995,
        mode: str = "refer",
        *,
        per_alpha: float = 0.7,
        per_beta: float = 0.5,
        per_resort_interval: int = 1000,
        seed: int | None = None,
        far_recount_tol: float = 1e-4,
        retrace_tolerance: float = 0.0,
        compiled_targets: bool = True,
    ):
        if mode not in REPLAY_MODES:
            raise ValueError(f"Unknown replay mode {mode!r}; valid are {', '.join(REPLAY_MODES)}")
        if int(capacity) < 1:
            raise ValueError(f"capacity must be >= 1, got {capacity}")
        self.capacity = int(capacity)
        self.gamma = float(gamma)
        self.mode = mode
        self.per_alpha = float(per_alpha)
        self.per_beta = float(per_beta)
        self.per_resort_interval = int(per_resort_interval)
        self.rng = np.random.default_rng(seed)
        self.reward_scale = 1.0  # 1/(σ_r + ε), Eq. (16); 1 until the first refresh
        self._cols: dict[str, np.ndarray] = {}
        self._alloc = 0
        self._base = 0  # logical index of physical row 0
        self.head = 0  # first live logical index
        self.tail = 0  # one past the last live logical index
        # Per episode (oldest first): [serial, start, length, last_obs, terminated].
        self._episodes: deque[list[Any]] = deque()
        self._first_serial = 0
        self._next_serial = 0
        self.num_added_episodes = 0
        self.num_evicted_episodes = 0
        self._per_cdf: np.ndarray | None = None
        self._per_order: np.ndarray | None = None
        self._per_p: np.ndarray | None = None
        self._writes_since_sort = 0
        self.far_recount_tol = float(far_recount_tol)
        if not 0.0 <= float(retrace_tolerance) < 1.0:
            raise ValueError(f"retrace_tolerance must be in [0, 1), got {retrace_tolerance}")
        self.retrace_tolerance = float(retrace_tolerance)
        self.compiled_targets = bool(compiled_targets)
        self._far_c: float | None = None  # the c_max of _far_count; None: not counted yet
        self._far_count = 0

    # ------------------------------------------------------------------ sizes and storage
    def __len__(self) -> int:
        """n_obs: the number of stored steps."""
        return self.tail - self.head

    @property
    def num_episodes(self) -> int:
        """Stored episodes."""
        return len(self._episodes)

    def _phys(self, logical: Any) -> np.ndarray:
        return np.asarray(logical) - self._base

    def _col(self, name: str) -> np.ndarray:
        return self._cols[name][self.head - self._base : self.tail - self._base]

    def _ensure_room(self, n: int, shapes: dict[str, tuple[tuple[int, ...], Any]]) -> None:
        if not self._cols:
            self._alloc = max(2 * self.capacity, 2 * n, 16)
            for name, (shape, dtype) in shapes.items():
                self._cols[name] = np.zeros((self._alloc,) + shape, dtype=dtype)
            return
        if self.tail + n - self._base <= self._alloc:
            return
        live = len(self)
        if live + n > self._alloc:  # grow
            self._alloc = max(2 * self._alloc, live + n)
        lo, hi = self.head - self._base, self.tail - self._base
        for name, arr in self._cols.items():
            new = np.zeros((self._alloc,) + arr.shape[1:], dtype=arr.dtype)
            new[:live] = arr[lo:hi]
            self._cols[name] = new
        self._base = self.head

    # ------------------------------------------------------------------ adding and evicting
    def add_episode(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        rewards: np.ndarray,
        mu: np.ndarray,
        terminated: bool,
        *,
        values: np.ndarray | None = None,
        rho: np.ndarray | None = None,
        v_boot: float = 0.0,
    ) -> int:
        """Stores one whole episode (Algorithm 2) and evicts the oldest ones beyond N (FIFO).

        Args:
            obs: s_0 … s_T, shape [T+1, d_S] (the last state included).
            actions: a_0 … a_{T−1}, [T, d_A].
            rewards: r_1 … r_T (raw, unscaled), [T].
            mu: Behaviour statistics μ_0 … μ_{T−1}, [T, d_μ].
            terminated: Whether s_T is terminal (then V̂^tbc_T = 0).
            values: V(s_t) at storage time, [T] (default 0).
            rho: ρ_t at storage time, [T] (default 1: π = μ when the step was taken).
            v_boot: V(s_T) for a truncated episode (ignored when ``terminated``).

        Returns:
            The number of episodes evicted.
        """
        obs = np.asarray(obs, dtype=np.float32)
        T = len(actions)
        if T < 1 or len(obs) != T + 1 or len(rewards) != T or len(mu) != T:
            raise ValueError(
                f"add_episode: need T+1 states and T actions, rewards, mu with T >= 1; got "
                f"{len(obs)}, {len(actions)}, {len(rewards)}, {len(mu)}"
            )
        actions = np.asarray(actions, dtype=np.float32).reshape(T, -1)
        mu = np.asarray(mu, dtype=np.float32).reshape(T, -1)
        shapes = {
            "obs": (obs.shape[1:], np.float32),
            "actions": (actions.shape[1:], np.float32),
            "mu": (mu.shape[1:], np.float32),
            "rewards": ((), np.float64),
            "rho": ((), np.float64),
            "v": ((), np.float64),
            "v_tbc": ((), np.float64),
            "td": ((), np.float64),
            "serial": ((), np.int64),
            "ep_start": ((), np.int64),  # logical index of the episode's first step
            "ep_end": ((), np.int64),  # one past its last step
            "ep_terminated": ((), bool),
            "v_boot": ((), np.float64),  # V(s_T); meaningful on the episode's last step row
        }
        self._ensure_room(T, shapes)
        lo = self.tail - self._base
        sl = slice(lo, lo + T)
        c = self._cols
        c["obs"][sl] = obs[:T]
        c["actions"][sl] = actions
        c["mu"][sl] = mu
        c["rewards"][sl] = np.asarray(rewards, dtype=np.float64)
        c["rho"][sl] = 1.0 if rho is None else np.asarray(rho, dtype=np.float64)
        c["v"][sl] = 0.0 if values is None else np.asarray(values, dtype=np.float64)
        # PER: new steps get the maximal priority, max |TD error| (Schaul et al. 2016, Alg. 1);
        # ranks sort by |TD error|, so the signed maximum could rank them last.
        c["td"][sl] = np.abs(c["td"][self.head - self._base : lo]).max(initial=1.0) if len(self) else 1.0
        c["serial"][sl] = self._next_serial
        c["ep_start"][sl] = self.tail
        c["ep_end"][sl] = self.tail + T
        c["ep_terminated"][sl] = bool(terminated)
        c["v_boot"][lo + T - 1] = 0.0 if terminated else float(v_boot)
        self._episodes.append([self._next_serial, self.tail, T, obs[T].copy(), bool(terminated)])
        self._next_serial += 1
        self.tail += T
        self.num_added_episodes += 1
        self._far_count += self._count_far(c["rho"][sl])
        self._recompute_targets(np.array([self.tail - 1]), full=True)  # Algorithm 2: Q_ret of the episode
        evicted = 0
        while len(self) > self.capacity and len(self._episodes) > 1:  # FIFO by whole episodes
            _, start, length, *_ = self._episodes.popleft()
            self._far_count -= self._count_far(c["rho"][start - self._base : start + length - self._base])
            self.head = start + length
            self._first_serial += 1
            evicted += 1
        self.num_evicted_episodes += evicted
        self._per_cdf = None
        return evicted

    def _episode(self, serial: int) -> list[Any]:
        episode: list[Any] = self._episodes[serial - self._first_serial]
        return episode

    # ------------------------------------------------------------------ targets (Eq. 8)
    def _recompute_targets(self, idx: np.ndarray, full: bool = False) -> None:
        """V̂^tbc (Eq. 8) of the episodes of the logical steps ``idx``.

        Each episode is recomputed from its latest step in ``idx`` back to its first step
        (with a ``retrace_tolerance``, back to the window's start below its earliest step in
        ``idx``; module docstring), starting from the stored V̂^tbc of the step after it
        (Algorithm 3); with ``full`` (or when that step is the last one) from the bootstrap
        value V(s_T) at the episode's end. ``full`` recomputes whole episodes.
        """
        idx = np.asarray(idx, dtype=np.int64)
        if len(idx) == 0:
            return
        c = self._cols
        p = self._phys(idx)
        start, ep_end = c["ep_start"][p], c["ep_end"][p]
        order = np.lexsort((idx, start))  # by episode, then step
        last_of_group = np.r_[start[order][1:] != start[order][:-1], True]
        first_of_group = np.r_[True, last_of_group[:-1]]
        sel = order[last_of_group]  # per episode: its latest sampled step
        seg_start, ep_end = start[sel], ep_end[sel]
        seg_end = ep_end if full else idx[sel] + 1
        if not full and self.retrace_tolerance > 0.0:
            seg_start = self._window_starts(seg_start, idx[order[first_of_group]])
        at_end = seg_end == ep_end
        boundary = np.where(
            at_end,
            c["v_boot"][self._phys(ep_end - 1)],
            c["v_tbc"][self._phys(np.minimum(seg_end, ep_end - 1))],
        )
        lens = seg_end - seg_start
        kernel = retrace_segments_kernel() if self.compiled_targets else None
        if kernel is not None:  # the loop over each episode's contiguous rows, in place (issue 42)
            kernel(
                c["v_tbc"],
                c["rewards"],
                c["v"],
                c["rho"],
                self._phys(seg_start),
                lens,
                np.asarray(boundary, dtype=np.float64),
                self.gamma,
                self.reward_scale,
            )
            return
        offsets = np.cumsum(lens)
        rows = np.arange(offsets[-1]) - np.repeat(offsets - lens, lens) + np.repeat(seg_start, lens)
        rows = self._phys(rows)
        last = np.zeros(len(rows), dtype=bool)
        last[offsets - 1] = True
        bound = np.zeros(len(rows))
        bound[offsets - 1] = boundary
        c["v_tbc"][rows] = retrace_tbc(
            c["rewards"][rows] * self.reward_scale, c["v"][rows], c["rho"][rows], self.gamma, last, bound
        )

    def _window_starts(self, first: np.ndarray, m: np.ndarray, chunk: int = 64, min_prefix: int = 256) -> np.ndarray:
        """Per episode, the largest s in [first, m] with Π_{i=s}^{m−1} γρ̄_i ≤ ε (``first`` if none).

        Episodes with at most ``min_prefix`` steps before m get s = ``first`` without a search
        (the full recompute, which the bound allows): in small memories sampled densely (a few
        samples per episode and minibatch) the search cost more than the rows it saved.

        Args:
            first: Logical index of each episode's first step.
            m: Its earliest sampled step.
            chunk: Steps examined per episode in the first pass (going back from m); each
                further pass examines twice as many.
            min_prefix: Shortest prefix (steps before m) that is searched.
        """
        tol, c = self.retrace_tolerance, self._cols
        s = m.copy()
        prod = np.ones(len(m))
        short = m - first <= min_prefix
        s[short] = first[short]
        todo = np.flatnonzero(~short)
        while len(todo):
            offsets = np.arange(1, chunk + 1)
            hi = s[todo]
            rows = hi[:, None] - offsets  # hi−1, hi−2, … (descending)
            valid = rows >= first[todo, None]
            rho = c["rho"][self._phys(np.where(valid, rows, hi[:, None] - 1))]
            cum = prod[todo, None] * np.cumprod(np.where(valid, self.gamma * np.minimum(1.0, rho), 1.0), axis=1)
            hit = (cum <= tol) & valid
            found = hit.any(axis=1)
            at = hit.argmax(axis=1)
            s[todo[found]] = rows[found, at[found]]
            lo = np.maximum(first[todo], hi - chunk)
            s[todo[~found]] = lo[~found]
            prod[todo[~found]] = cum[~found, -1]
            todo = todo[~found & (lo > first[todo])]
            chunk *= 2  # fewer passes where ρ̄ ≈ 1 makes the window long
        return s

    def recompute_all_targets(self) -> None:
        """Recomputes V̂^tbc of every stored episode (after a reward-scale change)."""
        if len(self):
            self._recompute_targets(np.array([e[1] for e in self._episodes]), full=True)

    # ------------------------------------------------------------------ sampling
    def sample(self, batch_size: int) -> dict[str, np.ndarray]:
        """Samples B time steps (uniform, or rank-based for ``per``).

        Returns:
            A dict of arrays with B rows: ``idx`` (logical step indices, for
            :meth:`write_back`), ``obs``, ``actions``, ``mu``, ``rewards`` (scaled r̂_{t+1}),
            ``v_tbc`` (stored V̂^tbc_t), ``q_ret`` (Q̂^ret_t = r̂_{t+1} + γ V̂^tbc_{t+1}, Eq. 6-8),
            ``next_obs`` (s_{t+1}), ``terminated`` (s_{t+1} terminal), ``is_last`` (t is its
            episode's last step), ``truncated_last`` (is_last and not terminated), ``rho``,
            ``v`` (stored) and ``weights`` (PER importance weights; ones otherwise).
        """
        n = len(self)
        if n == 0:
            raise ValueError("sample: the replay memory is empty")
        B = int(batch_size)
        if self.mode == "per":
            self._maybe_sort()
            assert self._per_cdf is not None and self._per_order is not None and self._per_p is not None
            u = self.rng.random(B) * self._per_cdf[-1]
            pos = np.minimum(np.searchsorted(self._per_cdf, u, side="right"), n - 1)
            idx = self.head + self._per_order[pos]
            probs = self._per_p[pos] / self._per_cdf[-1]
            weights = (n * probs) ** (-self.per_beta)
            weights = weights / ((n * self._per_p[-1] / self._per_cdf[-1]) ** (-self.per_beta))  # max weight
        else:
            idx = self.rng.integers(self.head, self.tail, size=B)
            weights = np.ones(B)
        return self.gather(idx, weights=weights)

    def gather(self, idx: np.ndarray, *, weights: np.ndarray | None = None) -> dict[str, np.ndarray]:
        """The rows of :meth:`sample` for the given logical step indices."""
        idx = np.asarray(idx, dtype=np.int64)
        if np.any((idx < self.head) | (idx >= self.tail)):
            raise IndexError("gather: index outside the stored steps")
        p = self._phys(idx)
        c = self._cols
        ends = c["ep_end"][p]
        is_last = idx + 1 == ends
        terminated_ep = c["ep_terminated"][p]
        nxt = np.where(is_last, p, p + 1)  # a valid row; replaced below where is_last
        next_obs = c["obs"][nxt].copy()
        v_tbc_next = np.where(is_last, c["v_boot"][p], c["v_tbc"][nxt])
        for i in np.flatnonzero(is_last):
            next_obs[i] = self._episode(int(c["serial"][p[i]]))[3]
        rewards = c["rewards"][p] * self.reward_scale
        return {
            "idx": idx,
            "obs": c["obs"][p],
            "actions": c["actions"][p],
            "mu": c["mu"][p],
            "rewards": rewards.astype(np.float32),
            "v_tbc": c["v_tbc"][p].astype(np.float32),
            "q_ret": (rewards + self.gamma * v_tbc_next).astype(np.float32),  # Q̂^ret_t, §2
            "next_obs": next_obs,
            "terminated": (is_last & terminated_ep),
            "is_last": is_last,
            "truncated_last": is_last & ~terminated_ep,
            "rho": c["rho"][p].astype(np.float32),
            "v": c["v"][p].astype(np.float32),
            "weights": (np.ones(len(idx)) if weights is None else weights).astype(np.float32),
        }

    def _maybe_sort(self) -> None:
        if self._per_cdf is not None and self._writes_since_sort < self.per_resort_interval:
            return
        td = np.abs(self._col("td"))
        # rank 1 = largest |TD error|; ties go to the newest step, so that new steps (which get
        # the maximal |TD error|, add_episode) rank first and are replayed at least once.
        self._per_order = len(td) - 1 - np.argsort(-td[::-1], kind="stable")
        self._per_p = (1.0 / np.arange(1, len(td) + 1)) ** self.per_alpha  # P(i) ∝ rank^-α
        self._per_cdf = np.cumsum(self._per_p)
        self._writes_since_sort = 0

    # ------------------------------------------------------------------ write-back
    def write_back(
        self,
        idx: np.ndarray,
        *,
        rho: np.ndarray | None = None,
        values: np.ndarray | None = None,
        td_error: np.ndarray | None = None,
        v_boot: np.ndarray | None = None,
        update_targets: bool = True,
    ) -> None:
        """Stores the minibatch's new ρ_t and V(s_t) and corrects V̂^tbc (Algorithm 3).

        For each episode touched, V̂^tbc is recomputed with Eq. (8) from its latest sampled
        step back to its first step (or to the start of the ``retrace_tolerance`` window below
        its earliest sampled step, see the module docstring), starting from the stored V̂^tbc
        of the step after it.

        Args:
            idx: Logical indices from :meth:`sample`.
            rho: New ρ_t (Rule 1 and the n_far count use it).
            values: New V(s_t).
            td_error: New TD errors for PER's ranks (default: V̂^tbc_t − V(s_t) when values
                are given).
            v_boot: New V(s_T) for rows whose step is the last of a truncated episode (NaN
                elsewhere); refreshes the bootstrap value of those episodes.
            update_targets: Whether to run Eq. (8) (V-RACER); DDPG and NAF do not need it.
        """
        idx = np.asarray(idx, dtype=np.int64)
        keep = (idx >= self.head) & (idx < self.tail)  # steps evicted meanwhile are skipped
        idx = idx[keep]
        p = self._phys(idx)
        c = self._cols
        if rho is not None:
            rows = np.unique(p)  # a step sampled twice is counted once
            before = self._count_far(c["rho"][rows])
            c["rho"][p] = np.asarray(rho, dtype=np.float64)[keep]
            self._far_count += self._count_far(c["rho"][rows]) - before
        if values is not None:
            c["v"][p] = np.asarray(values, dtype=np.float64)[keep]
        if td_error is not None:
            c["td"][p] = np.asarray(td_error, dtype=np.float64)[keep]
        elif values is not None:
            c["td"][p] = c["v_tbc"][p] - c["v"][p]
        if v_boot is not None:
            vb = np.asarray(v_boot, dtype=np.float64)[keep]
            ok = np.isfinite(vb) & (idx + 1 == c["ep_end"][p]) & ~c["ep_terminated"][p]
            c["v_boot"][p[ok]] = vb[ok]
        self._writes_since_sort += 1
        if update_targets and len(idx):
            self._recompute_targets(idx)

    # ------------------------------------------------------------------ statistics
    def _count_far(self, rho: np.ndarray) -> int:
        """Far-policy steps among ``rho`` with the reference c_max (0 before the first count)."""
        if self._far_c is None or len(rho) == 0:
            return 0
        return len(rho) - int(np.count_nonzero(near_policy_mask(rho, self._far_c)))

    def far_fraction(self, c_max: float) -> float:
        """n_far / N: the fraction of stored steps whose stored ρ is far-policy (Rule 1).

        Kept incrementally; recounted over the whole memory when ``c_max`` differs from the
        count's reference by more than ``far_recount_tol`` (module docstring).
        """
        n = len(self)
        if n == 0:
            return 0.0
        if self._far_c is None or abs(c_max - self._far_c) > self.far_recount_tol:
            self._far_c = float(c_max)
            self._far_count = self._count_far(self._col("rho"))
        return float(self._far_count) / n

    def far_count_full(self, c_max: float) -> int:
        """n_far counted over the whole memory with ``c_max`` (the reference of the incremental count)."""
        return len(self) - int(np.count_nonzero(near_policy_mask(self._col("rho"), c_max)))

    def state_stats(self) -> tuple[np.ndarray, np.ndarray]:
        """μ_s and σ_s of the stored states, Eq. (14)-(15) (App. B), σ_s with a floor.

        The standardizer divides by σ_s + ε (ε = 1e-7), and σ_s is fixed at N_start: a dimension
        constant during the warm-up (a contact force still 0) has σ_s = 0 and would be scaled by
        ~10⁷ once it moves. σ_s is floored at :data:`STD_FLOOR` times the data's scale, the larger
        of the dimension's RMS and the mean σ_s over dimensions (1 if every dimension is constant):
        a deviation from Eq. (15) that leaves dimensions varying by more than 1% of that scale as
        they were.
        """
        obs = self._col("obs").astype(np.float64)
        mean, std = obs.mean(0), obs.std(0)
        rms = np.sqrt(np.mean(obs**2, axis=0)) if len(obs) else np.zeros_like(mean)
        typical = float(np.mean(std)) if std.size else 0.0
        scale = np.maximum(rms, typical)
        floor = STD_FLOOR * np.where(scale > 0.0, scale, 1.0)
        return mean, np.maximum(std, floor)

    def update_reward_scale(self) -> float:
        """σ_r = sqrt(mean r²) over the stored rewards (Eq. 16); returns 1/(σ_r + ε).

        The stored V̂^tbc are recomputed with the new scale.
        """
        r = self._col("rewards")
        sigma_r = float(np.sqrt(np.mean(r**2))) if len(r) else 0.0
        self.reward_scale = 1.0 / (sigma_r + EPS)  # r̂ = r/(σ_r + ε), App. B
        self.recompute_all_targets()
        return self.reward_scale

    def stats(self) -> dict[str, Any]:
        """Size and counters, for metrics."""
        return {
            "replay_size": len(self),
            "replay_num_episodes": self.num_episodes,
            "replay_num_evicted_episodes": self.num_evicted_episodes,
            "reward_scale": self.reward_scale,
        }

    # ------------------------------------------------------------------ checkpoints
    def get_state(self) -> dict[str, Any]:
        """The stored steps and every bookkeeping value that sampling, the write-back, PER and the
        far-policy count read, so that a restored memory samples and updates as this one would."""
        return {
            "cols": {name: self._col(name).copy() for name in self._cols},
            "head": self.head,
            "tail": self.tail,
            "episodes": [[e[0], e[1], e[2], e[3].copy(), e[4]] for e in self._episodes],
            "first_serial": self._first_serial,
            "next_serial": self._next_serial,
            "num_added_episodes": self.num_added_episodes,
            "num_evicted_episodes": self.num_evicted_episodes,
            "reward_scale": self.reward_scale,
            "rng": self.rng.bit_generator.state,
            "per_beta": self.per_beta,
            "per": None
            if self._per_cdf is None or self._per_order is None or self._per_p is None
            else {"order": self._per_order.copy(), "p": self._per_p.copy(), "cdf": self._per_cdf.copy()},
            "writes_since_sort": self._writes_since_sort,
            "far_c": self._far_c,
            "far_count": self._far_count,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        """Restores :meth:`get_state`'s output (capacity, γ and mode stay this memory's own)."""
        live = int(state["tail"]) - int(state["head"])
        self._alloc = max(2 * self.capacity, 2 * live, 16)
        self._cols = {}
        for name, values in state["cols"].items():
            col = np.zeros((self._alloc,) + values.shape[1:], dtype=values.dtype)
            col[:live] = values
            self._cols[name] = col
        self.head, self.tail = int(state["head"]), int(state["tail"])
        self._base = self.head
        self._episodes = deque([list(e) for e in state["episodes"]])
        self._first_serial, self._next_serial = int(state["first_serial"]), int(state["next_serial"])
        self.num_added_episodes = int(state["num_added_episodes"])
        self.num_evicted_episodes = int(state["num_evicted_episodes"])
        self.reward_scale = float(state["reward_scale"])
        self.rng.bit_generator.state = state["rng"]
        self.per_beta = float(state["per_beta"])
        per = state["per"]
        self._per_order, self._per_p, self._per_cdf = (
            (None, None, None)
            if per is None
            else (
                per["order"].copy(),
                per["p"].copy(),
                per["cdf"].copy(),
            )
        )
        self._writes_since_sort = int(state["writes_since_sort"])
        self._far_c = None if state["far_c"] is None else float(state["far_c"])
        self._far_count = int(state["far_count"])

    def column(self, name: str) -> np.ndarray:
        """A copy of one stored per-step column (``obs``, ``rho``, ``v``, ``v_tbc``, ...)."""
        return self._col(name).copy()

    def episode_bounds(self) -> list[tuple[int, int, bool, float]]:
        """(start, length, terminated, v_boot) of each stored episode, oldest first."""
        return [(e[1], e[2], e[4], float(self._cols["v_boot"][e[1] + e[2] - 1 - self._base])) for e in self._episodes]
