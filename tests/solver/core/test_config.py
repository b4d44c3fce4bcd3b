from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from counterplan.solver import (
    ConfigError,
    LocalSearchPhaseConfig,
    SimulatedAnnealingAcceptorConfig,
    SolverConfig,
    TabuSearchAcceptorConfig,
    TerminationConfig,
)
from counterplan.solver.local.config import LateAcceptanceAcceptorConfig, MoveSelectorConfig


def _rich_config() -> SolverConfig:
    return SolverConfig(
        phases=(
            LocalSearchPhaseConfig(
                acceptor=SimulatedAnnealingAcceptorConfig(starting_temperature="[0.1/0/0]hard/[0.5/2]soft"),
                walkers=2,
                termination=TerminationConfig(step_count_limit=30),
            ),
            LocalSearchPhaseConfig(
                acceptor=TabuSearchAcceptorConfig(entity_tabu_size=2, value_tabu_size=3),
                move_selector=MoveSelectorConfig(moves_per_step=16, swap_weight=1.0),
            ),
        ),
        termination=TerminationConfig(
            composition="and",
            best_score_feasible=True,
            children=(TerminationConfig(unimproved_step_count_limit=5, spent_limit_seconds=2.5),),
        ),
        random_seed=11,
    )


def test_config_round_trips_through_json_and_yaml() -> None:
    config = _rich_config()
    assert SolverConfig.model_validate_json(config.model_dump_json()) == config
    assert SolverConfig.from_yaml(config.to_yaml()) == config
    assert SolverConfig.from_yaml(config.model_dump_json()) == config  # JSON is YAML


def test_default_config_stops_when_stable_with_a_step_cap_and_no_clock() -> None:
    config = SolverConfig()
    assert config.termination.spent_limit_seconds is None  # no answer may depend on machine load
    assert config.termination.step_count_limit is not None and config.termination.unimproved_step_count_limit
    assert [phase.type for phase in config.phases] == ["feature_scan", "local_search", "boundary_polish"]
    stable = config.phases[1].termination
    assert stable is not None and stable.composition == "and" and stable.best_score_feasible
    assert stable.unimproved_step_count_limit is not None


