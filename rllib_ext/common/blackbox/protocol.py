"""The black-box engine's messages between the driver and its env runners, typed.

One remote call carries a :class:`Call`; the runner answers with a :class:`Reply`::

    driver ──Call(version u, payload_ref → Payload of u, [Job, ...])──▶ runner
    driver ◀──Reply([EpisodeResult, ...], busy_s, runner, obs_delta, steps)── runner

- A :class:`Job` says *what* to evaluate: a :class:`PerturbationJob` (row ``index`` of the
  sampler's batch ``seed``: θ_u + σε_index, paper 000 Alg. 2), an :class:`EvaluationJob` (θ_u
  itself) or, for the evolution+RL family, an :class:`IndividualJob`. Each job runs
  ``episodes`` episodes; their mean return is the job's one return.
- **Credit.** A job carries ``version``, the update index u of the parameters it runs with, and
  its call carries the object reference of *that* version's :class:`Payload`. A call re-sent
  after its runner died therefore still evaluates θ_u (not a newer θ), so a return is always
  credited to the θ it was measured at (DFD's λ_i, ES's ĝ, AES-RL's population update).
- The :class:`Payload` is published once per update (one object-store put); a runner fetches it
  only when a call's version differs from the one it holds. Perturbations travel as
  (seed, n, index) and are regenerated on the runner, or read from the shared noise table at the
  job's ``noise_offset`` (its reference travels once, in the payload): never a noise vector (the
  papers' low-bandwidth point).

Subclasses add what one algorithm needs (CV-ES: the γ's in its payload, J^γ and ĝ^pg in its
results; AES-RL/CEM-RL: σ² and the replay actor in theirs); every message stays a dataclass.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:
    from ray import ObjectRef


def theta_digest(theta: np.ndarray) -> int:
    """CRC32 of θ's float32 bytes: which parameters a runner held, in 4 bytes (a credit check)."""
    # numpy's stubs do not declare ndarray a Buffer for Python 3.11 (it is one).
    return zlib.crc32(memoryview(np.ascontiguousarray(theta, dtype=np.float32)).cast("B"))  # type: ignore[arg-type]


# -- jobs -------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Job:
    """One unit of runner work: ``episodes`` episodes of one parameter vector.

    Attributes:
        id: Unique per algorithm (``AsyncJobPool.new_job_id``).
        version: Update index u of the payload the job runs with; set by ``AsyncJobPool.submit``.
        episodes: Episodes to run; the job's return is their mean (every episode counts).
        env_seed: Entropy of the episodes' env seeds under ``common_random_numbers`` (None: the
            runner's own stream); episode k is seeded with ``episode_seed(env_seed, k)``.
    """

    id: int
    version: int = -1
    episodes: int = 1
    env_seed: tuple[int, ...] | None = None

    @property
    def kind(self) -> str:
        """What the job costs, for the pool's watchdog: jobs of one kind take about as long."""
        return type(self).__name__


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class PerturbationJob(Job):
    """θ_u + σ·ε_index with ε_index row ``index`` of the sampler's batch (``seed``, ``n``).

    ``noise_offset``: where ε_index starts in the shared noise table (``noise_table.NoiseTable``);
    None (and every job of a checkpoint written before the table): regenerated from the seed.
    """

    seed: int
    n: int
    index: int
    noise_offset: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class EvaluationJob(Job):
    """θ_u itself (the unperturbed policy; AES-RL/CEM-RL: the population mean μ)."""


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class IndividualJob(Job):
    """An individual of the evolution+RL family (paper 001).

    Attributes:
        seed: z = μ + √σ² ⊙ ε(seed) on the runner; or ``params_ref`` (z itself) when given.
        params_ref: ``[ObjectRef(z)]`` (a list, so that Ray does not resolve it on the call).
        rl_steps: TD3 actor steps to train z for first (an RL individual), 0 for none.
        critic_ref: ``[ObjectRef(critic state)]`` for an RL individual.
        random_actions: Act uniformly at random (the replay warm-up).
    """

    seed: int | None = None
    params_ref: list[ObjectRef[Any]] | None = None
    rl_steps: int = 0
    critic_ref: list[ObjectRef[Any]] | None = None
    random_actions: bool = False

    @property
    def kind(self) -> str:
        """An RL individual (thousands of actor steps first) takes far longer than an ES one."""
        return "IndividualJob/rl" if self.rl_steps else "IndividualJob"


