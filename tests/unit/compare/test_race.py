"""rllib_ext.compare.race (``rllib race``): every check of a race runs before Ray starts and names what is wrong."""

from __future__ import annotations

import json
import math
import os

import pytest

from rllib_ext import cli
from rllib_ext.compare import race
from rllib_ext.compare.rows import EVERY_SIMULATED_STEP, append_row

COMMON = {
    "model_config": {"fcnet_hiddens": [16]},
    "num_env_runners": 1,
    "num_envs_per_env_runner": 1,
    "rollout_fragment_length": 50,
    "num_learners": 0,
    "min_time_s_per_iteration": 1,
}


def parse_args(argv):
    """``rllib race ARGV``'s ``(spec, own)``."""
    return cli.parse_race_args(argv).race_spec


def rllib_race(argv):
    """``rllib race ARGV``'s exit status."""
    return cli.main(["race", *argv])


BASE = ["--algos", "APPO", "--env", "CartPole-v1", "--budget-env-steps", "100", "--eval-every-env-steps", "50"]


def plan(*extra, common=COMMON, algos=("IMPACT_EXT", "APPO")):
    argv = ["--algos", *algos, "--env", "CartPole-v1", "--budget-env-steps", "100", "--eval-every-env-steps", "50"]
    args, own = parse_args([*argv, "--common", json.dumps(common), *extra])
    return race.plan(args, own)


def test_a_valid_race_records_shared_and_own_settings():
    impact, appo = plan("--set", "IMPACT_EXT:lr=0.001", "--set", "APPO:vf_loss_coeff=0.05")
    assert impact.settings["lr"] == 0.001 and "lr" not in appo.settings
    for key in race.EXECUTION_KEYS:
        assert impact.settings[key] == appo.settings[key]
    assert impact.settings["model_config"] == appo.settings["model_config"] == COMMON["model_config"]
    assert impact.settings["threads"] == 1 and impact.settings["torch_num_threads"] == 1
    assert impact.evaluate is race.evaluate_on_rllib_runner
    assert impact.config.evaluation_interval == race.NEVER  # train() never evaluates by itself


def test_blackbox_algorithms_evaluate_on_their_own_runner():
    (es,) = plan(common={"policy_hiddens": [8], "num_env_runners": 1}, algos=("ES_EXT",))
    assert es.evaluate is race.evaluate_on_blackbox_runner


def test_a_per_algorithm_set_may_not_override_a_common_setting():
    with pytest.raises(race.RaceError, match="APPO:num_env_runners overrides a --common setting"):
        plan("--set", "APPO:num_env_runners=2")
    # ... unless the race declares it variable.
    plan("--set", "APPO:num_env_runners=2", "--variable", "num_env_runners")


def test_execution_settings_must_match():
    common = {k: v for k, v in COMMON.items() if k != "num_learners"}
    with pytest.raises(race.RaceError, match=r"num_learners differs .*IMPACT_EXT=0, APPO=1.*--common"):
        plan(common=common)


def test_the_network_must_be_common():
    common = {k: v for k, v in COMMON.items() if k != "model_config"}
    with pytest.raises(race.RaceError, match="network in --common"):
        plan(common=common)


def test_unknown_algorithm_and_bad_config_name_the_algorithm():
    with pytest.raises(race.RaceError, match="unknown algorithm 'NOPE'"):
        plan(algos=("NOPE",))
    with pytest.raises(race.RaceError, match="^APPO: .*no config key 'not_a_key'"):
        plan("--set", "APPO:not_a_key=1")


