"""The declarative settings layer every rllib_ext Config uses.

A Config class lists its settings once, in a class-level table ``SETTINGS`` of :class:`Setting`
records (default, kind, bounds or choices, paper symbol, source, one-line doc). The
:class:`Configurable` mixin derives everything else from the tables of the class and its bases:

* the defaults, set in ``__init__`` as plain instance attributes (so configs pickle, restore
  and round-trip through ``get_state``/``from_state`` exactly as hand-written ones did);
* ``training(**kwargs)``: RLlib's convention, with a real signature (each own setting a
  keyword defaulting to ``NotProvided``), the rest passed to ``super().training(**rest)``,
  ``self`` returned, and its ``Args:`` documentation generated from the table;
* the kind, bounds and choices checks, run first in ``validate()`` (one clear line through
  ``self._value_error`` naming the setting, its value and what it may be, before any actor
  starts), and the refusal of RLlib settings the algorithm never reads (:func:`unused`, through
  :func:`~rllib_ext.common.validation.check_unused_settings`);
* each docs page's settings table (``python -m rllib_ext.settings --write-docs``, ``make docs``).

Types (mypy). ``__init__`` sets the settings with ``setattr``, which mypy cannot see. Decision: a
Config class declares the type of each setting its own ``SETTINGS`` table declares with a
:class:`Setting` (groups spread into it, such as the TD3 group, included) as a class-level
annotation *without a value*, in the class body beside the table::

    sigma_init: float
    rl_start_steps: int | None
    rl_actor_steps: int | Literal["auto"]

The table stays the one source of defaults (an annotation without a value makes no class
attribute, so ``__init__``'s ``setattr`` is still what sets it); the annotation says only the
type. :func:`annotation_errors` checks the two agree (every such setting annotated, with a type
that covers its kind, ``also`` values and choices; ``tests/unit/test_settings.py`` runs it on every
registered Config class that annotates any). Not annotated: RLlib's settings (``rllib=True``;
RLlib's ``AlgorithmConfig`` declares them), :func:`changed` entries (the base that declares the
setting annotates it) and :func:`unused` ones (never read). Where RLlib's ``AlgorithmConfig``
infers another type for a name a table reuses (``optimizer``: RLlib's old-stack dict), the
annotation carries ``# type: ignore[assignment]`` with that reason. Code that only reads a few
settings of a config it does not own may instead cast it to a Protocol of those settings (as
``common/blackbox/learner.py`` does), e.g. while that config is not annotated yet.

A subclass changes a base's entry with :func:`changed` (``changed(default=0.03, symbol="ν")``)
and refuses one it does not read with :func:`unused`; classes keep only their cross-setting
rules in ``validate()``.

Example:
    >>> class MyConfig(Configurable, AlgorithmConfig):  # doctest: +SKIP
    ...     SETTINGS = {
    ...         "noise_stdev": Setting(0.02, float, gt=0, symbol="σ", source="paper 000 Table 3"),
    ...         "lr": Setting(0.01, float, gt=0, rllib=True, symbol="η"),
    ...         "grad_clip": unused("the update is not clipped"),
    ...     }
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import inspect
import math
import os
import re
import sys
import types
import typing
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Self

from ray.rllib.algorithms.algorithm_config import AlgorithmConfig, NotProvided
from ray.rllib.utils.annotations import override


class _NoDefault:
    """The default of a setting whose default is RLlib's own (the table does not set it)."""

    def __repr__(self) -> str:
        return "NO_DEFAULT"

    def __reduce__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()

_KIND_WORDS: dict[type, str] = {
    int: "an integer",
    float: "a number",
    bool: "True or False",
    str: "a string",
    list: "a list",
    dict: "a dict",
}


def _is_kind(value: Any, kind: type) -> bool:
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind is list:
        return isinstance(value, (list, tuple))
    return isinstance(value, kind)


def _number(x: float) -> str:
    """A bound or a default as the docs write it: 0.0001 -> 1e-4, 262144 -> 262144."""
    if isinstance(x, float) and x != 0 and abs(x) <= 1e-3:
        mantissa, exponent = f"{x:.0e}".split("e")
        return f"{mantissa}e{int(exponent)}"
    return repr(x)


