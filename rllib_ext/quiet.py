"""Keeps known framework noise out of the ``rllib`` command's output (``--verbose`` shows it).

A plain ``rllib train`` on Ray 2.60 prints, before and between its progress lines, messages that
say nothing about the user's run: RLlib's ``RLModule(config=...)`` deprecation (from RLlib's own
default modules), "You are running X on the new API stack!", Ray's ``core_worker.cc`` line about
constructor arguments in the object store, Tune's "Install gputil", Ray's token-authentication
notice, and gymnasium warnings raised by importing RLlib's DreamerV3 debugging env. They reach the
terminal three ways, and each is filtered where it passes:

* worker processes' output, which Ray's driver prints line by line to ``sys.stdout`` /
  ``sys.stderr`` (looked up at each print), goes through :class:`LineFilter`;
* the driver's own ``logging`` records go through :class:`NoiseFilter` on the handlers;
* Python warnings at import time are silenced for that one import.

Only lines matching :data:`NOISE` are hidden, so every other warning still shows. The number of
hidden lines is kept (:attr:`Quiet.hidden`) and the CLI reports it in one line at the end.
"""

from __future__ import annotations

import io
import logging
import re
import sys
import warnings
from typing import TextIO

# One pattern per known message; each names where the message comes from.
NOISE: tuple[re.Pattern, ...] = tuple(
    re.compile(p)
    for p in (
        # RLlib's default RLModules still call the old constructor (rl_module.py).
        r"DeprecationWarning: `RLModule\(config=\[RLModuleConfig object\]\)` has been deprecated",
        # algorithm_config.py, once per algorithm on the new API stack (the default).
        r"You are running \S+ on the new API stack!",
        # core_worker.cc: env runner actors are created with max_restarts > 0 (ray-project/ray#53727).
        r"has constructor arguments in the object store and max_restarts > 0",
        # ray/tune/utils/util.py, on every trial without GPUtil installed.
        r"Install gputil for GPU system monitoring",
        # ray/tune/trainable/trainable.py, when a busy machine makes an algorithm's setup slow: its
        # advice (reuse_actors) does not apply to one trial per algorithm.
        r"Trainable\.setup took [\d.]+ seconds\. If your trainable is slow to initialize",
        # ray/tune/trainable/trainable.py, at every checkpoint: the CLI's last line names the checkpoint.
        r"Checkpoint successfully created at: Checkpoint\(",
        # authentication_token_setup.py, on every ray.init.
        r"Token authentication is enabled for this Ray cluster",
    )
)

# Modules whose import raises warnings about the module itself, not about the user's run.
NOISY_IMPORTS = ("ray.rllib.algorithms.dreamerv3.utils.debugging",)


def is_noise(line: str) -> bool:
    """Whether ``line`` is one of the known framework messages in :data:`NOISE`."""
    return any(p.search(line) for p in NOISE)


class LineFilter(io.TextIOBase):
    """A text stream that passes whole lines to ``stream`` unless they are noise.

    Partial lines are held until their newline (or :meth:`flush`), so a message written in
    pieces is judged as one line.
    """

    def __init__(self, stream: TextIO, counter: Quiet):
        self.stream = stream
        self.counter = counter
        self._partial = ""

    def write(self, text: str) -> int:
        self._partial += text
        *lines, self._partial = self._partial.split("\n")
        kept = [line for line in lines if not self._hide(line)]
        if kept:
            self.stream.write("\n".join(kept) + "\n")
        return len(text)

    def flush(self) -> None:
        if self._partial and not self._hide(self._partial):
            self.stream.write(self._partial)
        self._partial = ""
        self.stream.flush()

    def _hide(self, line: str) -> bool:
        if is_noise(line):
            self.counter.hidden += 1
            return True
        return False

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.stream, "encoding", "utf-8")

    def writable(self) -> bool:
        return True


class NoiseFilter(logging.Filter):
    """A logging filter that drops records whose message is noise, counting them."""

    def __init__(self, counter: Quiet):
        super().__init__()
        self.counter = counter

    def filter(self, record: logging.LogRecord) -> bool:
        if is_noise(record.getMessage()):
            self.counter.hidden += 1
            return False
        return True


class Quiet:
    """Installs the filters for one CLI run; :attr:`hidden` counts the lines they dropped."""

    def __init__(self) -> None:
        self.hidden = 0
        self._saved: tuple[TextIO, TextIO] | None = None
        self._filter = NoiseFilter(self)
        self._handlers: list[logging.Handler] = []

    def install(self) -> Quiet:
        """Wraps ``sys.stdout``/``sys.stderr`` and the ``ray`` and root loggers' handlers."""
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout = LineFilter(sys.stdout, self)
        sys.stderr = LineFilter(sys.stderr, self)
        self.filter_log_handlers()
        for module in NOISY_IMPORTS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                try:
                    __import__(module)
                except Exception:  # noqa: BLE001 - an optional module; its import is only pre-empted
                    pass
        return self

    def filter_log_handlers(self) -> None:
        """Adds the noise filter to the root's and every ``ray*`` logger's handlers.

        Idempotent; call it again after ``ray.init``, which may add handlers.
        """
        loggers = [logging.getLogger()] + [
            logger
            for name, logger in logging.root.manager.loggerDict.items()
            if name.split(".")[0] == "ray" and isinstance(logger, logging.Logger)
        ]
        for logger in loggers:
            for handler in logger.handlers:
                if handler not in self._handlers:
                    handler.addFilter(self._filter)
                    self._handlers.append(handler)

    def uninstall(self) -> None:
        """Restores the streams and handlers :meth:`install` changed."""
        if self._saved is not None:
            for stream in (sys.stdout, sys.stderr):
                if isinstance(stream, LineFilter):
                    try:
                        stream.flush()
                    except (BrokenPipeError, ValueError):  # the reader went away, or the stream closed
                        pass
            sys.stdout, sys.stderr = self._saved
            self._saved = None
        for handler in self._handlers:
            handler.removeFilter(self._filter)
        self._handlers = []