def test_an_algorithm_the_race_cannot_evaluate_is_named():
    from ray.rllib.algorithms.ppo import PPO
    from ray.rllib.env.multi_agent_env_runner import MultiAgentEnvRunner

    config = PPO.get_default_config().env_runners(env_runner_cls=MultiAgentEnvRunner)
    with pytest.raises(race.RaceError, match="^PPO: the race cannot evaluate it"):
        race.evaluator_for("PPO", PPO, config)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--budget-env-steps", "0"], "must be > 0"),
        (["--set", "APPO=1"], "LABEL:KEY=JSON"),
        (["--set", "APPO:lr=x"], "not JSON"),
        (["--common", "[1]"], "JSON object"),
        (["--seeds", "1", "1"], "--seeds must not repeat"),
        (["--record", "a/b", "--record", "a/b"], "--record must not repeat"),
    ],
)
def test_bad_arguments_are_usage_errors(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        parse_args([*BASE, *argv])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_no_budget_is_a_usage_error(capsys):
    with pytest.raises(SystemExit):
        parse_args(["--algos", "APPO", "--env", "CartPole-v1", "--eval-every-env-steps", "50"])
    assert "--budget-env-steps and/or --budget-s" in capsys.readouterr().err


def test_env_steps_of_reads_either_place():
    assert race.env_steps_of({"num_env_steps_sampled_lifetime": 7}) == 7
    assert race.env_steps_of({"env_runners": {"num_env_steps_sampled_lifetime": 9}}) == 9
    # The budget is env_runners/num_env_steps_sampled_lifetime: every step simulated.
    both = {"num_env_steps_sampled_lifetime": 7, "env_runners": {"num_env_steps_sampled_lifetime": 9}}
    assert race.env_steps_of(both) == 9
    with pytest.raises(KeyError):
        race.env_steps_of({})


# ---------------------------------------------------------------------------------------------
# Labelled variants of one registered algorithm.
# ---------------------------------------------------------------------------------------------
BLACKBOX = {"policy_hiddens": [8], "num_env_runners": 1, "eval_episodes": 1}  # DSGD compares evaluations


def test_labels_race_variants_of_one_algorithm():
    args, _ = parse_args(["--algos", "DFD+DSGD=DFD_EXT", "DFD+Adam=DFD_EXT", "ES_EXT", *BASE[2:]])
    assert args.algos == {"DFD+DSGD": "DFD_EXT", "DFD+Adam": "DFD_EXT", "ES_EXT": "ES_EXT"}
    dsgd, adam, es = plan(
        "--set",
        'DFD+DSGD:optimizer="dsgd"',
        common=BLACKBOX,
        algos=("DFD+DSGD=DFD_EXT", "DFD+Adam=DFD_EXT", "ES_EXT"),
    )
    assert [e.label for e in (dsgd, adam, es)] == ["DFD+DSGD", "DFD+Adam", "ES_EXT"]
    assert [e.registered for e in (dsgd, adam, es)] == ["DFD_EXT", "DFD_EXT", "ES_EXT"]
    assert [e.settings["registered_algorithm"] for e in (dsgd, adam, es)] == ["DFD_EXT", "DFD_EXT", "ES_EXT"]
    assert dsgd.algo_cls is adam.algo_cls
    assert dsgd.settings["optimizer"] == dsgd.config.optimizer == "dsgd"
    assert "optimizer" not in adam.settings and adam.config.optimizer == "adam"


def test_like_with_like_checks_name_the_labels():
    algos = ("A=ES_EXT", "B=ES_EXT")
    with pytest.raises(race.RaceError, match="network in --common"):
        plan(common={"num_env_runners": 1}, algos=algos)
    with pytest.raises(race.RaceError, match=r"^--set B:num_env_runners overrides a --common setting"):
        plan("--set", "B:num_env_runners=2", common=BLACKBOX, algos=algos)
    common = {"policy_hiddens": [8]}
    with pytest.raises(race.RaceError, match=r"num_env_runners differs .*\(A=1, B=2\).*--common"):
        plan("--set", "A:num_env_runners=1", "--set", "B:num_env_runners=2", common=common, algos=algos)
    with pytest.raises(race.RaceError, match="^X: unknown algorithm 'NOPE'"):
        plan(common=BLACKBOX, algos=("A=ES_EXT", "X=NOPE"))
    with pytest.raises(race.RaceError, match="^B: .*no config key 'not_a_key'"):
        plan("--set", "B:not_a_key=1", common=BLACKBOX, algos=algos)


@pytest.mark.parametrize(
    "algos, message",
    [
        (["A=APPO", "A=PPO"], "labels must not repeat: 'A'"),
        (["APPO", "APPO=APPO"], "labels must not repeat: 'APPO'"),
        (["=APPO"], "LABEL=NAME or NAME"),
        (["A="], "LABEL=NAME or NAME"),
        (["A:B=APPO"], "without ':' or whitespace"),
        (["A B=APPO"], "without ':' or whitespace"),
    ],
)
def test_bad_labels_are_usage_errors(algos, message, capsys):
    with pytest.raises(SystemExit) as e:
        parse_args(["--algos", *algos, *BASE[2:]])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_set_takes_a_label():
    args, own = parse_args(["--algos", "A=APPO", "B=APPO", *BASE[2:], "--set", "B:lr=0.1"])
    assert own == {"A": {}, "B": {"lr": 0.1}}
    with pytest.raises(SystemExit):
        parse_args(["--algos", "A=APPO", *BASE[2:], "--set", "APPO:lr=0.1"])  # the label, not the name


# ---------------------------------------------------------------------------------------------
# What a run records along its curve (a fake algorithm: no Ray).
# ---------------------------------------------------------------------------------------------
class FakeAlgo:
    """Trains 100 env steps per iteration; logs eta_u and a train return from the second on."""

    logdir = "/nonexistent/race-test"

    def __init__(self):
        self.steps = 0

    def train(self):
        self.steps += 100
        i = self.steps // 100
        result = {"num_env_steps_sampled_lifetime": self.steps, "env_runners": {"episode_return_mean": math.nan}}
        result["blackbox"] = {"grad_norm": float(i)}
        if i > 1:
            result["blackbox"]["eta_u"] = 0.5 / i
            result["env_runners"]["episode_return_mean"] = 20.0
        return result

    def stop(self):
        pass

    def save_to_path(self, path):
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "fake.json"), "w") as f:
            json.dump(self.__dict__, f)

    @classmethod
    def from_checkpoint(cls, path):
        algo = cls()
        with open(os.path.join(path, "fake.json")) as f:
            algo.__dict__.update(json.load(f))
        return algo