@dataclasses.dataclass(frozen=True)
class Setting:
    """One setting of a Config: its default, what it may be, and what it means.

    Attributes:
        default: The value ``__init__`` sets; :data:`NO_DEFAULT` keeps RLlib's own.
        kind: ``int``, ``float`` (any real number), ``bool``, ``str``, ``list``, ``dict``, a tuple
            of them, or None (not checked).
        gt, ge, lt, le: Bounds of a number (>, >=, <, <=); None: unbounded.
        choices: The values it may take (checked instead of ``kind``).
        also: Values accepted besides ``kind`` and the bounds (``None``, ``"auto"`` ...).
        symbol: The paper's symbol (``σ``, ``N``) or ``""``.
        source: The paper value and its source (``"0.02 (paper 000 Table 3)"``) or ``""``.
        doc: One line: what it does.
        rllib: An RLlib setting (``lr``, ``gamma`` ...): RLlib's own setters set it, so
            ``training()`` gets no keyword for it; the table gives its default and bounds.
        unused: Why the algorithm never reads it and what to use instead: ``validate()``
            refuses a value other than the default (:func:`unused`).
        shown: How the docs write the default, where the value's own spelling is not the
            paper's (``2^18``).
    """

    default: Any = NO_DEFAULT
    kind: type | tuple[type, ...] | None = None
    gt: float | None = None
    ge: float | None = None
    lt: float | None = None
    le: float | None = None
    choices: tuple[Any, ...] | None = None
    also: tuple[Any, ...] = ()
    symbol: str = ""
    source: str = ""
    doc: str = ""
    rllib: bool = False
    unused: str | None = None
    shown: str | None = None

    @property
    def kinds(self) -> tuple[type, ...]:
        if self.kind is None:
            return ()
        return self.kind if isinstance(self.kind, tuple) else (self.kind,)

    def bounds(self) -> str:
        """The bounds as the messages and docs write them: ``> 0``, ``in [0, 1)``, ``""``."""
        low = ("(", self.gt) if self.gt is not None else ("[", self.ge) if self.ge is not None else None
        high = (")", self.lt) if self.lt is not None else ("]", self.le) if self.le is not None else None
        if low and high:
            return f"in {low[0]}{_number(low[1])}, {_number(high[1])}{high[0]}"
        if low:
            return f"{'>' if low[0] == '(' else '>='} {_number(low[1])}"
        if high:
            return f"{'<' if high[0] == ')' else '<='} {_number(high[1])}"
        return ""

    def expects(self) -> str:
        """What the setting may be, in words: ``"None or an integer >= 1"``."""
        if self.choices is not None:
            what = "one of " + ", ".join(repr(c) for c in self.choices)
        else:
            words = " or ".join(_KIND_WORDS.get(k, k.__name__) for k in self.kinds) or "anything"
            what = f"{words} {self.bounds()}".strip()
        return " or ".join([*(repr(a) for a in self.also), what])

    def accepts(self, value: Any) -> bool:
        """Whether ``value`` has the setting's kind, bounds or choices (or is one of ``also``)."""
        if any(value is a or (type(value) is type(a) and value == a) for a in self.also):
            return True
        if self.choices is not None:
            return any(type(value) is type(c) and value == c for c in self.choices)
        if self.kinds and not any(_is_kind(value, k) for k in self.kinds):
            return False
        if not (isinstance(value, (int, float)) and not isinstance(value, bool)):
            return True  # bounds are for numbers (a schedule list is checked by RLlib)
        return not (
            math.isnan(value)
            or (self.gt is not None and not value > self.gt)
            or (self.ge is not None and not value >= self.ge)
            or (self.lt is not None and not value < self.lt)
            or (self.le is not None and not value <= self.le)
        )


@dataclasses.dataclass(frozen=True)
class _Change:
    """A subclass's change to a base's entry (:func:`changed`, :func:`unused`)."""

    fields: Mapping[str, Any]

    def apply(self, base: Setting | None) -> Setting:
        if base is None:  # an RLlib setting no base table lists
            return Setting(rllib=True, **self.fields)
        return dataclasses.replace(base, **self.fields)


def changed(**fields: Any) -> Any:
    """A subclass's entry that changes some fields of its base's (``changed(default=0.03)``)."""
    return _Change(fields)


