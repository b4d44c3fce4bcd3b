"""The KServe example cannot drift from the command: its args are the real flags, its Dockerfile
installs extras that exist and runs the command."""

from __future__ import annotations

import argparse
import re
import tomllib
from pathlib import Path
from typing import Any

import yaml

from counterplan.server.cli.main import build_parser

ROOT = Path(__file__).resolve().parents[3]
EXAMPLE = ROOT / "examples" / "kserve"


def _service() -> dict[str, Any]:
    service: dict[str, Any] = yaml.safe_load((EXAMPLE / "inferenceservice.yaml").read_text(encoding="utf-8"))
    return service


def _kserve_parser() -> argparse.ArgumentParser:
    (commands,) = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    parser: argparse.ArgumentParser = commands.choices["kserve"]
    return parser


def test_the_inferenceservice_runs_counterplan_kserve_with_its_real_flags() -> None:
    service = _service()
    assert service["apiVersion"] == "serving.kserve.io/v1beta1" and service["kind"] == "InferenceService"
    name, namespace = service["metadata"]["name"], service["metadata"]["namespace"]
    assert service["spec"]["predictor"]["model"]["protocolVersion"] == "v2"
    (container,) = service["spec"]["explainer"]["containers"]
    args = [str(arg) for arg in container["args"]]
    flags = {option for action in _kserve_parser()._actions for option in action.option_strings}
    written = [arg for arg in args if arg.startswith("--")]
    assert written and set(written) <= flags, set(written) - flags
    parsed = build_parser().parse_args(["kserve", *args])  # the values parse too
    assert parsed.model_name == name  # KServe's convention: the predictor's model is the service's name
    assert parsed.predictor_host == f"{name}-predictor.{namespace}"
    assert parsed.predictor_protocol == "v2"
    assert [port["containerPort"] for port in container["ports"]] == [parsed.http_port] == [8080]
    assert parsed.data.startswith("/mnt/models/")  # where KServe's storage initializer puts STORAGE_URI
    assert {env["name"] for env in container["env"]} == {"STORAGE_URI"}


def test_the_dockerfile_installs_the_extras_and_runs_the_command() -> None:
    text = (EXAMPLE / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^FROM python:3\.11-slim$", text, re.MULTILINE)
    assert 'ENTRYPOINT ["counterplan", "kserve"]' in text
    (extras,) = re.findall(r'pip install "\.\[([a-z,]+)\]"', text)
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert set(extras.split(",")) == {"kserve", "remote"}
    assert set(extras.split(",")) <= set(declared["optional-dependencies"])
    for source in re.findall(r"^COPY (\S+) ", text, re.MULTILINE):
        assert (ROOT / source).exists(), source
    assert "counterplan" in declared["scripts"]