class FakeBlackBox(FakeAlgo):
    """Counts its updates, two per iteration."""

    def __init__(self):
        super().__init__()
        self.update_index = 0

    def train(self):
        self.update_index += 2
        return super().train()


class FakeConfig:
    def __init__(self, algo_cls):
        self.algo_cls = algo_cls

    def copy(self, copy_frozen):
        return self

    def debugging(self, seed):
        pass

    def build_algo(self):
        return self.algo_cls()


def fake_args(tmp_path, *record, budget=300):
    argv = ["--algos", "L=ES_EXT", "--env", "CartPole-v1", "--budget-env-steps", str(budget)]
    argv += ["--eval-every-env-steps", "200", "--results-dir", str(tmp_path)]
    for key in record:
        argv += ["--record", key]
    args, _ = parse_args(argv)
    return args


def fake_entry(algo_cls, settings=None):
    settings = settings or {"registered_algorithm": "ES_EXT"}
    return race.Entry("L", "ES_EXT", algo_cls, FakeConfig(algo_cls), settings, lambda algo, k: [1.0] * k)


def run_fake(tmp_path, algo_cls, *record):
    row = race.run_one(fake_entry(algo_cls), 0, fake_args(tmp_path, *record), "r", log=lambda line: None)
    append_row(str(tmp_path / "r.jsonl"), row)  # a row the reader accepts (None, not NaN)
    return row


def test_a_run_records_metrics_and_updates_along_its_curve(tmp_path):
    row = run_fake(tmp_path, FakeBlackBox, "blackbox/eta_u", "blackbox/grad_norm", "x/y")
    assert row.algorithm == "L" and row.registered_algorithm == "ES_EXT"
    assert row.curve.env_steps == [0, 200, 300]
    assert row.extra["recorded"] == {
        "blackbox/eta_u": [None, 0.25, 0.5 / 3],
        "blackbox/grad_norm": [None, 2.0, 3.0],
        "x/y": [None, None, None],
    }
    assert row.extra["updates"] == [0, 4, 6]
    assert row.extra["train_return_mean"] == [None, 20.0, 20.0]


def test_updates_only_for_algorithms_that_count_them(tmp_path):
    row = run_fake(tmp_path, FakeAlgo)
    assert "updates" not in row.extra and row.extra["recorded"] == {}
    assert len(row.curve.env_steps) == len(row.extra["train_return_mean"]) == 3


def test_metric_of_reads_a_path():
    result = {"a": {"b": 2, "nan": math.nan, "flag": True, "c": "x"}, "n": 1.5}
    assert race.metric_of(result, "a/b") == 2.0 and race.metric_of(result, "n") == 1.5
    for path in ("a/nan", "a/flag", "a/c", "a/missing", "n/deeper", "a"):
        assert race.metric_of(result, path) is None


# ---------------------------------------------------------------------------------------------
# --append: more seeds (or algorithms) join an existing race only on equal terms.
# ---------------------------------------------------------------------------------------------
def test_append_accepts_new_seeds_and_refuses_a_rerun_or_other_settings(tmp_path):
    row = run_fake(tmp_path, FakeAlgo)  # "L" seed 0, written to tmp_path / "r.jsonl"
    path = str(tmp_path / "r.jsonl")
    argv = ["--algos", "L=ES_EXT", "--env", "CartPole-v1", "--budget-env-steps", "300", "--eval-every-env-steps", "200"]
    settings = dict(row.settings)

    def check(*extra, settings=settings):
        args, _ = parse_args([*argv, *extra])
        entry = race.Entry("L", "ES_EXT", FakeAlgo, FakeConfig(FakeAlgo), settings, lambda algo, k: [1.0] * k)
        race.check_append(path, [entry], args)

    check("--seeds", "1", "2")  # new seeds, same settings and protocol
    with pytest.raises(race.RaceError, match="already has L seed 0"):
        check("--seeds", "0", "1")
    with pytest.raises(race.RaceError, match="L's settings differ"):
        check("--seeds", "1", settings={**settings, "lr": 0.1})
    with pytest.raises(race.RaceError, match="protocol"):
        check("--seeds", "1", "--eval-episodes", "3")