def unused(why: str) -> Any:
    """An entry for a setting the algorithm never reads: ``validate()`` refuses a value other than the
    default, saying ``why`` (what to use instead). A base's default is kept (old checkpoints restore)."""
    return _Change({"unused": why})


def with_changes(table: Mapping[str, Setting], changes: Mapping[str, Any]) -> dict[str, Setting]:
    """``table`` with :func:`changed`/:func:`unused` entries applied (a group of settings and one
    family's changes to it, e.g. the ERL family's to TD3's)."""
    return {**table, **{name: change.apply(table.get(name)) for name, change in changes.items()}}


def resolve(cls: type) -> dict[str, Setting]:
    """The settings of a Config class: the ``SETTINGS`` tables along its MRO, a subclass's entries
    replacing or changing (:func:`changed`, :func:`unused`) its bases'."""
    cached = cls.__dict__.get("_resolved_settings")
    if cached is not None:
        return cached
    merged: dict[str, Setting] = {}
    for klass in reversed(cls.__mro__):
        for name, entry in vars(klass).get("SETTINGS", {}).items():
            merged[name] = entry.apply(merged.get(name)) if isinstance(entry, _Change) else entry
    cls._resolved_settings = merged
    return merged


def keywords(cls: type) -> dict[str, Setting]:
    """The settings ``cls.training()`` takes as keywords of its own (all but RLlib's)."""
    return {name: s for name, s in resolve(cls).items() if not s.rllib}


def _annotation(setting: Setting) -> str:
    names = [k.__name__ for k in setting.kinds] or ["Any"]
    if None in setting.also:
        names.append("None")
    return " | ".join(names)


def training_doc(cls: type) -> str:
    """``cls.training()``'s docstring: one ``Args:`` entry per own keyword, from the table."""
    lines = [
        f"Sets {cls.__name__}'s own settings; any other keyword goes to RLlib's ``training()``.",
        "",
        "Args:",
    ]
    for name, s in keywords(cls).items():
        symbol = f"{s.symbol}: " if s.symbol else ""
        default = s.shown or repr(s.default)
        rule = f"refused (not read): {s.unused}" if s.unused else f"{s.expects()}; default {default}"
        lines.append(f"    {name}: {symbol}{s.doc or name} ({rule}).")
    lines += ["    **kwargs: RLlib's ``training()`` settings.", "", "Returns:", "    This updated config."]
    return "\n".join(lines)


def _training_signature(cls: type) -> inspect.Signature:
    params = [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
    params += [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=NotProvided, annotation=_annotation(s))
        for name, s in keywords(cls).items()
    ]
    params.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
    return inspect.Signature(params, return_annotation="Self")


def _annotated_types(annotation: Any) -> tuple[set[Any], set[Any]]:
    """(runtime classes, literal values) an evaluated annotation admits (its union's members)."""
    union = typing.get_origin(annotation) in (typing.Union, types.UnionType)
    classes: set[Any] = set()
    literals: set[Any] = set()
    for m in typing.get_args(annotation) if union else (annotation,):
        if typing.get_origin(m) is typing.Literal:
            literals.update(typing.get_args(m))
        else:
            classes.add(type(None) if m is None else typing.get_origin(m) or m)
    return classes, literals


def annotation_errors(cls: type) -> list[str]:
    """Where ``cls``'s class-level annotations and its own ``SETTINGS`` table disagree (empty: they
    agree): a setting the table declares (not RLlib's, not a :func:`changed` or :func:`unused`
    entry) without an annotation, or annotated with a type that does not cover its kind, its
    ``also`` values or its choices. See the module docstring (Types)."""
    module = sys.modules[cls.__module__]
    own = vars(cls).get("__annotations__", {})
    errors = []
    for name, setting in vars(cls).get("SETTINGS", {}).items():
        if not isinstance(setting, Setting) or setting.rllib:
            continue
        if name not in own:
            errors.append(f"{cls.__name__}.{name}: not annotated")
            continue
        text = own[name]
        annotation = eval(text, vars(module)) if isinstance(text, str) else text  # noqa: S307 - our own source
        if annotation is Any:
            continue
        classes, literals = _annotated_types(annotation)
        wanted = [*setting.kinds, *(type(c) for c in setting.choices or ())]
        missing = [k.__name__ for k in wanted if k not in classes]
        missing += [repr(a) for a in setting.also if type(a) not in classes and a not in literals]
        if missing:
            errors.append(f"{cls.__name__}.{name}: annotated {text}, which does not cover {', '.join(missing)}")
    return errors


