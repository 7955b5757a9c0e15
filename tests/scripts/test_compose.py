"""docker/compose.yaml and .env.example: what this machine can check without a Docker engine.

- The file itself (read with PyYAML): every app service's health check is `manage.py health --role`
  for its kind, it starts after the migrations and healthy PostgreSQL and Redis, each worker checks
  the queue it serves; every variable compose reads is documented in .env.example, the required ones
  left empty there (so a copied example refuses to start rather than run with a published key).
- `docker compose config` (or Debian's `docker-compose config`, v1) validates the file against the
  Compose specification and its interpolation: it passes with the example filled in and fails, naming
  .env.example, with the example as it is. Skipped, saying so, when neither tool is installed.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent.parent
COMPOSE = ROOT / "docker" / "compose.yaml"
ENV_EXAMPLE = ROOT / ".env.example"
APP_SERVICES = {"migrate", "web", "worker-ai", "worker-io", "worker-default", "scheduler"}
VARIABLE = re.compile(r"\$\{([A-Z0-9_]+)(:?[-?])?")


def compose() -> dict[str, Any]:
    return yaml.safe_load(COMPOSE.read_text())


def example_lines() -> dict[str, str | None]:
    """Variables .env.example names: set ones with their value, commented-out ones with None."""
    found: dict[str, str | None] = {}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if match := re.fullmatch(r"([A-Z][A-Z0-9_]*)=(.*)", line):
            found[match[1]] = match[2]
        elif match := re.fullmatch(r"# ([A-Z][A-Z0-9_]*)=.*", line):
            found.setdefault(match[1], None)
    return found


def test_app_services_health_checks_and_start_order() -> None:
    services = compose()["services"]
    assert APP_SERVICES | {"postgres", "redis", "prometheus", "grafana"} == set(services)
    roles = {"web": ["--role", "web"], "scheduler": ["--role", "scheduler"],
             **{f"worker-{q}": ["--role", "worker", "--queue", q] for q in ("ai", "io", "default")}}
    for name, role in roles.items():
        service = services[name]
        assert service["healthcheck"]["test"] == ["CMD", "python", "manage.py", "health", *role], name
        assert service["depends_on"] == {"migrate": {"condition": "service_completed_successfully"},
                                         "postgres": {"condition": "service_healthy"},
                                         "redis": {"condition": "service_healthy"}}, name
        if name.startswith("worker-"):
            assert service["command"] == ["python", "manage.py", "run_worker", name.removeprefix("worker-")]
    assert services["migrate"]["depends_on"] == {"postgres": {"condition": "service_healthy"}}
    assert "migrate --noinput" in " ".join(services["migrate"]["command"])
    for name in ("postgres", "redis"):
        assert services[name]["healthcheck"]["test"][0] == "CMD", name
    assert {services[n].get("profiles", [None])[0] for n in ("prometheus", "grafana")} == {"monitoring"}


def test_every_variable_compose_reads_is_in_env_example() -> None:
    text = COMPOSE.read_text()
    documented = example_lines()
    used = {name: kind for name, kind in VARIABLE.findall(text)}
    missing = sorted(set(used) - set(documented))
    assert not missing, f"not in .env.example: {missing}"
    # Required (`${X:?...}`): an uncommented line; a secret's empty, so nothing starts on a published key.
    for name, kind in used.items():
        if kind == ":?":
            assert documented[name] is not None, f"{name} is required: uncomment it in .env.example"
            if re.search(r"KEY|PASSWORD|TOKEN|SECRET|DATABASE_URL", name):
                assert documented[name] == "", f"{name} must be empty in .env.example (a secret)"
    # The variables the settings read are documented in docs/configuration.md too.
    readme = (ROOT / "docs" / "configuration.md").read_text()
    compose_only = {"POSTGRES_PASSWORD", "POSTGRES_MAX_CONNECTIONS", "GRAFANA_ADMIN_PASSWORD", "GRAFANA_PORT",
                    "WEB_PORT"}
    undocumented = sorted(n for n in set(documented) - compose_only if f"`{n}`" not in readme)
    assert not undocumented, f"in .env.example but not in docs/configuration.md: {undocumented}"


def compose_command() -> list[str] | None:
    docker = shutil.which("docker")
    if docker and subprocess.run([docker, "compose", "version"], capture_output=True).returncode == 0:
        return [docker, "compose"]
    legacy = shutil.which("docker-compose")
    return [legacy] if legacy else None


FILLED = {
    "SECRET_KEY": "compose-config-test-" + "k" * 40,
    "STEADYFLOW_CREDENTIALS_KEY": "km3DmfDJlycJ07W3yCOQ55jBJBO8uMhCDe5Z05tMt00=",
    "POSTGRES_PASSWORD": "pw", "DATABASE_URL": "postgres://steadyflow:pw@postgres:5432/steadyflow",
    "STEADYFLOW_METRICS_TOKEN": "token", "GRAFANA_ADMIN_PASSWORD": "grafana",
}


def test_compose_config_validates(tmp_path: Path) -> None:
    command = compose_command()
    if command is None:
        pytest.skip("neither `docker compose` nor `docker-compose` is installed (apt-get install docker-compose; "
                    ".ci/run does)")
    # A copy, so the checkout's own .env (if any) is neither read nor touched; compose.yaml finds ../.env.
    shutil.copytree(ROOT / "docker", tmp_path / "docker")
    env_file = tmp_path / ".env"

    def config(env_text: str) -> subprocess.CompletedProcess[str]:
        env_file.write_text(env_text)
        return subprocess.run([*command, "--env-file", str(env_file), "-f", str(tmp_path / "docker" / "compose.yaml"),
                               "config"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": str(tmp_path)})

    example = ENV_EXAMPLE.read_text()
    result = config(example)
    assert result.returncode != 0
    assert "(see .env.example)" in result.stderr + result.stdout

    filled = "\n".join(f"{line}{FILLED[line[:-1]]}" if line.endswith("=") and line[:-1] in FILLED else line
                       for line in example.splitlines())
    assert not set(FILLED) - {line.split("=")[0] for line in filled.splitlines() if "=" in line}
    result = config(filled)
    assert result.returncode == 0, result.stderr
    resolved = yaml.safe_load(result.stdout)
    web = resolved["services"]["web"]
    assert web["environment"]["SECRET_KEY"] == FILLED["SECRET_KEY"]
    assert web["environment"]["PROMETHEUS_MULTIPROC_DIR"] == "/metrics-values"
    assert web["environment"]["REDIS_URL"] == "redis://redis:6379/0"
    assert resolved["services"]["postgres"]["command"][-1] == "max_connections=200"