def test_append_needs_an_existing_race_and_a_fresh_race_needs_a_new_name(tmp_path, capsys):
    argv = [*BASE, "--common", json.dumps(COMMON), "--results-dir", str(tmp_path), "--race", "x"]
    assert rllib_race([*argv, "--append", "--dry-run"]) == 2
    assert "does not exist" in capsys.readouterr().err
    (tmp_path / "impact_vs_appo").mkdir()
    (tmp_path / "impact_vs_appo" / "x.jsonl").write_text("")
    assert rllib_race([*argv, "--benchmark", "impact_vs_appo", "--dry-run"]) == 2
    assert "--append" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------
# --stop-after-s / --resume: a run paused at a deadline goes on from its checkpoint and curve.
# ---------------------------------------------------------------------------------------------
def test_a_paused_run_resumes_to_the_row_an_unbroken_run_gives(tmp_path):
    args = fake_args(tmp_path, "blackbox/eta_u", budget=900)
    unbroken = race.run_one(fake_entry(FakeBlackBox), 0, args, "r", log=lambda line: None)
    where = race.partial_dir(args, "paused", "L", 0)
    chunks, first_date = 0, None
    while True:  # a deadline already passed: every invocation trains one iteration, then pauses
        chunks += 1
        try:
            row = race.run_one(fake_entry(FakeBlackBox), 0, args, "paused", log=lambda line: None, deadline=0.0)
            break
        except race.RunPaused as paused:
            assert str(paused) == where
            with open(os.path.join(where, "state.json")) as f:
                first_date = first_date or json.load(f)["date"]
    assert chunks == 9 and row.extra["chunks"] == 9 and "chunks" not in unbroken.extra
    assert row.curve.env_steps == unbroken.curve.env_steps == [0, 200, 400, 600, 800, 900]
    assert row.curve.eval_return == unbroken.curve.eval_return
    for key in ("recorded", "updates", "train_return_mean", "eval_episode_returns", "iterations"):
        assert row.extra[key] == unbroken.extra[key], key
    assert row.date == first_date  # the date the run started


def test_a_paused_run_is_not_resumed_with_other_settings_protocol_or_machine(tmp_path, monkeypatch):
    args = fake_args(tmp_path, budget=900)
    with pytest.raises(race.RunPaused):
        race.run_one(fake_entry(FakeAlgo), 0, args, "r", log=lambda line: None, deadline=0.0)
    other = fake_entry(FakeAlgo, settings={"registered_algorithm": "ES_EXT", "lr": 0.1})
    with pytest.raises(race.RaceError, match="--resume: .* other settings, protocol or machine"):
        race.run_one(other, 0, args, "r", log=lambda line: None)
    with pytest.raises(race.RaceError, match="other settings, protocol or machine"):
        race.run_one(fake_entry(FakeAlgo), 0, fake_args(tmp_path, budget=1000), "r", log=lambda line: None)
    monkeypatch.setattr(race.Machine, "this", classmethod(lambda cls: cls(cores=16, description="another machine")))
    with pytest.raises(race.RaceError, match="other settings, protocol or machine"):
        race.run_one(fake_entry(FakeAlgo), 0, args, "r", log=lambda line: None)
    monkeypatch.undo()
    row = race.run_one(fake_entry(FakeAlgo), 0, args, "r", log=lambda line: None)  # the same terms: it resumes
    assert row.extra["chunks"] == 2 and row.curve.env_steps[-1] == 900


def test_resume_skips_runs_that_have_a_row_and_checks_like_append(tmp_path):
    row = run_fake(tmp_path, FakeAlgo)  # "L" seed 0 in tmp_path / "r.jsonl"
    path = str(tmp_path / "r.jsonl")
    args, _ = parse_args(
        ["--algos", "L=ES_EXT", "--env", "CartPole-v1", "--budget-env-steps", "300", "--eval-every-env-steps", "200"]
        + ["--seeds", "0", "1", "--resume"]
    )
    entry = fake_entry(FakeAlgo, settings=dict(row.settings))
    assert race.check_append(path, [entry], args, resume=True) == {("L", 0)}
    with pytest.raises(race.RaceError, match="--resume: L's settings differ"):
        race.check_append(path, [fake_entry(FakeAlgo, settings={**row.settings, "lr": 0.1})], args, resume=True)