@pytest.mark.parametrize(
    ("data", "field", "fragment"),
    [
        (
            {"phases": [{"acceptor": {"type": "tabu_search", "entity_tabu_size": -1}}]},
            "entity_tabu_size",
            "greater than or equal to 0",
        ),
        ({"phases": [{"acceptor": {"type": "annealing"}}]}, "acceptor", "tag"),
        ({"termination": {"best_score_limit": "0hard"}}, "termination.best_score_limit", "expected the form"),
        ({"termination": {"spent_limit_seconds": -1}}, "termination.spent_limit_seconds", "greater than 0"),
        ({"phases": []}, "phases", "at least one phase"),
        ({"termination": {}, "phases": [{}]}, "termination", "never ends"),
        ({"phases": [{"walkers": 0}]}, "walkers", "greater than or equal to 1"),
        (
            {
                "phases": [
                    {
                        "move_selector": {
                            "change_weight": 0,
                            "revert_weight": 0,
                            "pair_change_weight": 0,
                            "toward_original_weight": 0,
                            "shrink_weight": 0,
                        }
                    }
                ]
            },
            "weights",
            "above 0",
        ),
        (
            {
                "phases": [
                    {"acceptor": {"type": "simulated_annealing", "starting_temperature": "[-1/0/0]hard/[0/0]soft"}}
                ]
            },
            "starting_temperature",
            ">= 0",
        ),
        ({"random_seed": 1, "unknown": True}, "unknown", "Extra inputs"),
    ],
)
def test_bad_configs_name_the_field(data: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        SolverConfig.from_dict(data)
    assert isinstance(info.value, ValueError)
    assert field in info.value.field
    assert fragment in info.value.problem


def test_constructing_a_bad_acceptor_directly_raises_config_error() -> None:
    with pytest.raises(ConfigError, match="late_acceptance_size"):
        LateAcceptanceAcceptorConfig(late_acceptance_size=0)


def test_yaml_errors_are_config_errors(tmp_path: Any) -> None:
    with pytest.raises(ConfigError, match="YAML"):
        SolverConfig.from_yaml("phases: [")
    with pytest.raises(ConfigError, match="mapping"):
        SolverConfig.from_yaml("- 1")
    with pytest.raises(ConfigError, match="cannot read"):
        SolverConfig.load(tmp_path / "missing.yaml")
    path = tmp_path / "config.yaml"
    path.write_text(_rich_config().to_yaml())
    assert SolverConfig.load(path) == _rich_config()


@pytest.fixture(params=["libyaml", "pure Python"])
def yaml_reader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Configuration text read by libyaml (where PyYAML has it) and by PyYAML's own reader (where
    it does not): the limits hold on both."""
    from counterplan.planning import safe_yaml

    if request.param == "libyaml" and safe_yaml._C_PARSER is None:
        pytest.skip("this PyYAML was built without libyaml")
    if request.param == "pure Python":
        monkeypatch.setattr(safe_yaml, "_C_PARSER", None)
    return str(request.param)


def test_configuration_text_is_read_within_limits(tmp_path: Path, yaml_reader: str) -> None:
    from counterplan.planning.safe_yaml import MAX_CONFIG_BYTES, MAX_DEPTH, ConfigTextError, load_config_text

    assert load_config_text("phases:\n- {type: feature_scan}\n") == {"phases": [{"type": "feature_scan"}]}
    assert load_config_text('{"random_seed": 3}') == {"random_seed": 3}  # JSON is YAML
    with pytest.raises(ConfigTextError, match="aliases"):
        load_config_text("a: &x [1, 2]\nb: *x\n")
    with pytest.raises(ConfigTextError, match=f"deeper than {MAX_DEPTH}"):
        load_config_text("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))
    load_config_text("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1))  # just inside the limit
    with pytest.raises(ConfigTextError, match="at most"):
        load_config_text("# " + "x" * MAX_CONFIG_BYTES)
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("a: &a [1, 1]\nb: &b [*a, *a]\nphases: [*b]\n")
    with pytest.raises(ConfigError, match="aliases"):
        SolverConfig.load(bomb)  # files the command line names are read the same way


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="named pipes are POSIX")
def test_a_configuration_file_that_is_no_regular_file_or_too_large_is_not_read(tmp_path: Path) -> None:
    """``--config`` on a named pipe waited for a writer for good, and on ``/dev/zero`` read without
    end (fuzzing: both hung the command); a large file was read whole before the cap refused it."""
    from counterplan.planning.safe_yaml import MAX_CONFIG_BYTES, ConfigTextError, read_config_file

    pipe = tmp_path / "config.yaml"
    os.mkfifo(pipe)
    for path in (pipe, Path("/dev/zero")):
        with pytest.raises(ConfigError, match="not a regular file") as caught:
            SolverConfig.load(path)
        assert caught.value.field == str(path)
    big = tmp_path / "big.yaml"
    big.write_text("# " + "x" * MAX_CONFIG_BYTES)
    with pytest.raises(ConfigTextError, match=f"{MAX_CONFIG_BYTES + 2:,} bytes; at most"):
        read_config_file(big)
    small = tmp_path / "small.yaml"
    small.write_text("random_seed: 3\n")
    assert SolverConfig.load(small).random_seed == 3


def test_every_size_a_configuration_names_is_bounded() -> None:
    for data, field in [
        ({"phases": [{"move_selector": {"moves_per_step": 10**9}}]}, "moves_per_step"),
        (
            {"phases": [{"acceptor": {"type": "late_acceptance", "late_acceptance_size": 10**12}}]},
            "late_acceptance_size",
        ),
        ({"phases": [{"acceptor": {"type": "tabu_search", "entity_tabu_size": 10**9}}]}, "entity_tabu_size"),
        ({"termination": {"step_count_limit": 10**15}}, "step_count_limit"),
        ({"termination": {"spent_limit_seconds": 1e300}}, "spent_limit_seconds"),
        ({"random_seed": -1}, "random_seed"),
        ({"phases": [{"type": "feature_scan"}] * 17}, "phases"),
    ]:
        with pytest.raises(ConfigError, match=field):
            SolverConfig.from_dict(data)


def test_a_step_that_would_not_fit_in_memory_is_refused_before_solving() -> None:
    from counterplan.planning import CallableAdapter, ClassGoal, CounterfactualProblem, FloatFeature, OutputSpec
    from counterplan.solver import CounterfactualSolver
    from counterplan.solver.core.budget import MAX_CELLS_PER_STEP, step_cells

    wide = CounterfactualProblem(
        [FloatFeature(name=f"f{i}", value=0.0, low=0.0, high=1.0) for i in range(2000)],
        [ClassGoal(target=1)],
        CallableAdapter(lambda X: X[:, :2], [OutputSpec("ok", (0, 1))]),
    )
    greedy = SolverConfig.from_dict({"phases": [{"walkers": 64, "move_selector": {"moves_per_step": 4096}}]})
    assert max(cells for _, cells in step_cells(greedy, 2000, 2000)) > MAX_CELLS_PER_STEP
    with pytest.raises(ConfigError, match=r"moves_per_step.*at most"):
        CounterfactualSolver(wide, greedy)
    with pytest.raises(ValueError, match="seed"):
        CounterfactualSolver(wide, SolverConfig(), seed=-1)
    for seed in (1.5, True, "3"):  # model_copy does not validate: each became the config's seed
        with pytest.raises(ValueError, match="seed"):
            CounterfactualSolver(wide, SolverConfig(), seed=seed)  # type: ignore[arg-type]
    narrow = CounterfactualProblem(wide.space.features[:2], [ClassGoal(target=1)], wide.model)
    assert CounterfactualSolver(narrow, SolverConfig(), seed=np.int64(3)).config.random_seed == 3


def test_error_messages_show_a_bad_value_by_a_short_excerpt() -> None:
    from counterplan.planning._pydantic import excerpt

    # the one echo cap of every message (planning.errors.echo): quoted, the string's own length
    assert excerpt("x" * 1_000_000).endswith("… (1,000,000 characters)'") and len(excerpt("x" * 10**6)) <= 102
    assert excerpt(list(range(10**6))) == "a list of 1000000 items"
    with pytest.raises(ConfigError) as info:
        SolverConfig.from_dict({"random_seed": "y" * 100_000})
    assert len(str(info.value)) < 400


def test_a_key_given_twice_is_refused_not_silently_the_last(yaml_reader: str) -> None:
    """YAML and JSON readers keep the last of a repeated key: ``id: a`` then ``id: b`` would be ``b``."""
    from counterplan.planning.safe_yaml import ConfigTextError, load_config_text

    for text in ("random_seed: 1\nrandom_seed: 2\n", "a: {c: 1, c: 2}\n", '{"a": 1, "a": 2}'):
        with pytest.raises(ConfigTextError, match="given twice"):
            load_config_text(text)
    assert load_config_text("- {k: 1}\n- {k: 2}\n") == [{"k": 1}, {"k": 2}]  # one key in each mapping


def test_both_yaml_readers_read_alike_and_refuse_alike(monkeypatch: pytest.MonkeyPatch) -> None:
    """Large points tables are read by libyaml (about three times as fast); where PyYAML has no
    libyaml its own reader reads them. The two give the same data and refuse the same texts, at
    the nesting limit's edge too (a scalar counts as a level in both)."""
    from counterplan.planning import safe_yaml

    if safe_yaml._C_PARSER is None:
        pytest.skip("this PyYAML was built without libyaml")
    depth = safe_yaml.MAX_DEPTH
    texts = [
        "phases:\n- {type: feature_scan, steps: 3}\nrandom_seed: 0x10\nflag: yes\nnone: ~\nx: .inf\n",
        "variables:\n  - name: age\n    bins:\n      - {upper: 30, points: -1.5e3}\n      - {lower: 30, points: 2}\n",
        "a: &x 1\n",  # an anchor alone is no alias
        "a: &x 1\nb: *x\n",
        "a: 1\nb: {c: 2, c: 3}\n",
        "a: [1, 2\n",
        "a: 1\n---\nb: 2\n",
        "a: '\x07'\n",
        *("[" * n + inner + "]" * n for n in range(depth - 2, depth + 2) for inner in ("", "1", "{a: 1}")),
    ]

    def read(text: str) -> object:
        try:
            return safe_yaml.load_config_text(text)
        except safe_yaml.ConfigTextError as exc:
            return ("refused", exc.problem.split(":")[0].split(" at ")[0])

    fast = [read(text) for text in texts]
    monkeypatch.setattr(safe_yaml, "_C_PARSER", None)
    assert [read(text) for text in texts] == fast
    expected = {"type": "feature_scan", "steps": 3}
    assert fast[0] == {"phases": [expected], "random_seed": 16, "flag": True, "none": None, "x": float("inf")}
    assert sum(isinstance(result, tuple) for result in fast) >= 8


def test_text_that_is_no_utf8_is_a_config_error_not_a_crash() -> None:
    """A Python string with a lone surrogate has no UTF-8 form: measuring its size raised
    UnicodeEncodeError past every caller's handling of configuration errors."""
    from counterplan.planning.safe_yaml import ConfigTextError, load_config_text

    with pytest.raises(ConfigTextError, match="not UTF-8 text at character 4"):
        load_config_text("a: \udcff")
    with pytest.raises(ConfigError, match="UTF-8"):
        SolverConfig.from_yaml("random_seed: \ud800")
