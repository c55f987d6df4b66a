"""The settings layer (rllib_ext/settings.py): every registered algorithm's Setting table gives its
defaults, training() keywords and checks; validate() refuses each out-of-range or unread setting with
one ValueError naming it, before any actor starts; the docs pages' settings tables are up to date."""

from __future__ import annotations

import inspect
import pickle
from typing import Literal  # noqa: F401 - annotations of a test class, evaluated in this module

import pytest
from ray.rllib.algorithms.algorithm_config import NotProvided

from rllib_ext import settings
from rllib_ext.registry import ALGORITHMS, get_config_class
from rllib_ext.settings import NO_DEFAULT, Setting, resolve

NAMES = sorted(ALGORITHMS)
# Every algorithm takes a 1-d Box of actions; none of these builds an actor.
ENV = "Pendulum-v1"

#: Out-of-range values of the RLlib settings the algorithms share, as a user writes them in
#: `rllib train --config`: each must be refused (out of bounds where the algorithm reads it,
#: unread where it does not).
COMMON_BAD_VALUES = {
    "lr": -1.0,
    "gamma": 1.5,
    "train_batch_size_per_learner": 0,
}


def config_of(name: str):
    return get_config_class(name)().environment(ENV)


def error_of(config) -> str:
    with pytest.raises(ValueError) as info:
        config.validate()
    return str(info.value).splitlines()[0]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("setting,value", sorted(COMMON_BAD_VALUES.items()))
def test_common_rllib_settings_out_of_range_or_unread_are_one_error_naming_them(name, setting, value):
    config = config_of(name).update_from_dict({setting: value})
    message = error_of(config)
    assert setting in message and repr(value) in message, message


def _outside(s: Setting):
    """A value just outside the setting's kind, bounds or choices (None: nothing to try)."""
    if s.choices is not None:
        return "not-one-of-them"
    if s.gt is not None:
        return s.gt - 1 if int in s.kinds else s.gt
    if s.ge is not None:
        return s.ge - 1
    if s.lt is not None:
        return s.lt + 1 if int in s.kinds else s.lt
    if s.le is not None:
        return s.le + 1
    if bool in s.kinds:
        return "yes"
    return None


CASES = [
    (name, setting, _outside(s))
    for name in NAMES
    for setting, s in resolve(get_config_class(name)).items()
    if not s.unused and _outside(s) is not None
]


@pytest.mark.parametrize("name,setting,value", CASES, ids=[f"{n}-{s}" for n, s, _ in CASES])
def test_every_tabled_setting_outside_its_range_is_one_error_naming_it(name, setting, value):
    config = config_of(name).update_from_dict({setting: value})
    message = error_of(config)
    assert setting in message, message


@pytest.mark.parametrize("name", NAMES)
def test_defaults_come_from_the_table_and_validate(name):
    config_cls = get_config_class(name)
    config = config_cls()
    for setting, s in resolve(config_cls).items():
        if s.default is not NO_DEFAULT:
            assert getattr(config, setting) == s.default, setting
            assert s.unused or s.accepts(s.default), f"{setting}: its default {s.default!r} is outside its own range"
    config_of(name).validate()


@pytest.mark.parametrize("name", NAMES)
def test_training_keywords_docs_and_setters_come_from_the_table(name):
    config_cls = get_config_class(name)
    own = settings.keywords(config_cls)
    params = inspect.signature(config_cls.training).parameters
    for setting in own:
        assert params[setting].default is NotProvided, setting
        assert f"    {setting}: " in config_cls.training.__doc__, setting
    # Each own keyword sets its attribute and returns the config; NotProvided leaves it alone.
    config, fresh = config_cls(), config_cls()
    for setting in own:
        assert config.training(**{setting: NotProvided}) is config
        assert getattr(config, setting) == getattr(fresh, setting), setting
    if own:
        setting = next(iter(own))
        assert getattr(config.training(**{setting: "sentinel"}), setting) == "sentinel"