# -- the call and the payload -----------------------------------------------------------------
@dataclasses.dataclass(frozen=True, kw_only=True, slots=True, eq=False)
class Payload:
    """What a runner needs of update u besides the job: θ_u and the observation filter's state."""

    theta: np.ndarray
    filter_state: dict[str, Any] | None = None
    noise: Any = None  # ray.ObjectRef of the shared noise table (or the array itself without Ray); None: none


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class Call:
    """One remote ``run_jobs`` call: jobs that all run with the payload of their (one) version."""

    payload_ref: Any  # ray.ObjectRef of the Payload of ``version`` (None in tests without Ray)
    jobs: tuple[Job, ...]

    @property
    def version(self) -> int:
        """u of the payload: the version every job of the call carries."""
        return self.jobs[0].version

    @property
    def kind(self) -> str:
        """The kinds of its jobs, e.g. ``"IndividualJob/rl"`` (the watchdog's key)."""
        return "+".join(sorted({job.kind for job in self.jobs}))


# -- results ----------------------------------------------------------------------------------
@dataclasses.dataclass(kw_only=True, slots=True)
class EpisodeResult:
    """The outcome of one job.

    Attributes:
        job: The job, as sent (its ``version`` is the θ the return is credited to).
        ret: Mean return of the job's episodes (NaN when it failed).
        returns: Each episode's return.
        length: Env steps of all its successful episodes.
        failed_steps: Env steps of its failed episodes, up to and including the step that failed
            (simulated, so counted in the total, as wasted).
        capped: Episodes the engine cut at its step cap (``max_episode_steps``), counted as
            truncations.
        episodes_failed: Episodes that raised or returned a non-finite value (not in ``returns``).
        failed: No episode of the job succeeded, or the credit check failed; its return is not used.
        error: What failed last.
        duration_s: Runner wall time of the job.
        runner: Index of the env runner that ran it.
        theta_digest: :func:`theta_digest` of the θ_u (μ) the runner held when it ran the job;
            the driver compares it with that of θ_{version} (no digest: -1).
        credit_mismatch: The driver found ``theta_digest`` differs from θ_{version}'s (then
            ``failed`` too).
    """

    job: Job
    ret: float
    returns: tuple[float, ...] = ()
    length: int = 0
    failed_steps: int = 0
    capped: int = 0
    episodes_failed: int = 0
    failed: bool = False
    error: str | None = None
    duration_s: float = 0.0
    runner: int = -1
    theta_digest: int = -1
    credit_mismatch: bool = False

    @property
    def id(self) -> int:
        return self.job.id

    @property
    def version(self) -> int:
        """u of the parameters the return was measured at."""
        return self.job.version

    @property
    def index(self) -> int | None:
        """The perturbation's row, None for any other job."""
        return self.job.index if isinstance(self.job, PerturbationJob) else None


@dataclasses.dataclass(kw_only=True, slots=True)
class Reply:
    """A runner's answer to one :class:`Call`.

    Attributes:
        results: One per job, in job order.
        busy_s: Runner wall time of the call (→ ``worker_utilization``).
        runner: Index of the env runner.
        obs_delta: Observation statistics gathered since its last reply (merged by the driver).
        steps: Env steps of the call: every step its runner simulated (failed episodes' too).
    """

    results: list[EpisodeResult]
    busy_s: float
    runner: int
    obs_delta: Any = None
    steps: int = 0


def result_to_state(result: EpisodeResult) -> dict[str, Any]:
    """A checkpointable dict of a result (its job as a dict with its type name)."""
    state = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)}
    job = result.job
    state["job"] = {"type": type(job).__name__, **{f.name: getattr(job, f.name) for f in dataclasses.fields(job)}}
    state["type"] = type(result).__name__
    return state


_JOB_TYPES = {cls.__name__: cls for cls in (Job, PerturbationJob, EvaluationJob, IndividualJob)}


def result_from_state(
    state: dict[str, Any], result_types: dict[str, type[EpisodeResult]] | None = None
) -> EpisodeResult:
    """Inverse of :func:`result_to_state`; also reads the untyped dicts of checkpoints before the protocol.

    A pre-protocol result was ``{"id", "seed", "n", "index", "return", "length", "u", ...}``.
    """
    if "job" not in state:  # a checkpoint written before the typed protocol
        index = state.get("index")
        job_id, version = int(state["id"]), int(state["u"])
        job: Job = (
            EvaluationJob(id=job_id, version=version)
            if index is None
            else PerturbationJob(
                id=job_id, version=version, seed=int(state["seed"]), n=int(state["n"]), index=int(index)
            )
        )
        return EpisodeResult(
            job=job,
            ret=float(state["return"]),
            returns=(float(state["return"]),),
            length=int(state["length"]),
            failed=bool(state.get("failed", False)),
            error=state.get("error"),
            duration_s=float(state.get("duration_s", 0.0)),
            runner=int(state.get("runner", -1)),
        )
    state = dict(state)
    job_state = dict(state.pop("job"))
    job = _JOB_TYPES[job_state.pop("type")](**job_state)
    cls = (result_types or {}).get(state.pop("type"), EpisodeResult)
    return cls(job=job, **state)
