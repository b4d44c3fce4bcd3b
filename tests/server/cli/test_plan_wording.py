"""``counterplan plan`` names the prediction it follows and says what its distance measures.

It printed "goal output" for the number each step moves and a bare "distance": the output is the
goal's (a class goal: the probability of that class of that output), and the distance is the mean
Gower distance over the features (each 0 when kept, up to 1).
"""

from __future__ import annotations

import pytest

from tests.cli import run_cli

pytest.importorskip("pymoo")

SMALL = ("--population", "40", "--generations", "8", "--seed", "1")


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_the_demo_plan_names_the_approval_probability_and_the_gower_distance(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, err = run_cli(capsys, "plan", *SMALL)
    assert code == 0, err
    text = _flat(out)
    assert "goal output" not in text, text
    assert "Before any action: the probability of approved = 1 is 0.120." in text, text
    assert "; probability of approved = 1 then 0." in text, text  # each step's
    assert "Gower" in text and "0 when kept" in text and "up to 1" in text, text


def test_a_goal_on_another_class_names_that_class(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run_cli(capsys, "plan", "--goal", "approved=class:0", *SMALL)
    assert code == 0, err
    text = _flat(out)
    assert "already met (probability of approved = 0: 0.880)" in text and "goal output" not in text, text


@pytest.mark.integration  # a real server on a loopback port
def test_a_plan_on_a_server_names_the_same_output(capsys: pytest.CaptureFixture[str]) -> None:
    from counterplan.server.grpc.app import start_server
    from counterplan.server.grpc.settings import ServerSettings

    running = start_server(ServerSettings(port=0))
    capsys.readouterr()  # the server's start line
    try:
        code, out, err = run_cli(capsys, "plan", "--server", running.target, *SMALL)
    finally:
        running.stop(0)
    assert code == 0, err
    text = _flat(out)
    assert "the probability of approved = 1 is 0.120" in text and "goal output" not in text, text
    assert "Gower" in text, text
