"""Optimizers of paper 000 §4 (SGD, MSGD, DSGD) as ``torch.optim.Optimizer`` subclasses, by name.

All follow torch's convention and *minimize*: they step along ``-param.grad``. An ES-style
algorithm holding an ascent estimate ĝ of ∇J sets ``param.grad = -ĝ`` before ``step()``.

``make_optimizer("adam" | "sgd" | "msgd" | "dsgd", params, **overrides)`` builds one with the
paper's defaults (Table 3); :class:`DSGD` wants :meth:`DSGD.report_reward` before each step.
"""

from rllib_ext.optim.base import ADAM_STEP_FRACTION, NormalizedStepOptimizer
from rllib_ext.optim.dsgd import DSGD
from rllib_ext.optim.msgd import MSGD
from rllib_ext.optim.registry import OPTIMIZERS, get_optimizer_class, make_optimizer
from rllib_ext.optim.sgd import SGD

__all__ = [
    "ADAM_STEP_FRACTION",
    "DSGD",
    "MSGD",
    "NormalizedStepOptimizer",
    "OPTIMIZERS",
    "SGD",
    "get_optimizer_class",
    "make_optimizer",
]
