"""deploy/prometheus with Prometheus' own checker: `promtool check config`, `check rules`, and
the alert rules' unit tests in alerts-test.yml (Debian package prometheus)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

PROM = Path("deploy/prometheus")


@pytest.fixture(scope="module")
def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: run scripts/setup-system.sh (package prometheus)")
    return path


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


def test_rules_are_valid(promtool: str, repo_root: Path) -> None:
    res = run(promtool, "check", "rules", str(repo_root / PROM / "alerts.yml"))
    assert res.returncode == 0, res.stdout + res.stderr
    assert "SUCCESS: 7 rules found" in res.stdout


def test_scrape_config_is_valid(promtool: str, repo_root: Path, tmp_path: Path) -> None:
    # the file names the rules where the compose stack mounts them; point it here instead
    text = (repo_root / PROM / "prometheus.yml").read_text()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        text.replace("/etc/prometheus/alerts.yml", str(repo_root / PROM / "alerts.yml"))
    )
    res = run(promtool, "check", "config", str(config))
    assert res.returncode == 0, res.stdout + res.stderr


def test_alert_rule_unit_tests(promtool: str, repo_root: Path) -> None:
    res = run(promtool, "test", "rules", str(repo_root / PROM / "alerts-test.yml"))
    assert res.returncode == 0, res.stdout + res.stderr


def test_alert_rule_tests_can_fail(promtool: str, repo_root: Path, tmp_path: Path) -> None:
    shutil.copy(repo_root / PROM / "alerts.yml", tmp_path / "alerts.yml")
    text = (repo_root / PROM / "alerts-test.yml").read_text()
    # decimated drops counted as loss would make belt alert too
    rules = (tmp_path / "alerts.yml").read_text().replace('{reason!~"decimated|no_motion"}', "")
    (tmp_path / "alerts.yml").write_text(rules)
    (tmp_path / "alerts-test.yml").write_text(text)
    res = run(promtool, "test", "rules", str(tmp_path / "alerts-test.yml"))
    assert res.returncode != 0 and "belt" in res.stdout + res.stderr


def test_overload_rule_tests_can_fail(promtool: str, repo_root: Path, tmp_path: Path) -> None:
    """A rule that fired on any overload would alert on a five-minute burst: the tests see it."""
    rules = (repo_root / PROM / "alerts.yml").read_text()
    burst = "avg_over_time(vidpipe_overloaded[15m]) > 0.5"
    assert burst in rules
    (tmp_path / "alerts.yml").write_text(rules.replace(burst, "vidpipe_overloaded > 0"))
    shutil.copy(repo_root / PROM / "alerts-test.yml", tmp_path / "alerts-test.yml")
    res = run(promtool, "test", "rules", str(tmp_path / "alerts-test.yml"))
    assert res.returncode != 0 and "VidpipeOverloaded" in res.stdout + res.stderr