@pytest.mark.parametrize("name", NAMES)
def test_a_config_pickled_with_plain_attributes_unpickles_and_validates(name):
    """Checkpoints pickle configs: settings are plain instance attributes, as before the tables."""
    config = config_of(name)
    for setting, s in resolve(type(config)).items():
        stored = setting in vars(config) or isinstance(getattr(type(config), setting, None), property)
        assert stored or s.default is NO_DEFAULT, setting  # a property: ARS's 2N, RLlib's batch size
    restored = pickle.loads(pickle.dumps(config))
    assert vars(restored).keys() == vars(config).keys()
    restored.validate()
    state = config.get_state()
    type(config).from_state(state).validate()


def test_a_base_entry_changed_or_refused_keeps_the_rest_and_its_default():
    base = Setting(0.02, float, gt=0, symbol="σ", doc="scale")
    changed = settings.changed(default=0.03).apply(base)
    assert (changed.default, changed.symbol, changed.gt) == (0.03, "σ", 0)
    refused = settings.unused("not read").apply(base)
    assert refused.default == 0.02 and refused.unused == "not read"
    rllib_only = settings.unused("not read").apply(None)
    assert rllib_only.rllib and rllib_only.default is NO_DEFAULT


def test_expects_words_kind_bounds_and_alternatives():
    assert Setting(1, int, ge=1, also=(None,)).expects() == "None or an integer >= 1"
    assert Setting(0.9, float, ge=0, lt=1).expects() == "a number in [0, 1)"
    assert Setting("a", choices=("a", "b")).expects() == "one of 'a', 'b'"
    assert not Setting(1, int, ge=1).accepts(True)  # a bool is not an integer
    assert not Setting(0.5, float, gt=0).accepts(float("nan"))


def test_the_td3_group_is_defined_once_with_the_erl_changes_explicit():
    from rllib_ext.common.offpolicy.settings import ERL_TD3_CHANGES, TD3_SETTINGS

    td3, erl = resolve(get_config_class("TD3_EXT")), resolve(get_config_class("AESRL_EXT"))
    for setting in TD3_SETTINGS:
        changed = set(ERL_TD3_CHANGES.get(setting, settings.changed()).fields)
        if "default" not in changed:
            assert td3[setting].default == erl[setting].default, setting
    assert {k: (td3[k].default, erl[k].default) for k in ("policy_delay", "replay_capacity", "action_noise")} == {
        "policy_delay": (2, 1),
        "replay_capacity": (1_000_000, 200_000),
        "action_noise": (0.1, 0.0),
    }


def test_docs_pages_settings_tables_are_generated_from_the_tables():
    stale = settings.stale_pages()
    assert not stale, f"out of date (run `make docs`): {stale}"


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_class_annotations_agree_with_the_settings_tables(name):
    """A Config class that annotates its settings (for mypy; settings.py, Types) annotates every one its
    own table declares, with a type covering the table's kind, ``also`` values and choices."""
    for cls in get_config_class(name).__mro__:
        if "SETTINGS" in vars(cls) and any(n in vars(cls).get("__annotations__", {}) for n in vars(cls)["SETTINGS"]):
            assert settings.annotation_errors(cls) == []


def test_annotation_errors_name_a_missing_or_too_narrow_annotation():
    class Checked(settings.Configurable):
        a: int
        b: int | Literal["auto"]
        c: float

        SETTINGS = {
            "a": Setting(1, int, also=(None,)),
            "b": Setting("auto", int, also=("auto",)),
            "c": Setting(1.0, float),
            "d": Setting(1, int),
            "gamma": Setting(0.9, float, rllib=True),
        }

    assert settings.annotation_errors(Checked) == [
        "Checked.a: annotated int, which does not cover None",
        "Checked.d: not annotated",
    ]


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_default_learner_and_module_classes_resolve(name):
    """LEARNER_CLASS / RL_MODULE_CLASS name real classes (imported when RLlib asks), or the class
    decides them itself."""
    from ray.rllib.core.learner.learner import Learner
    from ray.rllib.core.rl_module.rl_module import RLModule

    config = get_config_class(name)()
    assert issubclass(config.get_default_learner_class(), Learner)
    assert issubclass(config.get_default_rl_module_spec().module_class, RLModule)
