"""The Kubernetes example in docs/deployment.md is a deployment one can apply: a Deployment per
role (parse, diagnose, notify workers on the queues the router sends to, one beat, the web with
its Service), and the workers scaled on their queues' depth (KEDA for parse, an HPA for
diagnose on the metric /metrics exports)."""
import re
from pathlib import Path

import yaml

from tracedoc.celery import ROLE_OF_APP

DOC = Path(__file__).resolve().parents[2] / "docs" / "deployment.md"
DEFAULT_QUEUE = "tracedoc"  # TRACEDOC_QUEUE unset, as the example deploys
ROLE_QUEUES = {f"{DEFAULT_QUEUE}.{role}" for role in ROLE_OF_APP.values()}  # tracedoc.celery.route_by_role


def manifests() -> list[dict]:
    text = DOC.read_text()
    section = text[text.index("### Kubernetes"):text.index("## Object storage")]
    [block] = re.findall(r"```yaml\n(.*?)```", section, re.S)
    return [m for m in yaml.safe_load_all(block) if m]


def by_kind(kind: str) -> dict[str, dict]:
    return {m["metadata"]["name"]: m for m in manifests() if m["kind"] == kind}


def command(deployment: dict) -> list[str]:
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return container["command"]


def test_a_deployment_per_role_on_the_routers_queues():
    deployments = by_kind("Deployment")
    assert set(deployments) == {f"tracedoc-{r}" for r in ("parse", "diagnose", "notify", "beat", "web")}
    consumed = set()
    for name in ("parse", "diagnose", "notify"):
        cmd = command(deployments[f"tracedoc-{name}"])
        assert cmd[:4] == ["celery", "-A", "tracedoc", "worker"]
        consumed |= set(cmd[cmd.index("-Q") + 1].split(","))
    assert consumed == ROLE_QUEUES | {DEFAULT_QUEUE}  # every queue has a consumer
    assert command(deployments["tracedoc-beat"])[:4] == ["celery", "-A", "tracedoc", "beat"]
    assert deployments["tracedoc-beat"]["spec"]["replicas"] == 1
    assert command(deployments["tracedoc-web"])[:2] == ["gunicorn", "tracedoc.wsgi"]
    assert by_kind("Service")["tracedoc-web"]["spec"]["selector"] == {"app": "tracedoc", "role": "web"}


def test_workers_scale_on_their_queue_depth():
    [trigger] = by_kind("ScaledObject")["tracedoc-parse"]["spec"]["triggers"]
    assert trigger["type"] == "redis" and trigger["metadata"]["listName"] in ROLE_QUEUES
    hpa = by_kind("HorizontalPodAutoscaler")["tracedoc-diagnose"]
    [metric] = hpa["spec"]["metrics"]
    assert metric["external"]["metric"]["name"] == "tracedoc_queue_depth_by_queue"
    assert metric["external"]["metric"]["selector"]["matchLabels"]["queue"] in ROLE_QUEUES
    assert hpa["spec"]["scaleTargetRef"]["name"] in by_kind("Deployment")
