"""deploy/: the image definition and the Kubernetes manifests for the Dask operator.

The manifests are built with kustomize (``kubectl kustomize``), validated
against the operator's CRD schemas (from the ``dask-kubernetes`` package) and
the Kubernetes object schemas (``kubernetes-validate``, offline), and the
commands in them are run for real: the DaskJob's scheduler, workers and
``sdcdist audit`` start on loopback from the manifest's own arguments.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml
import zarr

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
PROFILES = ("overlays/small", "overlays/large", "cluster", "service")
BUILD_TOOLS = re.compile(r"\b(build-essential|gcc|g\+\+|make|clang|[\w.+-]+-dev)\b")


# ---------------------------------------------------------------------------
# the image


def dockerfile_stages() -> list[dict]:
    """The Dockerfile's stages: base image, name and (instruction, argument) list."""
    text = (DEPLOY / "Dockerfile").read_text()
    text = re.sub(r"\\\n", " ", text)
    stages: list[dict] = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instr, _, arg = line.partition(" ")
        instr = instr.upper()
        if instr == "FROM":
            m = re.match(r"(\S+)(?:\s+AS\s+(\S+))?", arg, re.IGNORECASE)
            stages.append({"base": m.group(1), "name": m.group(2), "steps": []})
        elif stages:
            stages[-1]["steps"].append((instr, arg.strip()))
    return stages


def test_dockerfile_structure():
    stages = dockerfile_stages()
    assert len(stages) >= 2, "multi-stage: build tools stay in the build stage"
    final = stages[-1]
    for st in stages:
        assert re.match(r"python:\$\{PYTHON_VERSION\}-slim", st["base"]), st["base"]
    steps = final["steps"]
    instrs = [i for i, _ in steps]
    runs = " ".join(a for i, a in steps if i == "RUN")
    assert not BUILD_TOOLS.search(runs), "no compilers or -dev packages in the final image"
    assert any(i == "COPY" and a.startswith("--from=build") for i, a in steps)
    build_runs = " ".join(a for i, a in stages[0]["steps"] if i == "RUN")
    assert re.search(r"pip install \"\.\[[^\]]*cloud[^\]]*\]\"", build_runs)
    users = [a for i, a in steps if i == "USER"]
    assert users and users[-1].split(":")[0] not in ("0", "root")
    assert instrs.index("USER") < instrs.index("CMD")
    assert "useradd" in runs
    # every file the build copies from the context exists and is not excluded
    for st in stages:
        for i, a in st["steps"]:
            if i == "COPY" and not a.startswith("--from"):
                for src in a.split()[:-1]:
                    assert (ROOT / src).exists(), src
    ignore = (DEPLOY / "Dockerfile.dockerignore").read_text()
    assert "!sdcdist/" in ignore and "!pyproject.toml" in ignore
    # the extras the image installs exist in pyproject
    import tomllib
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    assert {"s3fs", "gcsfs"} <= {re.split(r"[<>=\[]", d)[0] for d in extras["cloud"]}
    assert "tls" in extras


def image_command() -> list[str]:
    steps = dockerfile_stages()[-1]["steps"]
    entry = json.loads(next(a for i, a in steps if i == "ENTRYPOINT"))
    cmd = json.loads(next(a for i, a in steps if i == "CMD"))
    assert entry == ["tini", "--"]
    return cmd