def test_rows_of_another_machine_join_only_with_other_machine(tmp_path, capsys):
    """A race compared per env step may go on on another machine when asked; never silently."""
    run_fake(tmp_path, FakeAlgo)  # "L" seed 0 in tmp_path / "r.jsonl", run on this machine
    path = tmp_path / "r.jsonl"
    row = json.loads(path.read_text())
    row["machine"] = {"cores": 64, "description": "another CPU / Linux"}
    path.write_text(json.dumps(row) + "\n")
    argv = ["--algos", "L=ES_EXT", "--env", "CartPole-v1", "--budget-env-steps", "300", "--eval-every-env-steps", "200"]
    argv += ["--seeds", "0", "1", "--resume"]
    entry = fake_entry(FakeAlgo, settings=dict(row["settings"]))
    args, _ = parse_args(argv)
    with pytest.raises(race.RaceError, match="another CPU.*--other-machine"):
        race.check_append(str(path), [entry], args, resume=True)
    args, _ = parse_args([*argv, "--other-machine"])
    assert race.check_append(str(path), [entry], args, resume=True) == {("L", 0)}
    assert "--other-machine" not in args.command_line  # an invocation flag: the race's command runs it whole
    with pytest.raises(SystemExit):  # it only joins rows: alone it means nothing
        parse_args([a for a in argv if a != "--resume"] + ["--other-machine"])
    assert "--other-machine goes with --append or --resume" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # a time budget: how far a run gets depends on the machine
        parse_args([*argv, "--other-machine", "--budget-s", "60"])
    assert "--other-machine needs an env-step budget alone" in capsys.readouterr().err


def test_resume_and_stop_after_s_arguments(tmp_path, capsys):
    argv = [*BASE, "--common", json.dumps(COMMON), "--results-dir", str(tmp_path), "--race", "x"]
    with pytest.raises(SystemExit):
        parse_args([*argv, "--append", "--resume"])
    assert "exclude each other" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_args([*argv, "--stop-after-s", "0"])
    assert "--stop-after-s must be > 0" in capsys.readouterr().err
    # Paused runs of a race are resumed, never silently restarted.
    (tmp_path / "impact_vs_appo" / "x.partial").mkdir(parents=True)
    assert rllib_race([*argv, "--benchmark", "impact_vs_appo", "--dry-run"]) == 2
    assert "go on with --resume" in capsys.readouterr().err
    assert rllib_race([*argv, "--benchmark", "impact_vs_appo", "--resume", "--dry-run"]) == 0


@pytest.mark.parametrize(
    "where",
    [
        ["--results-dir", "/tmp/elsewhere"],
        ["--results-dir=/tmp/elsewhere"],
        ["--results-dir", "/tmp/elsewhere", "--stop-after-s", "7500", "--resume"],
        ["--stop-after-s=60", "--results-dir=/tmp/elsewhere", "--dry-run"],
    ],
)
def test_recorded_command_leaves_out_where_the_rows_were_kept(where):
    """A row's command reproduces the race: every setting stays; the local results folder and how the
    invocation was chunked (--stop-after-s, --resume) do not."""
    args, _ = parse_args([*BASE[:2], *where, *BASE[2:], "--set", "APPO:lr=0.1", "--seeds", "3"])
    assert args.results_dir == "/tmp/elsewhere"
    for gone in ("elsewhere", "--results-dir", "--stop-after-s", "--resume", "--dry-run", "7500"):
        assert gone not in args.command_line
    assert args.command_line.endswith(" ".join([*BASE[2:], "--set", "APPO:lr=0.1", "--seeds", "3"]))


# ---------------------------------------------------------------------------------------------
# Env steps: a row says how its steps were counted and keeps where they went.
# ---------------------------------------------------------------------------------------------
class FakeCounted(FakeAlgo):
    """Logs the breakdown as every family does since 2026-11-27: a tenth of the steps evaluate θ."""

    def train(self):
        result = super().train()
        used, evaluation = self.steps * 9 // 10, self.steps // 10
        result["env_runners"].update(
            num_env_steps_sampled_lifetime=self.steps,
            env_steps_used_lifetime=used,
            env_steps_evaluation_lifetime=evaluation,
            env_steps_wasted_lifetime=0,
            env_steps_pending=0,
        )
        return result


