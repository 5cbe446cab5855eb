"""deploy/k8s: valid Kubernetes objects (strict OpenAPI schemas) wired to the real settings."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agent_gateway.config import GatewaySettings
from stello.channels import open_channel
from storage_service.app import create_app as storage_app
from storage_service.config import StorageSettings
from tests.deploy.test_compose import known_variables
from tests.support.fixtures import ServerStarter
from tree_service.config import TreeSettings

REPO = Path(__file__).resolve().parents[2]
K8S = REPO / "deploy" / "k8s"
KUSTOMIZATION: dict[str, Any] = yaml.safe_load((K8S / "kustomization.yaml").read_text())
# The oldest Kubernetes whose schemas the package ships that has every API we use.
KUBERNETES_VERSION = "1.30.0"
SERVICES = {
    "storage": ("storage_service", StorageSettings().port),
    "tree": ("tree_service", TreeSettings().port),
    "gateway": ("agent_gateway", GatewaySettings().port),
}


def documents(name: str) -> list[dict[str, Any]]:
    """The objects of one manifest file."""
    return [doc for doc in yaml.safe_load_all((K8S / name).read_text()) if doc]


def objects() -> list[dict[str, Any]]:
    """Every object the kustomization applies."""
    return [doc for name in KUSTOMIZATION["resources"] for doc in documents(name)]


def find(kind: str, name: str) -> dict[str, Any]:
    """The one object of `kind` named `name`."""
    found = [o for o in objects() if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"{kind}/{name}: {len(found)} objects"
    return found[0]


def container(workload: dict[str, Any]) -> dict[str, Any]:
    """The single container of a Deployment's or Job's pod template."""
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return dict(containers[0])


class TestManifests:
    def test_kustomization_lists_every_file(self) -> None:
        """Every YAML file in deploy/k8s is a resource of the kustomization (the example aside)."""
        files = {p.name for p in K8S.glob("*.yaml")} - {"kustomization.yaml"}
        assert set(KUSTOMIZATION["resources"]) == files - {"secret.example.yaml"}
        assert KUSTOMIZATION["namespace"] == "stello"

    @pytest.mark.parametrize(
        "name", sorted(p.name for p in K8S.glob("*.yaml") if p.name != "kustomization.yaml")
    )
    def test_valid_against_the_schema(self, name: str) -> None:
        """Each object validates strictly (unknown fields refused) against Kubernetes' schema."""
        for doc in documents(name):
            kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)

    @pytest.mark.parametrize("service", sorted(SERVICES))
    def test_service_is_complete(self, service: str) -> None:
        """Deployment (gRPC probes, requests, migrated first), headless Service, HPA and PDB."""
        module, port = SERVICES[service]
        name = f"stello-{service}"
        deployment = find("Deployment", name)
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
        box = container(deployment)
        assert box["command"] == ["python", "-m", module]
        assert {"name": "grpc", "containerPort": port} in box["ports"]
        for probe in ("readinessProbe", "livenessProbe"):
            assert box[probe]["grpc"] == {"port": port}, probe
        assert set(box["resources"]["requests"]) == {"cpu", "memory"}
        assert box["envFrom"] == [
            {"configMapRef": {"name": "stello-config"}},
            {"secretRef": {"name": "stello-secrets"}},
        ]
        (init,) = deployment["spec"]["template"]["spec"]["initContainers"]
        assert (init["command"], init["envFrom"]) == (["stello", "migrate"], box["envFrom"])
        headless = find("Service", name)
        assert headless["spec"]["clusterIP"] == "None"
        assert headless["spec"]["selector"].items() <= labels.items()
        assert headless["spec"]["ports"] == [{"name": "grpc", "port": port, "targetPort": "grpc"}]
        target = find("HorizontalPodAutoscaler", name)["spec"]["scaleTargetRef"]
        assert target == {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
        budget = find("PodDisruptionBudget", name)["spec"]
        assert budget["selector"]["matchLabels"].items() <= labels.items()
        grace = deployment["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
        settings = find("ConfigMap", "stello-config")["data"]
        assert grace > float(settings["STELLO_SHUTDOWN_GRACE_S"]) + 3  # drain, then the preStop

    def test_migration_job(self) -> None:
        """A Job runs `stello migrate` with the same settings and Secret as the services."""
        job = find("Job", "stello-migrate")
        box = container(job)
        assert box["command"] == ["stello", "migrate"]
        assert box["envFrom"] == container(find("Deployment", "stello-storage"))["envFrom"]
        assert job["spec"]["template"]["spec"]["restartPolicy"] in ("OnFailure", "Never")


class TestSettings:
    def test_config_variables_exist(self) -> None:
        """Every ConfigMap and Secret key is a variable the code reads."""
        known = known_variables()
        config = find("ConfigMap", "stello-config")["data"]
        secret = documents("secret.example.yaml")[0]["stringData"]
        assert set(config) - known == set()
        assert set(secret) - known == set()
        assert "STELLO_DATABASE_URL" in secret and "STELLO_DATABASE_URL" not in config

    def test_config_is_valid_for_every_service(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """The ConfigMap parses with each service's Settings, ports matching the Deployments."""
        for key, value in find("ConfigMap", "stello-config")["data"].items():
            monkeypatch.setenv(key, value)
        assert StorageSettings().port == SERVICES["storage"][1]
        assert TreeSettings().port == SERVICES["tree"][1]
        gateway = GatewaySettings()
        assert gateway.port == SERVICES["gateway"][1]
        assert gateway.storage_address == f"dns:///stello-storage:{SERVICES['storage'][1]}"
        assert gateway.tree_address == f"dns:///stello-tree:{SERVICES['tree'][1]}"

    async def test_dns_address_reaches_a_server(self, start_server: ServerStarter) -> None:
        """The gateway's `dns:///name:port` form (a headless Service) dials real servers."""
        running = await start_server(storage_app)
        async with open_channel(f"dns:///localhost:{running.port}") as channel:
            reply = await health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(), timeout=10
            )
        assert reply.status == health_pb2.HealthCheckResponse.SERVING