@pytest.mark.slow
def test_image_command_is_a_real_audit(tmp_path):
    cmd = image_command()
    assert cmd[:2] == ["sdcdist", "audit"]
    local = {"/opt/sdcdist/smoke.yaml": str(DEPLOY / "smoke.yaml"),
             "/tmp/smoke-cube.zarr": str(tmp_path / "smoke.zarr")}
    args = [local.get(a, a) for a in cmd[1:]]
    r = subprocess.run([sys.executable, "-m", "sdcdist.cli", *args], capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert int(np.asarray(zarr.open_group(str(tmp_path / "smoke.zarr"))["done"][:]).sum()) == 2


# ---------------------------------------------------------------------------
# the manifests


def kustomize(path: str) -> list[dict]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl (with its built-in kustomize) is not installed")
    out = subprocess.run([kubectl, "kustomize", str(DEPLOY / path)], capture_output=True,
                         text=True, check=True).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def by_kind(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def _strict(schema: dict) -> dict:
    """The CRD schema as the API server's strict field validation applies it: no unknown keys."""
    s = copy.deepcopy(schema)

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if ("properties" in node and "additionalProperties" not in node
                    and not node.get("x-kubernetes-preserve-unknown-fields")):
                node["additionalProperties"] = False
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(s)
    return s


@functools.cache
def crd_schemas() -> dict[str, dict]:
    dk = pytest.importorskip("dask_kubernetes", reason="the dask-kubernetes package (test extra) "
                             "ships the operator's CRDs")
    crds = Path(dk.__file__).parent / "operator" / "deployment" / "helm" / \
        "dask-kubernetes-operator" / "crds"
    out = {}
    for f in crds.glob("*.yaml"):
        crd = yaml.safe_load(f.read_text())
        for v in crd["spec"]["versions"]:
            out[f"{crd['spec']['group']}/{v['name']}/{crd['spec']['names']['kind']}"] = \
                _strict(v["schema"]["openAPIV3Schema"])
    return out


def k8s_validate(obj: dict) -> None:
    kv = pytest.importorskip("kubernetes_validate",
                             reason="kubernetes-validate (test extra) ships the K8s schemas")
    kv.validate(obj, kv.latest_version(), strict=True)


def pod_specs(doc: dict) -> list[tuple[str, dict]]:
    spec = doc["spec"]
    if doc["kind"] == "DaskJob":
        return [("job", spec["job"]["spec"]),
                ("worker", spec["cluster"]["spec"]["worker"]["spec"]),
                ("scheduler", spec["cluster"]["spec"]["scheduler"]["spec"])]
    if doc["kind"] == "DaskCluster":
        return [("worker", spec["worker"]["spec"]), ("scheduler", spec["scheduler"]["spec"])]
    return []


@pytest.mark.parametrize("profile", PROFILES)
def test_manifests_validate(profile):
    import jsonschema
    docs = kustomize(profile)
    schemas = crd_schemas()
    kinds = {d["kind"] for d in docs}
    assert {"ServiceAccount", "Role", "RoleBinding", "NetworkPolicy"} <= kinds
    for d in docs:
        if d["apiVersion"].startswith("kubernetes.dask.org/"):
            key = f"{d['apiVersion']}/{d['kind']}"
            jsonschema.validate({k: v for k, v in d.items()
                                 if k not in ("apiVersion", "kind", "metadata")},
                                schemas[key], cls=jsonschema.Draft7Validator)
            for role, ps in pod_specs(d):  # the pod templates against the PodSpec schema
                k8s_validate({"apiVersion": "v1", "kind": "Pod",
                              "metadata": {"name": f"x-{role}"}, "spec": ps})
            cl = {"DaskJob": lambda s: s["cluster"]["spec"], "DaskCluster": lambda s: s}
            svc = cl[d["kind"]](d["spec"])["scheduler"]["service"] if d["kind"] in cl else None
            if svc:
                k8s_validate({"apiVersion": "v1", "kind": "Service",
                              "metadata": {"name": "x"}, "spec": svc})
        else:
            k8s_validate(d)


def test_crd_validation_catches_mistakes():
    import jsonschema
    schemas = crd_schemas()
    job = yaml.safe_load((DEPLOY / "base" / "daskjob.yaml").read_text())
    job["spec"]["cluster"]["spec"]["worker"]["replica"] = 3  # typo
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"spec": job["spec"]}, schemas["kubernetes.dask.org/v1/DaskJob"],
                            cls=jsonschema.Draft7Validator)
    pod = copy.deepcopy(pod_specs(job)[0][1])
    pod["containers"][0]["resources"]["limit"] = {}
    kv = pytest.importorskip("kubernetes_validate")
    with pytest.raises(kv.ValidationError):
        k8s_validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
                      "spec": pod})


