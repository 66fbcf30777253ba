"""deploy/: alert rules and dashboard cover what the issue asks (tests/integration/
test_deploy_metrics.py checks their metric names against a live scrape), the Kubernetes
manifests pass a schema check, the compose stack's files exist."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from vidpipe.config import parse_config


def alert_rules(repo_root: Path) -> list[dict[str, Any]]:
    doc = yaml.safe_load((repo_root / "deploy/prometheus/alerts.yml").read_text())
    return [r for g in doc["groups"] for r in g["rules"]]


def dashboard_queries(repo_root: Path) -> list[str]:
    dash = json.loads((repo_root / "deploy/grafana/vidpipe-dashboard.json").read_text())
    exprs = [t["expr"] for p in dash["panels"] for t in p["targets"]]
    exprs += [v["definition"] for v in dash["templating"]["list"] if "definition" in v]
    return exprs


def all_queries(repo_root: Path) -> list[str]:
    return [r["expr"] for r in alert_rules(repo_root)] + dashboard_queries(repo_root)


def test_alert_rules_cover_the_required_cases(repo_root: Path) -> None:
    rules = {r["alert"]: r for r in alert_rules(repo_root)}
    for name in (
        "VidpipeCameraDown",
        "VidpipeDropRatioHigh",
        "VidpipeLatencyP95High",
        "VidpipeNoInferenceProgress",
    ):
        rule = rules[name]
        assert rule["for"] and rule["labels"]["severity"] and rule["annotations"]["summary"]
    assert "histogram_quantile(0.95" in rules["VidpipeLatencyP95High"]["expr"]
    titles = " ".join(
        p["title"]
        for p in json.loads((repo_root / "deploy/grafana/vidpipe-dashboard.json").read_text())[
            "panels"
        ]
    )
    for what in ("fps", "Drops", "latency", "pool use"):
        assert what in titles, what


def test_dashboard_is_well_formed(repo_root: Path) -> None:
    dash = json.loads((repo_root / "deploy/grafana/vidpipe-dashboard.json").read_text())
    panels = dash["panels"]
    assert len({p["id"] for p in panels}) == len(panels), "panel ids must be unique"
    cells: set[tuple[int, int]] = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] + g["w"] <= 24, p["title"]
        mine = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not cells & mine, f"{p['title']} overlaps another panel"
        cells |= mine
        assert p["datasource"]["uid"] == "${datasource}" and p["targets"], p["title"]
        if p["type"] == "heatmap":
            assert all(t.get("format") == "heatmap" for t in p["targets"]), p["title"]
            assert all("_bucket" in t["expr"] for t in p["targets"]), p["title"]
    names = {v["name"] for v in dash["templating"]["list"]}
    assert names == {"datasource", "instance", "camera"}
    used = {m for q in dashboard_queries(repo_root) for m in ("$instance", "$camera") if m in q}
    assert used == {"$instance", "$camera"}


# ------------------------------------------------------------------------------ Kubernetes

K8S = Path("deploy/kubernetes")
CORE_MANIFESTS = ["configmap.yaml", "secret.yaml", "service.yaml", "statefulset.yaml"]


def kubernetes_validate(*files: Path) -> subprocess.CompletedProcess[str]:
    tool = Path(sys.executable).with_name("kubernetes-validate")
    if not tool.is_file():
        pytest.fail("kubernetes-validate is missing: pip install -e '.[dev]'")
    return subprocess.run(
        [str(tool), "--strict", "--no-warn", *map(str, files)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def load(repo_root: Path, name: str) -> dict[str, Any]:
    return dict(yaml.safe_load((repo_root / K8S / name).read_text()))


def test_manifests_pass_the_schema_check(repo_root: Path, tmp_path: Path) -> None:
    res = kubernetes_validate(*(repo_root / K8S / f for f in CORE_MANIFESTS))
    assert res.returncode == 0, res.stdout + res.stderr
    broken = tmp_path / "statefulset.yaml"
    broken.write_text(
        (repo_root / K8S / "statefulset.yaml").read_text().replace("replicas:", "replica:")
    )
    assert kubernetes_validate(broken).returncode != 0  # the gate can fail


def test_statefulset_runs_one_shard_per_replica(repo_root: Path, assets_dir: Path) -> None:
    sts = load(repo_root, "statefulset.yaml")
    pod = sts["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert int(env["VIDPIPE_SHARD_COUNT"]) == sts["spec"]["replicas"]
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert container["resources"]["requests"]["cpu"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert sts["spec"]["template"]["metadata"]["annotations"]["prometheus.io/scrape"] == "true"
    # the ConfigMap's config is valid with the Secret's keys and the pod's environment
    secret = load(repo_root, "secret.yaml")["stringData"]
    text = load(repo_root, "configmap.yaml")["data"]["vidpipe.yaml"]
    cfg = parse_config(
        text, "configmap", {**secret, "VIDPIPE_MODEL_DIR": str(assets_dir / "models")}
    )
    assert cfg.http.host == "0.0.0.0" and cfg.http.port == container["ports"][0]["containerPort"]
    grace = pod["terminationGracePeriodSeconds"]
    assert grace > cfg.shutdown_timeout_s


def test_servicemonitor_selects_the_service(repo_root: Path) -> None:
    svc, mon = load(repo_root, "service.yaml"), load(repo_root, "servicemonitor.yaml")
    assert mon["kind"] == "ServiceMonitor" and mon["apiVersion"] == "monitoring.coreos.com/v1"
    sel = mon["spec"]["selector"]["matchLabels"]
    assert sel.items() <= svc["metadata"]["labels"].items()
    ports = {p["name"] for p in svc["spec"]["ports"]}
    assert {e["port"] for e in mon["spec"]["endpoints"]} <= ports
    kustomize = yaml.safe_load((repo_root / K8S / "kustomization.yaml").read_text())
    assert sorted(kustomize["resources"]) == sorted([*CORE_MANIFESTS, "servicemonitor.yaml"])


# --------------------------------------------------------------------------------- compose


def test_compose_stack_files_exist(repo_root: Path) -> None:
    deploy = repo_root / "deploy"
    compose = yaml.safe_load((deploy / "compose.yaml").read_text())
    services = compose["services"]
    assert set(services) == {"vidpipe", "prometheus", "grafana", "mosquitto"}
    for name, svc in services.items():
        for volume in svc.get("volumes", []):
            source = volume.split(":", 1)[0]
            if source.startswith("./"):
                assert (deploy / source).exists(), f"{name}: {source} does not exist"
    assert (deploy / services["vidpipe"]["build"]["context"] / "Dockerfile").is_file()
    prom = yaml.safe_load((deploy / "prometheus/prometheus.yml").read_text())
    (job,) = prom["scrape_configs"]
    assert job["static_configs"][0]["targets"] == ["vidpipe:9108"]
    container_cfg = yaml.safe_load((deploy / "container/vidpipe.yaml").read_text())
    assert container_cfg["http"]["port"] == 9108 and container_cfg["http"]["host"] == "0.0.0.0"
    assert "/etc/prometheus/alerts.yml" in prom["rule_files"]
    provider = yaml.safe_load((deploy / "grafana/provisioning/dashboards/vidpipe.yaml").read_text())
    dash_dir = provider["providers"][0]["options"]["path"]
    assert any(v.split(":")[1].startswith(dash_dir) for v in services["grafana"]["volumes"])