if TYPE_CHECKING:
    # The mixin's super() is the AlgorithmConfig it is mixed into (at run time it derives from object).
    _MixedIntoConfig = AlgorithmConfig
else:
    _MixedIntoConfig = object


class Configurable(_MixedIntoConfig):
    """AlgorithmConfig mixin: defaults, ``training()`` keywords and checks from ``SETTINGS`` tables.

    Put it first among the bases: ``class XConfig(Configurable, AlgorithmConfig)``. Each
    subclass gets its own ``training`` (its signature and ``Args:`` generated from its table);
    a subclass must not set a tabled setting in ``__init__`` (the table is its one default).
    """

    #: ``{setting: Setting}`` declared by this class (bases' entries are inherited; see :func:`resolve`).
    SETTINGS: ClassVar[dict[str, Any]] = {}
    #: ``"module:Class"`` of the default Learner and RLModule, imported when RLlib asks for them
    #: (None: the base class's); a class with more to decide overrides the getters instead.
    LEARNER_CLASS: ClassVar[str | None] = None
    RL_MODULE_CLASS: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._resolved_settings = None
        if "training" in vars(cls):
            return

        def training(self, **kwargs):
            return Configurable.training(self, **kwargs)

        training.__signature__ = _training_signature(cls)
        training.__doc__ = training_doc(cls)
        training.__name__ = "training"
        training.__qualname__ = f"{cls.__qualname__}.training"
        training.__module__ = cls.__module__
        cls.training = override(AlgorithmConfig)(training)

    def __init__(self, algo_class: type | None = None) -> None:
        super().__init__(algo_class=algo_class)
        for name, setting in resolve(type(self)).items():
            if setting.default is not NO_DEFAULT:
                setattr(self, name, copy.deepcopy(setting.default))

    @override(AlgorithmConfig)
    def get_default_learner_class(self) -> Any:
        """:attr:`LEARNER_CLASS`, imported now (else the base class's)."""
        if self.LEARNER_CLASS is None:
            return super().get_default_learner_class()
        from rllib_ext.registry import load

        return load(self.LEARNER_CLASS)

    @override(AlgorithmConfig)
    def get_default_rl_module_spec(self) -> Any:
        """An ``RLModuleSpec`` of :attr:`RL_MODULE_CLASS`, imported now (else the base class's)."""
        if self.RL_MODULE_CLASS is None:
            return super().get_default_rl_module_spec()
        from ray.rllib.core.rl_module.rl_module import RLModuleSpec

        from rllib_ext.registry import load

        return RLModuleSpec(module_class=load(self.RL_MODULE_CLASS))

    @override(AlgorithmConfig)
    def training(self, **kwargs: Any) -> Self:
        """Sets the class's own settings given (not ``NotProvided``); the rest go to RLlib's ``training()``."""
        # In the table's order (a base's settings before a subclass's), not the caller's.
        mine = {name: kwargs.pop(name) for name in keywords(type(self)) if name in kwargs}
        super().training(**kwargs)
        for name, value in mine.items():
            if value is not NotProvided:
                setattr(self, name, value)
        return self

    @property
    def unused_settings(self) -> dict[str, str]:
        """``{setting: what to use instead}`` of the settings this algorithm never reads."""
        return {name: s.unused for name, s in resolve(type(self)).items() if s.unused}

    def check_settings(self) -> None:
        """One ``_value_error`` for the first setting outside its kind, bounds or choices; then the
        refusal of changed settings the algorithm does not read. ``validate()`` runs it first."""
        from rllib_ext.common.validation import algo_name, check_unused_settings

        for name, setting in resolve(type(self)).items():
            if setting.unused or setting.kind is None and setting.choices is None:
                continue
            value = getattr(self, name)
            if not setting.accepts(value):
                symbol = f" ({setting.symbol})" if setting.symbol else ""
                self._value_error(f"{algo_name(self)}: {name}{symbol} must be {setting.expects()}, got {value!r}")
        check_unused_settings(self, self.unused_settings)

    @override(AlgorithmConfig)
    def validate(self) -> None:
        """The table's checks (:meth:`check_settings`), then RLlib's; subclasses add cross-setting rules."""
        self.check_settings()
        super().validate()


