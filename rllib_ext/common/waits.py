"""Nothing waits forever (design.md, convention 14): the package's one bounded ``ray.get``.

A synchronous wait on another actor (the critic worker, a replay actor, an object of the driver)
has a bound; past it the wait fails with an error naming what it waited for, instead of hanging a
run whose actor is alive but stuck. A dead actor raises Ray's own error at once; the bound is for
the other case, so it is generous: a critic call may train thousands of steps on a loaded CPU.
The polling loops (the black-box pool, IMPACT's learners) have their own watchdogs.
"""

from __future__ import annotations

from typing import Any, Protocol, TypeVar

import ray

_R = TypeVar("_R")

#: Seconds any one synchronous call on another actor may take before it is an error.
ACTOR_CALL_TIMEOUT_S = 1800.0


class RemoteMethod(Protocol[_R]):
    """An actor method as its callers see it through a Ray actor handle: ``handle.method.remote(...)``
    returns a reference to what the method returns. Ray types a handle's methods only where the
    class decorates them with ``@ray.method`` (which would make them uncallable in the process), so
    the package's actors declare their handles as Protocols of these (``ReplayHandle``,
    ``CriticHandle``); the arguments are not checked."""

    def remote(self, *args: Any, **kwargs: Any) -> ray.ObjectRef[_R]: ...


class WaitTimeoutError(TimeoutError):
    """A synchronous wait passed its bound; the message names what was awaited."""


def get_within(refs: Any, what: str, timeout_s: float = ACTOR_CALL_TIMEOUT_S) -> Any:
    """``ray.get(refs)`` that fails after ``timeout_s`` seconds with an error naming ``what``.

    Raises:
        WaitTimeoutError: No answer within ``timeout_s``.
        ray.exceptions.RayError: What Ray raises (e.g. the actor died).
    """
    try:
        return ray.get(refs, timeout=timeout_s)
    except ray.exceptions.GetTimeoutError as e:
        raise WaitTimeoutError(
            f"rllib_ext: no answer from {what} within {timeout_s:.0f} s; the actor is alive but does not answer "
            "(stuck, or starved of CPU)"
        ) from e