def _bytes(q: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "k": 10**3, "M": 10**6,
             "G": 10**9}
    m = re.fullmatch(r"(\d+)([A-Za-z]*)", str(q))
    return int(m.group(1)) * units.get(m.group(2), 1)


@pytest.mark.parametrize("profile", PROFILES)
def test_resources_security_and_tls(profile):
    docs = kustomize(profile)
    for d in by_kind(docs, "DaskJob") + by_kind(docs, "DaskCluster"):
        for role, ps in pod_specs(d):
            assert ps["serviceAccountName"] == "sdcdist-runner"
            assert ps["automountServiceAccountToken"] is False
            assert ps["securityContext"]["runAsNonRoot"] is True
            c = ps["containers"][0]
            res = c["resources"]
            for kind in ("requests", "limits"):
                assert {"cpu", "memory"} <= set(res[kind]), (role, kind)
            assert _bytes(res["requests"]["memory"]) == _bytes(res["limits"]["memory"])
            assert c["securityContext"]["allowPrivilegeEscalation"] is False
            assert c["securityContext"]["readOnlyRootFilesystem"] is True
            env = {e["name"]: e for e in c.get("env", [])}
            for var in re.findall(r"\$\((\w+)\)", " ".join(c["args"])):  # all defined
                assert var in env or var == "DASK_WORKER_NAME", (role, var)  # (operator's)
            tls = next(v for v in ps["volumes"] if v["name"] == "tls")["secret"]
            assert tls["secretName"] == "sdcdist-tls"
            keys = {i["key"] for i in tls["items"]}
            own = {"job": "client"}.get(role, role)
            assert keys == {"ca.crt", f"{own}.crt", f"{own}.key"}  # only its own key
            if role == "scheduler":
                assert c["args"][c["args"].index("--protocol") + 1] == "tls"
            else:
                assert env["DASK_SCHEDULER_ADDRESS"]["value"].startswith("tls://")
            if role == "worker":
                assert env["MEMORY_LIMIT"]["valueFrom"]["resourceFieldRef"]["resource"] == \
                    "limits.memory"
            if role == "job":
                assert [s["secretRef"]["name"] for s in c["envFrom"]] == ["sdcdist-storage"]
            else:
                assert "envFrom" not in c  # storage credentials reach the job only
    role = by_kind(docs, "Role")[0]
    for rule in role["rules"]:
        assert "*" not in rule["verbs"] and "secrets" not in rule["resources"]
    assert not by_kind(docs, "ClusterRole") and not by_kind(docs, "ClusterRoleBinding")


def test_profiles_differ_by_size_only():
    small, large = kustomize("overlays/small"), kustomize("overlays/large")
    js, jl = by_kind(small, "DaskJob")[0], by_kind(large, "DaskJob")[0]
    ws, wl = js["spec"]["cluster"]["spec"]["worker"], jl["spec"]["cluster"]["spec"]["worker"]
    assert wl["replicas"] > ws["replicas"]
    mem = lambda w: _bytes(w["spec"]["containers"][0]["resources"]["limits"]["memory"])  # noqa
    assert mem(wl) > mem(ws)
    assert ws["spec"]["containers"][0]["args"] == wl["spec"]["containers"][0]["args"]


def test_network_policy_admits_only_job_and_workers_to_the_scheduler():
    docs = kustomize("overlays/small")
    job = by_kind(docs, "DaskJob")[0]
    name = job["metadata"]["name"]
    pols = {p["metadata"]["name"]: p for p in by_kind(docs, "NetworkPolicy")}
    sched = next(p for p in pols.values()
                 if p["spec"]["podSelector"]["matchLabels"].get("dask.org/component")
                 == "scheduler")
    assert sched["spec"]["podSelector"]["matchLabels"]["dask.org/cluster-name"] == name
    assert sched["spec"]["policyTypes"] == ["Ingress"]
    (rule,) = sched["spec"]["ingress"]
    assert [p["port"] for p in rule["ports"]] == [8786]
    (peer,) = rule["from"]
    exprs = {e["key"]: e for e in peer["podSelector"]["matchExpressions"]}
    assert exprs["dask.org/cluster-name"]["values"] == [name]
    assert sorted(exprs["dask.org/component"]["values"]) == ["job-runner", "worker"]
    assert "namespaceSelector" not in peer and "ipBlock" not in peer