# ---------------------------------------------------------------------------------------------
# Docs: each page's settings table, generated between markers.
# ---------------------------------------------------------------------------------------------
BEGIN, END = "<!-- settings:begin -->", "<!-- settings:end -->"
DOCS_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "algorithms")

#: Per registered name: which rows its page shows ("all": every setting the algorithm reads;
#: "own": those its Config class declares itself, the rest being on the family's page) and
#: whether the page has a "paper value (source)" column.
DOCS_PAGES: dict[str, tuple[str, bool]] = {
    "ES_EXT": ("all", False),
    "DFD_EXT": ("own", False),
    "CVES_EXT": ("own", False),
    "ARS_EXT": ("own", True),
    "AESRL_EXT": ("all", True),
    "CEMRL_EXT": ("own", True),
    "TD3_EXT": ("all", True),
    "IMPACT_EXT": ("all", True),
    "VRACER_EXT": ("all", True),
    "DDPG_EXT": ("all", True),
    "NAF_EXT": ("all", True),
}


def _shown(value: Any) -> str:
    if isinstance(value, str):
        return f"`{value!r}`" if value in ("auto", "adaptive") else f"`{value}`"
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, dict) and not value:
        return "`{}`"
    return str(value)


def docs_rows(config_cls: type, scope: str) -> list[tuple[str, Setting]]:
    """The (name, setting) rows of a page: the settings the algorithm reads, all or its own."""
    rows = resolve(config_cls)
    own = vars(config_cls).get("SETTINGS", {})
    return [(name, s) for name, s in rows.items() if not s.unused and (scope == "all" or name in own)]


def docs_table(name: str) -> str:
    """The markdown settings table of algorithm ``name``'s page (columns as :data:`DOCS_PAGES` says)."""
    from rllib_ext.registry import get_config_class

    scope, with_source = DOCS_PAGES[name]
    header = ["setting", "paper symbol", "default", *(["paper value (source)"] if with_source else []), "meaning"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for setting_name, s in docs_rows(get_config_class(name), scope):
        label = f"`{setting_name}`" + (" (RLlib)" if s.rllib else "")
        cells = [label, s.symbol or "—", s.shown or _shown(s.default)]
        if with_source:
            cells.append(s.source or "—")
        cells.append(s.doc.replace("|", "\\|"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def docs_page(name: str) -> str:
    return os.path.join(DOCS_DIR, f"{name.lower()}.md")


def render_page(text: str, name: str) -> str:
    """``text`` with the block between the settings markers replaced by the generated table."""
    pattern = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{docs_page(name)}: no {BEGIN} ... {END} block")
    return pattern.sub(lambda _: f"{BEGIN}\n{docs_table(name)}\n{END}", text, count=1)


def stale_pages() -> list[str]:
    """The pages whose settings block differs from what the tables give (empty: all up to date)."""
    stale = []
    for name in DOCS_PAGES:
        with open(docs_page(name), encoding="utf-8") as f:
            text = f.read()
        if render_page(text, name) != text:
            stale.append(docs_page(name))
    return stale


def write_docs() -> list[str]:
    """Regenerates every page's settings block; returns the pages that changed."""
    written = []
    for name in DOCS_PAGES:
        path = docs_page(name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        new = render_page(text, name)
        if new != text:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            written.append(path)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rllib_ext.settings", description=__doc__.splitlines()[0])
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write-docs", action="store_true", help="regenerate the docs pages' settings tables")
    group.add_argument("--check-docs", action="store_true", help="exit 1 if a page's table is out of date")
    args = parser.parse_args(argv)
    import rllib_ext  # noqa: F401 - registers the algorithms

    if args.write_docs:
        for path in write_docs():
            print(f"wrote {os.path.relpath(path)}")
        return 0
    stale = stale_pages()
    for path in stale:
        print(f"out of date: {os.path.relpath(path)} (run `make docs`)", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
