"""rllib_ext.compare.tuning: grid parsing and its errors, tuning seeds, the equal-size check, the best point."""

from __future__ import annotations

import re

import pytest

from rllib_ext.compare import tuning
from rllib_ext.compare.tuning import TuningError

LABELS = ["A", "B"]


def test_a_grid_is_the_product_of_its_keys_values_in_the_order_given():
    grids = tuning.parse_grids(["A:lr=[0.1, 0.01]", "A:clip_param=[0.2, 0.3]", 'B:optimizer=["sgd", "adam"]'], LABELS)
    assert grids == {"A": {"lr": [0.1, 0.01], "clip_param": [0.2, 0.3]}, "B": {"optimizer": ["sgd", "adam"]}}
    assert tuning.grid_points(grids["A"]) == [
        {"lr": 0.1, "clip_param": 0.2},
        {"lr": 0.1, "clip_param": 0.3},
        {"lr": 0.01, "clip_param": 0.2},
        {"lr": 0.01, "clip_param": 0.3},
    ]
    assert tuning.grid_points({}) == [{}]
    assert tuning.grid_sizes(grids, [*LABELS, "C"]) == {"A": 4, "B": 2, "C": 1}


@pytest.mark.parametrize(
    "item, message",
    [
        ("A lr=[1]", "takes LABEL:KEY=[v1,v2,...]"),
        ("A:lr", "takes LABEL:KEY=[v1,v2,...]"),
        ("A:=[1]", "takes LABEL:KEY=[v1,v2,...]"),
        ("Z:lr=[1]", "'Z' is not an entry"),
        ("A:lr=[1,", "not JSON"),
        ("A:lr=0.1", "non-empty JSON list"),
        ("A:lr=[]", "non-empty JSON list"),
        ("A:lr=[0.1, 0.1]", "repeats"),
    ],
)
def test_bad_grids_name_the_option_and_entry(item, message):
    with pytest.raises(TuningError, match=re.escape(message)):
        tuning.parse_grids([item], LABELS)


def test_a_key_is_tuned_in_one_option():
    with pytest.raises(TuningError, match="given twice"):
        tuning.parse_grids(["A:lr=[1, 2]", "A:lr=[3]"], LABELS)


def test_tuning_seeds_are_disjoint_from_the_evaluation_seeds():
    assert tuning.tuning_seeds([0, 1, 2, 3, 4]) == [1000, 1001]
    assert tuning.tuning_seeds([1000, 1002]) == [1001, 1003]  # the default skips an evaluation seed
    assert tuning.tuning_seeds([0, 1], [7]) == [7]
    with pytest.raises(TuningError, match=r"disjoint from --seeds: both have \[1\]"):
        tuning.tuning_seeds([0, 1], [1, 9])
    for bad in ([], [5, 5]):
        with pytest.raises(TuningError, match="without repeats"):
            tuning.tuning_seeds([0], bad)


def test_grids_of_unequal_size_are_refused_unless_allowed():
    assert tuning.check_equal_size({"A": 2, "B": 2}, allow_unequal=False) == []
    with pytest.raises(TuningError, match=r"differ in size \(A: 4, B: 2, C: 1.*--allow-unequal-tuning"):
        tuning.check_equal_size({"A": 4, "B": 2, "C": 1}, allow_unequal=False)
    assert tuning.check_equal_size({"A": 4, "B": 2, "C": 1}, allow_unequal=True) == ["B", "C"]


def test_the_best_point_has_the_highest_iqm_then_the_best_worst_seed_then_comes_first():
    assert tuning.choose_best([[1.0, 2.0], [5.0, 6.0], [3.0, 4.0]]) == 1
    # Equal IQM (5.5): the higher worst seed wins.
    assert tuning.choose_best([[1.0, 10.0], [5.0, 6.0]]) == 1
    # Equal IQM and worst seed: the first in grid order.
    assert tuning.choose_best([[2.0, 4.0], [4.0, 2.0]]) == 0
    assert tuning.choose_best([[2.0, 4.0], [4.0, 2.0], [3.0, 3.0]]) == 2  # same IQM, a better worst seed
    # IQM trims: one lucky seed of four does not win.
    assert tuning.choose_best([[0.0, 0.0, 0.0, 100.0], [1.0, 1.0, 1.0, 1.0]]) == 1
    with pytest.raises(TuningError):
        tuning.choose_best([[1.0], []])