def test_long_lived_cluster_has_the_jobs_pods():
    job = yaml.safe_load((DEPLOY / "base" / "daskjob.yaml").read_text())
    cluster = yaml.safe_load((DEPLOY / "cluster" / "daskcluster.yaml").read_text())
    want = json.loads(json.dumps(job["spec"]["cluster"]["spec"]).replace("sdcdist-audit",
                                                                          "sdcdist"))
    got = copy.deepcopy(cluster["spec"])
    env = got["scheduler"]["spec"]["containers"][0].pop("env")
    assert [e["name"] for e in env] == ["DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES"]
    assert "distributed.http.scheduler.api" in yaml.safe_load(env[0]["value"])
    assert got == want


def test_service_talks_to_the_cluster_and_keeps_its_state(tmp_path):
    """deploy/service: `sdcdist serve` on a PVC, with the tokens Secret, admitted to the
    long-lived cluster's scheduler; its arguments are the command's own options."""
    from sdcdist.cli import main
    from sdcdist.service.auth import Tokens
    docs = kustomize("service")
    (dep,) = by_kind(docs, "Deployment")
    assert dep["spec"]["replicas"] == 1 and dep["spec"]["strategy"]["type"] == "Recreate"
    pod = dep["spec"]["template"]
    assert pod["metadata"]["labels"]["sdcdist.org/audit-client"] == "true"
    ps = pod["spec"]
    assert ps["automountServiceAccountToken"] is False and ps["securityContext"]["runAsNonRoot"]
    (c,) = ps["containers"]
    args = c["args"]
    assert args[:4] == ["sdcdist", "--log-format", "json", "serve"]
    serve = main.commands["serve"]
    known = {o for p in serve.params for o in getattr(p, "opts", [])}
    assert {a for a in args[4:] if a.startswith("--")} <= known
    env = {e["name"]: e for e in c["env"]}
    assert env["DASK_SCHEDULER_ADDRESS"]["value"] == "tls://sdcdist-scheduler:8786"
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    vols = {v["name"]: v for v in ps["volumes"]}
    assert args[args.index("--root") + 1] == mounts["state"]
    (pvc,) = by_kind(docs, "PersistentVolumeClaim")
    assert vols["state"]["persistentVolumeClaim"]["claimName"] == pvc["metadata"]["name"]
    assert args[args.index("--tokens") + 1].startswith(mounts["tokens"] + "/")
    secret = next(d for d in by_kind(docs, "Secret")
                  if d["metadata"]["name"] == vols["tokens"]["secret"]["secretName"])
    f = tmp_path / "tokens.txt"
    f.write_text(secret["stringData"]["tokens.txt"])
    assert Tokens.load(f).principals                      # a valid tokens file
    assert {i["key"] for i in vols["tls"]["secret"]["items"]} == \
        {"ca.crt", "client.crt", "client.key"}
    assert c["readinessProbe"]["httpGet"]["path"] == "/v1/health"
    port = c["ports"][0]["containerPort"]
    assert str(port) == args[args.index("--port") + 1]
    (svc,) = [s for s in by_kind(docs, "Service") if s["metadata"]["name"] == "sdcdist-service"]
    assert svc["spec"]["selector"] == {"app.kubernetes.io/name": "sdcdist-service"}
    pol = next(p for p in by_kind(docs, "NetworkPolicy")
               if p["metadata"]["name"] == "sdcdist-service")
    assert pol["spec"]["podSelector"]["matchLabels"] == svc["spec"]["selector"]
    assert [p["port"] for r in pol["spec"]["ingress"] for p in r["ports"]] == [port]
    # the scheduler's policy admits the service pod (its audit-client label)
    sched = next(p for p in by_kind(docs, "NetworkPolicy")
                 if p["metadata"]["name"] == "sdcdist-scheduler")
    peers = [f.get("podSelector", {}).get("matchLabels", {})
             for r in sched["spec"]["ingress"] for f in r["from"]]
    assert {"sdcdist.org/audit-client": "true"} in peers