def test_a_row_records_the_step_rule_and_the_breakdown_along_its_curve(tmp_path):
    row = run_fake(tmp_path, FakeCounted)
    assert row.step_count == EVERY_SIMULATED_STEP and row.schema == 3
    assert row.curve.env_steps == [0, 200, 300]
    assert row.env_steps_breakdown == {
        "env_steps_used_lifetime": [None, 180, 270],
        "env_steps_evaluation_lifetime": [None, 20, 30],
        "env_steps_wasted_lifetime": [None, 0, 0],
        "env_steps_pending": [None, 0, 0],
    }
    plain = run_fake(tmp_path, FakeAlgo)  # an algorithm that logs no breakdown: nulls
    assert all(values == [None, None, None] for values in plain.env_steps_breakdown.values())


def test_append_refuses_rows_counted_the_old_way_where_the_count_changed(tmp_path):
    """New runs never join rows whose family counted fewer steps before 2026-11-27 (ES_EXT here);
    rows of algorithms that counted every step then as now (IMPACT_EXT) they may join."""
    row = run_fake(tmp_path, FakeAlgo)  # "L" (ES_EXT) seed 0 in tmp_path / "r.jsonl"
    path = tmp_path / "r.jsonl"
    data = json.loads(path.read_text())
    for key in ("step_count", "env_steps_breakdown"):
        del data[key]
    path.write_text(json.dumps({**data, "schema": 1}) + "\n")
    argv = ["--algos", "L=ES_EXT", "--env", "CartPole-v1", "--budget-env-steps", "300", "--eval-every-env-steps", "200"]
    args, _ = parse_args([*argv, "--seeds", "1", "--append"])
    entry = fake_entry(FakeAlgo, settings=dict(row.settings))
    with pytest.raises(race.RaceError, match="counted before 2026-11-27: its L rows left out .*give a new --race"):
        race.check_append(str(path), [entry], args)
    settings = {**data["settings"], "registered_algorithm": "IMPACT_EXT"}
    path.write_text(json.dumps({**data, "schema": 1, "settings": settings}) + "\n")
    entry = race.Entry("L", "IMPACT_EXT", FakeAlgo, FakeConfig(FakeAlgo), settings, lambda algo, k: [1.0] * k)
    assert race.check_append(str(path), [entry], args) == {("L", 0)}


def test_a_run_paused_before_issue_39_is_not_resumed(tmp_path):
    args = fake_args(tmp_path, budget=900)
    with pytest.raises(race.RunPaused):
        race.run_one(fake_entry(FakeAlgo), 0, args, "r", log=lambda line: None, deadline=0.0)
    state_path = os.path.join(race.partial_dir(args, "r", "L", 0), "state.json")
    with open(state_path) as f:
        state = json.load(f)
    del state["step_count"]  # as the harness wrote it before 2026-11-27
    with open(state_path, "w") as f:
        json.dump(state, f)
    with pytest.raises(race.RaceError, match="started before 2026-11-27.*delete it to start over"):
        race.run_one(fake_entry(FakeAlgo), 0, args, "r", log=lambda line: None)


# ---------------------------------------------------------------------------------------------
# Tuning (issue 40): --tune grids on tuning seeds, --matched mappings, the rule in every row.
# ---------------------------------------------------------------------------------------------
def prepared_for(*extra, tmp_path, algos=("IMPACT_EXT", "APPO")):
    argv = ["--algos", *algos, "--env", "CartPole-v1", "--budget-env-steps", "100", "--results-dir", str(tmp_path)]
    spec, own = parse_args([*argv, "--common", json.dumps(COMMON), *extra])
    return race.prepare(spec, own)


TUNE2 = ["--tune", "IMPACT_EXT:lr=[0.001, 0.0005]", "--tune", "APPO:lr=[0.001, 0.0005]"]


def test_eval_every_steps_defaults_to_2k_and_has_two_spellings():
    spec, _ = parse_args(["--algos", "APPO", "--env", "CartPole-v1", "--budget-env-steps", "100"])
    assert spec.eval_every_env_steps == race.DEFAULT_EVAL_EVERY_ENV_STEPS == 2000
    spec, _ = parse_args([*BASE[:-2], "--eval-every-steps", "500"])
    assert spec.eval_every_env_steps == 500


