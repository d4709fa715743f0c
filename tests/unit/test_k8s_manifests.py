"""docs/k8s/: the Indexed Job and the merge Job agree with each other and with
crashpoint's flags, and are valid Kubernetes objects (kubeconform checks them again in
``nox -s lint``; here the same schemas through kubernetes-validate)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from harness.shards import resolve_shard

K8S = Path(__file__).parents[2] / "docs" / "k8s"
KUBERNETES_VERSION = "1.33.0"  # noxfile.py's


def objects(name: str) -> dict[str, dict[str, Any]]:
    docs = list(yaml.safe_load_all((K8S / name).read_text()))
    return {f"{d['kind']}/{d['metadata']['name']}": d for d in docs}


def env_of(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", []) if "value" in e}


def claim_of(job: dict[str, Any]) -> str:
    (volume,) = job["spec"]["template"]["spec"]["volumes"]
    return str(volume["persistentVolumeClaim"]["claimName"])


SHARDS = objects("crashpoint-shards.yaml")
MERGE = objects("crashpoint-merge.yaml")
JOB = SHARDS["Job/crashpoint-shards"]


@pytest.mark.parametrize("obj", [*SHARDS.values(), *MERGE.values()], ids=[*SHARDS, *MERGE])
def test_every_object_is_valid_against_the_kubernetes_schema(obj: dict[str, Any]) -> None:
    kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)


def test_a_misspelt_key_is_refused() -> None:
    bad = copy.deepcopy(JOB)
    bad["spec"]["completionsMode"] = bad["spec"].pop("completionMode")
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, KUBERNETES_VERSION, strict=True)


def test_the_shards_job_is_indexed_one_pod_per_shard() -> None:
    spec = JOB["spec"]
    pod = spec["template"]["spec"]
    (crashpoint, *sidecars) = pod["containers"]
    shards = int(env_of(crashpoint)["SHARDS"])
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == shards
    # A failed pod is replaced by one of its index, never restarted in place.
    assert pod["restartPolicy"] == "Never"
    script = crashpoint["args"][0]
    assert '--shard "auto/$SHARDS"' in script
    assert '--seed "$SEED"' in script
    assert env_of(crashpoint)["SEED"].isdigit()
    # Every index is a shard, and together they are the matrix.
    assert [
        resolve_shard(f"auto/{shards}", {"JOB_COMPLETION_INDEX": str(i)}) for i in range(shards)
    ] == [f"{i + 1}/{shards}" for i in range(shards)]
    assert {c["name"] for c in sidecars} >= {"toxiproxy"}


def test_the_merge_reads_the_volume_the_shards_write() -> None:
    merge = MERGE["Job/crashpoint-merge"]
    (container,) = merge["spec"]["template"]["spec"]["containers"]
    (claim,) = (n for n in SHARDS if n.startswith("PersistentVolumeClaim/"))
    assert claim_of(JOB) == claim_of(merge) == claim.split("/", 1)[1]
    assert SHARDS[claim]["spec"]["accessModes"] == ["ReadWriteMany"]
    assert (
        env_of(container)["SHARDS"]
        == env_of(JOB["spec"]["template"]["spec"]["containers"][0])["SHARDS"]
    )
    assert "crashpoint report /results/shard-*/results.json" in container["args"][0]