# ---------------------------------------------------------------------------
# the DaskJob's commands, run here


def _localize(args: list[str], subs: dict[str, str]) -> list[str]:
    out = []
    for a in args:
        for k, v in subs.items():
            a = a.replace(k, v)
        out.append(a)
    return out


@pytest.mark.slow
def test_daskjob_runs_here_on_a_tls_loopback_cluster(tmp_path):
    from click.testing import CliRunner

    from sdcdist.cli import main
    from sdcdist.data import synth, write_microdata
    from sdcdist.testing import LoopbackCluster

    docs = kustomize("overlays/small")
    job = by_kind(docs, "DaskJob")[0]
    cm = {c["metadata"]["name"]: c["data"] for c in by_kind(docs, "ConfigMap")}
    (jobpod, worker, sched) = [ps for _, ps in pod_specs(job)]
    jc, wc, sc = jobpod["containers"][0], worker["containers"][0], sched["containers"][0]

    assert CliRunner().invoke(main, ["certs", "--out", str(tmp_path / "tls")]).exit_code == 0
    spec = yaml.safe_load(cm["sdcdist-spec"]["audit.yaml"])
    url = spec["dataset"]["path"]
    assert url.startswith("s3://")
    write_microdata(synth.generate(300, columns=6, seed=5), tmp_path / "data.zarr")
    spec["dataset"]["path"] = (tmp_path / "data.zarr").as_uri()  # s3:// -> file://
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec" / "audit.yaml").write_text(yaml.safe_dump(spec))
    limit = _bytes(wc["resources"]["limits"]["memory"])
    subs = {"/etc/sdcdist/tls": str(tmp_path / "tls"), "/etc/sdcdist/spec": str(tmp_path / "spec"),
            "/tmp/dask": str(tmp_path / "dask"), "$(MEMORY_LIMIT)": str(limit),
            "$(DASK_WORKER_NAME)": "w"}
    assert sc["args"][:2] == ["dask", "scheduler"] and wc["args"][:2] == ["dask", "worker"]
    assert wc["args"][-1] == "$(DASK_SCHEDULER_ADDRESS)"
    with LoopbackCluster(2, tls_dir=tmp_path / "tls",
                         scheduler_args=_localize(sc["args"][2:], subs),
                         worker_args=_localize(wc["args"][2:-1], subs)) as lc:
        assert lc.address.startswith("tls://")
        env_subs = {**subs, "$(DASK_SCHEDULER_ADDRESS)": lc.address,
                    "$(SDCDIST_CUBE_URL)": str(tmp_path / "cube.zarr")}
        assert jc["args"][:1] == ["sdcdist"]
        cmd = _localize(jc["args"][1:], env_subs)
        r = subprocess.run([sys.executable, "-m", "sdcdist.cli", *cmd], capture_output=True,
                           text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "audit finished" in r.stderr
    logs = [json.loads(ln) for ln in r.stderr.splitlines()]   # every stderr line is JSON
    assert logs and all({"time", "level", "event"} <= set(ev) for ev in logs)
    assert any(ev["event"] == "connected" and "dashboard" in ev for ev in logs)
    done = np.asarray(zarr.open_group(str(tmp_path / "cube.zarr"))["done"][:])
    assert done.sum() == 3 * 2 + 3 * 2  # noise x3, rankswap x3, 2 replicates
    assert shlex.join(jc["args"]).count("--tls-") == 3