@pytest.mark.parametrize(
    "argv, message",
    [
        ([*TUNE2, "--matched", "APPO:IMPACT_EXT"], "--tune and --matched exclude each other"),
        (["--tune-seeds", "7"], "go with --tune"),
        (["--allow-unequal-tuning"], "go with --tune"),
        ([*TUNE2, "--tune-seeds", "1", "9"], "disjoint from --seeds"),
        (["--tune", "IMPACT_EXT:lr=[0.1, 0.2]"], "grids differ in size (IMPACT_EXT: 2, APPO: 1"),
        (["--tune", "IMPACT_EXT:lr=0.1"], "non-empty JSON list"),
        (["--matched", "APPO"], "TARGET:SOURCE"),
        (["--matched", "APPO:APPO"], "TARGET:SOURCE"),
        (["--matched", "APPO:IMPACT_EXT", "--matched", "APPO:IMPACT_EXT"], "matched once"),
        ([*TUNE2, "--append"], "--append does not add to a tuned race"),
    ],
)
def test_bad_tuning_options_are_usage_errors(argv, message, capsys):
    base = ["--algos", "IMPACT_EXT", "APPO", "--env", "CartPole-v1", "--budget-env-steps", "100"]
    with pytest.raises(SystemExit) as e:
        parse_args([*base, "--common", json.dumps(COMMON), *argv])
    assert e.value.code == 2
    assert message in capsys.readouterr().err


def test_a_grid_builds_every_point_before_any_run(tmp_path):
    prepared = prepared_for(*TUNE2, "--tune", "APPO:vf_loss_coeff=[0.5]", "--tune-seeds", "7", tmp_path=tmp_path)
    plan_ = prepared.tuning
    assert plan_.rule == "grid" and plan_.seeds == [7] and plan_.sizes == {"IMPACT_EXT": 2, "APPO": 2}
    assert [e.settings["lr"] for e in plan_.points["APPO"]] == [0.001, 0.0005]
    assert all(e.settings["vf_loss_coeff"] == 0.5 for e in plan_.points["APPO"])
    record = plan_.record("APPO", point=1)
    assert record["point"] == {"lr": 0.0005, "vf_loss_coeff": 0.5} and record["point_index"] == 1
    assert record["grid"] == {"lr": [0.001, 0.0005], "vf_loss_coeff": [0.5]} and record["not_equally_tuned"] == []
    lines = prepared.plan_lines()
    assert any("APPO: grid of 2" in line for line in lines) and any("seeds [7]" in line for line in lines)


def test_unequal_grids_with_allow_name_the_entries_not_equally_tuned(tmp_path):
    prepared = prepared_for("--tune", "IMPACT_EXT:lr=[0.1, 0.2]", "--allow-unequal-tuning", tmp_path=tmp_path)
    assert prepared.tuning.not_equal == ["APPO"] and len(prepared.tuning.points["APPO"]) == 1
    assert any("NOT equally tuned: APPO" in line for line in prepared.plan_lines())
    assert prepared.tuning.record("APPO")["not_equally_tuned"] == ["APPO"]


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--tune", "IMPACT_EXT:rollout_fragment_length=[10, 20]"], "execution settings are held equal"),
        (["--tune", 'IMPACT_EXT:model_config=[{}, {"fcnet_hiddens": [8]}]'], "overrides a --common setting"),
        (["--tune", "IMPACT_EXT:lr=[0.1, 0.2]", "--set", "IMPACT_EXT:lr=0.1"], "both set it"),
        (["--tune", "IMPACT_EXT:no_such_key=[1, 2]"], "IMPACT_EXT"),
    ],
)
def test_bad_grid_keys_are_refused_before_any_run(extra, message, tmp_path):
    with pytest.raises(race.RaceError, match=message):
        prepared_for(*extra, "--allow-unequal-tuning", tmp_path=tmp_path)


def test_matched_appo_and_ppo_get_impacts_settings_in_their_units(tmp_path):
    prepared = prepared_for(
        "--set",
        "IMPACT_EXT:target_network_update_freq=16",
        "--matched",
        "APPO:IMPACT_EXT",
        tmp_path=tmp_path,
        algos=("IMPACT_EXT", "APPO"),
    )
    impact, appo = prepared.entries
    assert appo.settings["target_network_update_freq"] == 16 / (4 * 2)
    assert appo.settings["circular_buffer_num_batches"] == impact.config.circular_buffer_num_batches
    assert appo.config.lr == impact.config.lr and appo.config.clip_param == impact.config.clip_param
    record = prepared.tuning.record("APPO")
    assert record["rule"] == "matched" and record["source"] == "IMPACT_EXT" and "§4.1.1" in record["paper"]
    assert prepared.tuning.record("IMPACT_EXT") == {"rule": "matched", "pairs": {"APPO": "IMPACT_EXT"}}
    ppo = prepared_for("--matched", "PPO:IMPACT_EXT", tmp_path=tmp_path, algos=("IMPACT_EXT", "PPO")).entries[1]
    assert (ppo.config.train_batch_size_per_learner, ppo.config.minibatch_size, ppo.config.num_epochs) == (2000, 500, 2)


