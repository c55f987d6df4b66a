"""The evolution + RL family's home: the runtime AESRL_EXT and CEMRL_EXT share (paper 001).

Lee et al. 2020, ``../shared/papers/001_6bf500f1c5f7a9b5.txt``, Fig. 2 and App. B. Three kinds
of Ray actors, all on top of the black-box engine (:mod:`rllib_ext.common.blackbox`):

- **Env runners** (:class:`ERLEnvRunner`, RLlib ``EnvRunner``\\ s managed and restarted by the
  EnvRunnerGroup): evaluate an *individual* (actor parameters z) for one episode with action
  noise a_noise (Algorithm 2; ``action_noise``), push its transitions to the replay actor,
  return (job id, f(z), length). An *RL individual* is first trained against the shared critic's weights with the TD3
  actor loss (``rl_steps`` Adam steps on replay minibatches, a fresh optimizer each time, as the
  reference code does), and its trained parameters come back (the one d-vector result). A
  *mean* job evaluates the population mean μ under the same action noise, without storing its
  transitions (f(μ), see AESRL's ``mean_fitness``).
- **The replay actor** (:data:`~rllib_ext.common.offpolicy.transitions.ReplayActor`, capacity 2e5,
  App. C.1): filled by every evaluation, sampled by the critic worker and RL individuals.
- **The critic worker** (:class:`CriticWorker`): the shared TD3 twin critic, trained in its own
  process (AES-RL: continuously, in parallel; CEM-RL: between generations).

**Low bandwidth.** An ES individual travels as a seed: z = μ + √var ⊙ ε(seed), regenerated on
the runner from the (μ, var) published once per update
(:func:`~rllib_ext.common.erl.population.gaussian_individual`); its result is ~100 bytes. RL
individuals return their trained d-vector; critic weights travel once per critic call as one
object-store reference.

Modules, by role (as :mod:`rllib_ext.common.blackbox`):

- ``config.py``: :class:`ERLConfig` (and ``TD3_KEYS``, the TD3 settings sent to the workers).
- ``protocol.py``: the typed messages :class:`ERLPayload`, :class:`ERLResult` and :class:`CriticReply`.
- ``env_runner.py``: :class:`ERLEnvRunner`.
- ``critic_worker.py``: :class:`CriticWorker`.
- ``algorithm.py``: :class:`ERLAlgorithm`, the driver base.
- ``population.py``: sep-CEM (:class:`~rllib_ext.common.erl.population.SepCEM`), the elite update and
  individuals regenerated from a seed (CEMRL_EXT, AESRL_EXT).

Checkpoints written before this package existed pickle ``rllib_ext.common.erl.ERLEnvRunner``
(the config's ``env_runner_cls``); the names below keep every class of the old module importable
from here, so those checkpoints restore.
"""

from rllib_ext.common.erl.algorithm import ERLAlgorithm
from rllib_ext.common.erl.config import TD3_KEYS, ERLConfig
from rllib_ext.common.erl.critic_worker import CriticWorker
from rllib_ext.common.erl.env_runner import ERLEnvRunner
from rllib_ext.common.erl.protocol import ERLPayload, ERLResult

__all__ = ["TD3_KEYS", "CriticWorker", "ERLAlgorithm", "ERLConfig", "ERLEnvRunner", "ERLPayload", "ERLResult"]
