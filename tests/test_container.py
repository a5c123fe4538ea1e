"""The image, without Docker: its files installed the way its Dockerfile installs them, the
health check it declares run against a live admin port, and the compose stack's shape."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from bot.http_server import make_admin_server

ROOT = Path(__file__).resolve().parents[1]


def dockerfile() -> list[tuple[str, str]]:
    """(instruction, arguments), continuation lines joined."""
    text = re.sub(r"\\\n\s*", " ", (ROOT / "Dockerfile").read_text())
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]
    return [(ln.split(None, 1)[0], ln.split(None, 1)[1]) for ln in lines]


def instruction(name: str) -> list[str]:
    return [args for instr, args in dockerfile() if instr == name]


def test_the_image_keeps_its_data_in_a_volume_and_exposes_both_ports():
    assert instruction("VOLUME") == ["/data"]
    assert set(instruction("EXPOSE")[0].split()) == {"3000", "9100"}
    env = " ".join(instruction("ENV"))
    assert "DATABASE_URL=sqlite:////data/" in env and "ADMIN_PORT=9100" in env


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What the Dockerfile copies, staged as it lays it out, and ``pip install .`` of it (into
    a directory: the dependencies come from this environment, the project's code does not)."""
    tmp = tmp_path_factory.mktemp("image")
    app, site = tmp / "app", tmp / "site"
    app.mkdir()
    for args in instruction("COPY"):
        *sources, target = args.split()
        for source in sources:
            dest = (app / target) if not target.startswith("/") else tmp / target.lstrip("/")
            path = ROOT / source
            if path.is_dir():
                shutil.copytree(path, dest if target != "./" else app / source)
            else:
                dest.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, dest / path.name if dest.is_dir() else dest)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps",
         "--target", str(site), str(app)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    env_line = " ".join(instruction("ENV"))
    python_path = dict(re.findall(r"(\w+)=(\S+)", env_line))["PYTHONPATH"]
    opt = tmp / python_path.lstrip("/")
    return {"PYTHONPATH": f"{site}{os.pathsep}{opt}", "cwd": str(tmp)}


def test_the_installed_image_runs_the_demo_from_its_own_copy(installed):
    env = {**os.environ, "PYTHONPATH": installed["PYTHONPATH"]}
    where = subprocess.run(
        [sys.executable, "-c", "import bot, examples.plain_graph; print(bot.__file__)"],
        env=env, cwd=installed["cwd"], capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert where.stdout.startswith(installed["PYTHONPATH"].split(os.pathsep)[0])
    demo = subprocess.run(
        [sys.executable, "-m", "bot", "demo"],
        env=env, cwd=installed["cwd"], capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert demo.returncode == 0, demo.stderr[-2000:]
    assert "\nAudit trail:" in demo.stdout and "decision_recorded" in demo.stdout


def healthcheck() -> str:
    (args,) = instruction("HEALTHCHECK")
    return args.split(" CMD ", 1)[1]


def run_healthcheck(admin_port: int) -> int:
    """As Docker runs a shell-form CMD, with this environment's python first on the PATH."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {**os.environ, "PATH": path, "ADMIN_PORT": str(admin_port)}
    done = subprocess.run(
        ["/bin/sh", "-c", healthcheck()], env=env, capture_output=True, timeout=30, check=False
    )
    return done.returncode


def test_the_declared_health_check_passes_on_a_live_admin_port_and_fails_without(
    serve_bot, sqlite_url
):
    h = serve_bot(sqlite_url)
    admin = make_admin_server(h.bot, host="127.0.0.1", port=0).start()
    try:
        assert run_healthcheck(admin.port) == 0
    finally:
        admin.stop()
    assert run_healthcheck(admin.port) != 0  # nothing listens there any more


def test_compose_runs_the_upgrade_once_then_the_bot_on_postgresql():
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"db", "migrate", "bot"}
    assert services["migrate"]["command"] == ["db", "upgrade"]
    assert services["migrate"]["restart"] == "no"
    bot = services["bot"]
    assert bot["depends_on"]["migrate"] == {"condition": "service_completed_successfully"}
    assert bot["depends_on"]["db"] == {"condition": "service_healthy"}
    assert "healthcheck" in services["db"]
    for name in ("migrate", "bot"):
        assert services[name]["build"] == "."
        assert services[name]["env_file"] == ".env"
        url = services[name]["environment"]["DATABASE_URL"]
        assert url.startswith("postgresql://") and "@db:5432/" in url
    assert {p.split(":")[-1].strip('"') for p in bot["ports"]} == {"3000", "9100"}
    assert any(v.endswith(":/data") for v in bot["volumes"])
    assert set(compose["volumes"]) >= {"db-data", "bot-data"}
    assert shlex.split(healthcheck())[0] == "python"