def test_matched_settings_may_not_contradict_common_or_set(tmp_path):
    with pytest.raises(race.RaceError, match="--set APPO:lr conflicts with --matched APPO:IMPACT_EXT"):
        prepared_for("--set", "APPO:lr=0.5", "--matched", "APPO:IMPACT_EXT", tmp_path=tmp_path)
    with pytest.raises(race.RaceError, match="no matched mapping"):
        prepared_for("--matched", "IMPACT_EXT:APPO", tmp_path=tmp_path)


def fake_tuned(tmp_path, monkeypatch, *extra):
    """A tuned race of fake entries (no Ray): each point's evaluation return is 1000 × its lr."""
    monkeypatch.setattr(race, "check_resources", lambda entries: None)
    argv = ["--algos", "A=ES_EXT", "B=ES_EXT", "--env", "CartPole-v1", "--budget-env-steps", "300"]
    argv += ["--eval-every-steps", "200", "--seeds", "0", "1", "--tune-seeds", "5", "6", "--race", "t"]
    argv += ["--results-dir", str(tmp_path), "--tune", "A:lr=[0.01, 0.03]", "--tune", "B:lr=[0.02, 0.01]", *extra]
    spec, _ = parse_args(argv)
    grids = spec.grids

    def entry(label, i):
        lr = grids[label]["lr"][i]
        settings = {"registered_algorithm": "ES_EXT", "lr": lr}
        return race.Entry(label, "ES_EXT", FakeAlgo, FakeConfig(FakeAlgo), settings, lambda algo, k: [1000 * lr] * k)

    points = {label: [entry(label, i) for i in range(2)] for label in ("A", "B")}
    plan_ = race.TuningPlan("grid", grids, [5, 6], {"A": 2, "B": 2}, [], points)
    out = os.path.join(str(tmp_path), "race", "t.jsonl")
    return race.Prepared(spec, [points["A"][0], points["B"][0]], "t", out, set(), plan_)


def test_a_tuned_race_runs_every_point_on_the_tuning_seeds_then_the_best_on_the_evaluation_seeds(tmp_path, monkeypatch):
    from rllib_ext.compare.rows import read_rows

    out = race.run(fake_tuned(tmp_path, monkeypatch), log=lambda line: None)
    rows = read_rows(out)
    tuning_rows = [r for r in rows if r.stage == "tuning"]
    evaluation = [r for r in rows if r.stage == "evaluation"]
    assert sorted((r.algorithm, r.seed, r.tuning["point_index"]) for r in tuning_rows) == [
        (a, s, i) for a in "AB" for s in (5, 6) for i in (0, 1)
    ]
    assert {r.seed for r in evaluation} == {0, 1} and len(evaluation) == 4  # never a tuning seed
    chosen = {r.algorithm: (r.settings["lr"], r.tuning["chosen"], r.tuning["chosen_index"]) for r in evaluation}
    assert chosen == {"A": (0.03, {"lr": 0.03}, 1), "B": (0.02, {"lr": 0.02}, 0)}
    a0 = next(r for r in evaluation if r.algorithm == "A")
    assert a0.tuning["scores"] == [[10.0, 10.0], [30.0, 30.0]] and a0.tuning["seeds"] == [5, 6]
    assert a0.tuning["grid"] == {"lr": [0.01, 0.03]} and a0.tuning["rule"] == "grid"
    assert all(r.curve.cpu_s is not None and len(r.curve.cpu_s) == len(r.curve.env_steps) for r in rows)


def test_a_tuned_race_resumes_where_it_stopped(tmp_path, monkeypatch):
    from rllib_ext.compare.rows import read_rows

    prepared = fake_tuned(tmp_path, monkeypatch, "--stop-after-s", "0.001")
    prepared.spec.stop_after_s = 1e-9
    with pytest.raises(race.RunPaused):
        race.run(prepared, log=lambda line: None)
    with pytest.raises(race.RaceError, match="not run every grid point"):
        race.chosen_points(prepared)
    for _ in range(40):  # each invocation trains at least one iteration
        if os.path.exists(prepared.out):
            prepared.done = race.check_append(prepared.out, prepared.entries, prepared.spec, True, prepared.tuning)
        try:
            race.run(prepared, log=lambda line: None)
            break
        except race.RunPaused:
            continue
    rows = read_rows(prepared.out)
    assert len(rows) == 8 + 4 and len({race.run_key(r) for r in rows}) == 12
    assert not os.path.exists(prepared.paused_root)
