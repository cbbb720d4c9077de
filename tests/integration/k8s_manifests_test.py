#!/usr/bin/python3
"""The Kubernetes manifests (deploy/k8s) and the Dockerfile, checked offline: no cluster and no
image registry are reachable here, so nothing is applied or pulled. What is checked:

- every manifest parses, and the kustomization lists exactly the manifests there are;
  `kubectl kustomize` renders them (when kubectl is installed);
- every container's arguments are options its `ember` subcommand takes, and every address it
  listens on is a declared container port; every Service's targetPort is a port of the pods it
  selects; every probe points at a declared port, HTTP probes at Ember's health endpoints;
  Prometheus' annotations name the port `--metrics` serves;
- nodes request a GPU (nvidia.com/gpu), mount /dev/shm as memory and may lock memory (IPC_LOCK);
- the ConfigMap's ember.yaml is a config Ember accepts (a gateway started with it gets as far as
  reading the token file the Secret would provide);
- the Dockerfile's packages exist in Debian's index, and its command's options are `ember serve`'s.

Usage: k8s_manifests_test.py --ember PATH
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
K8S = os.path.join(ROOT, "deploy", "k8s")
HEALTH = {"/v2/health/live", "/v2/health/ready"}


class Failure(Exception):
    pass


def options_of(ember, sub, cache={}):
    if sub not in cache:
        out = subprocess.run([ember, sub, "--help"], capture_output=True, text=True).stdout
        cache[sub] = set(re.findall(r"(--[a-z-]+)", out))
    return cache[sub]


def check_args(ember, where, args):
    """The subcommand's options; returns {option: port} for the addresses it listens on."""
    sub, rest = args[0], args[1:]
    known = options_of(ember, sub)
    if not known:
        raise Failure(f"{where}: `ember {sub}` is no subcommand")
    listens = {}
    for i, a in enumerate(rest):
        if a.startswith("--"):
            if a not in known:
                raise Failure(f"{where}: `ember {sub}` has no option {a}")
            if a in ("--http", "--grpc", "--metrics", "--listen", "--data-listen") and i + 1 < len(rest):
                listens[a] = int(rest[i + 1].rsplit(":", 1)[1])
    return listens


def port_of(container, ref):
    ports = {p.get("name"): p["containerPort"] for p in container.get("ports", [])}
    if isinstance(ref, int):
        if ref not in ports.values():
            raise Failure(f"{container['name']}: port {ref} is not declared")
        return ref
    if ref not in ports:
        raise Failure(f"{container['name']}: no port named {ref}")
    return ports[ref]


def check_probes(container, http_port, tls=False):
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = container.get(kind)
        if not probe:
            raise Failure(f"{container['name']}: no {kind}")
        if "httpGet" in probe:
            if probe["httpGet"]["path"] not in HEALTH:
                raise Failure(f"{container['name']}: {kind} asks {probe['httpGet']['path']}, not a health endpoint")
            if port_of(container, probe["httpGet"]["port"]) != http_port:
                raise Failure(f"{container['name']}: {kind} is not on the HTTP port {http_port}")
            if (probe["httpGet"].get("scheme", "HTTP") == "HTTPS") != tls:
                raise Failure(f"{container['name']}: {kind} speaks {'plain HTTP' if tls else 'HTTPS'} to "
                              f"{'a TLS' if tls else 'a plain'} port")
        elif "tcpSocket" in probe:
            port_of(container, probe["tcpSocket"]["port"])
        else:
            raise Failure(f"{container['name']}: {kind} is neither httpGet nor tcpSocket")


def check_manifests(ember):
    docs = {}
    for f in sorted(os.listdir(K8S)):
        if f.endswith(".yaml"):
            with open(os.path.join(K8S, f)) as fh:
                docs[f] = [d for d in yaml.safe_load_all(fh) if d]
    listed = docs.pop("kustomization.yaml")[0]["resources"]
    if sorted(listed) != sorted(docs):
        raise Failure(f"the kustomization lists {sorted(listed)}, deploy/k8s holds {sorted(docs)}")
    objects = [d for ds in docs.values() for d in ds]
    kinds = sorted(f"{d['kind']}/{d['metadata']['name']}" for d in objects)
    print(f"ok: {len(objects)} objects parse: {', '.join(kinds)}")
    services = [d for d in objects if d["kind"] == "Service"]
    (cm,) = [d for d in objects if d["kind"] == "ConfigMap"]
    gateway_tls = "tls_certificate" in (yaml.safe_load(cm["data"]["ember.yaml"]).get("gateway") or {})
    workloads = [d for d in objects if d["kind"] in ("StatefulSet", "Deployment")]
    for w in workloads:
        pod = w["spec"]["template"]
        (c,) = pod["spec"]["containers"]
        where = f"{w['kind']}/{w['metadata']['name']}"
        listens = check_args(ember, where, c["args"])
        declared = {p["containerPort"] for p in c["ports"]}
        if set(listens.values()) - declared:
            raise Failure(f"{where}: listens on {sorted(listens.values())}, declares {sorted(declared)}")
        check_probes(c, listens.get("--http"), tls=c["args"][0] == "gateway" and gateway_tls)
        if w["kind"] == "StatefulSet" and not any(s["metadata"]["name"] == w["spec"]["serviceName"] for s in services):
            raise Failure(f"{where}: its serviceName {w['spec']['serviceName']} is no Service here")
        mine = [s for s in services
                if all(pod["metadata"]["labels"].get(k) == v for k, v in s["spec"]["selector"].items())]
        if not mine:
            raise Failure(f"{where}: no Service selects its pods")
        for s in mine:
            for p in s["spec"]["ports"]:
                port_of(c, p.get("targetPort", p["port"]))
        annotations = pod["metadata"].get("annotations", {})
        if "prometheus.io/port" in annotations and int(annotations["prometheus.io/port"]) != listens.get("--metrics"):
            raise Failure(f"{where}: Prometheus scrapes {annotations['prometheus.io/port']}, --metrics is elsewhere")
        if c["args"][0] == "node":
            if "nvidia.com/gpu" not in c["resources"]["limits"]:
                raise Failure(f"{where}: no nvidia.com/gpu limit")
            shm = [m for m in c["volumeMounts"] if m["mountPath"] == "/dev/shm"]
            vols = {v["name"]: v for v in pod["spec"]["volumes"]}
            if not shm or vols[shm[0]["name"]].get("emptyDir", {}).get("medium") != "Memory":
                raise Failure(f"{where}: /dev/shm is not a memory volume")
            if "IPC_LOCK" not in c["securityContext"]["capabilities"]["add"]:
                raise Failure(f"{where}: may not lock memory (IPC_LOCK) for pinned models")
        print(f"ok: {where}: `ember {' '.join(a for a in c['args'] if a.startswith('--') or a == c['args'][0])}`; "
              f"ports {sorted(declared)}; probes and Services point at them")
    (runtime,) = [d for d in objects if d["kind"] == "ClusterServingRuntime"]
    (rc,) = runtime["spec"]["containers"]
    listens = check_args(ember, "ClusterServingRuntime", rc["args"])
    if listens.get("--http") != 8080 or listens.get("--grpc") != 8081:
        raise Failure(f"the serving runtime listens on {listens}, KServe expects HTTP 8080 and gRPC 8081")
    check_probes(dict(rc, startupProbe=rc["readinessProbe"], livenessProbe=rc["readinessProbe"]), 8080)
    print("ok: ClusterServingRuntime: `ember serve` on KServe's ports 8080/8081, a v2 health probe")
    return objects


def check_config(ember, objects, work):
    (cm,) = [d for d in objects if d["kind"] == "ConfigMap"]
    # Every file the config's security section names is in a Secret every Ember pod mounts there.
    security = yaml.safe_load(cm["data"]["ember.yaml"]).get("security", {})
    for d in objects:
        if d["kind"] not in ("Deployment", "StatefulSet"):
            continue
        pod = d["spec"]["template"]["spec"]
        secrets = {v["name"]: v["secret"]["secretName"] for v in pod.get("volumes", []) if "secret" in v}
        mounts = {m["mountPath"]: m["name"] for c in pod["containers"] for m in c.get("volumeMounts", [])}
        for key, path in security.items():
            if not str(path).startswith("/"):
                continue
            where = os.path.dirname(path)
            if mounts.get(where) not in secrets:
                raise Failure(f"{d['kind']}/{d['metadata']['name']}: security.{key} ({path}) is not in a mounted Secret")
    print(f"ok: every Ember pod mounts the Secret holding security.{', security.'.join(k for k in security if str(security[k]).startswith('/'))}")
    path = os.path.join(work, "ember.yaml")
    with open(path, "w") as f:
        f.write(cm["data"]["ember.yaml"])
    r = subprocess.run([ember, "gateway", "--config", path, "--manager", "127.0.0.1:9", "--http", "127.0.0.1:0"],
                       capture_output=True, text=True, timeout=60)
    said = r.stdout + r.stderr
    # Parsed and validated, it fails only at the first credential file, which the pods mount from Secrets.
    if r.returncode == 0 or not re.search(r"\(/etc/ember/(cluster|secrets|tls)/[\w.]+\): cannot read", said):
        raise Failure(f"the ConfigMap's ember.yaml: rc {r.returncode}: {said[-400:]}")
    print("ok: the ConfigMap's ember.yaml is accepted (a gateway gets as far as its first credential file: "
          f"{said.strip().splitlines()[-1][:120]})")


def check_render():
    if not shutil.which("kubectl"):
        print("note: kubectl is not installed: `kubectl kustomize` not run")
        return
    r = subprocess.run(["kubectl", "kustomize", K8S], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise Failure(f"kubectl kustomize: {r.stderr[-400:]}")
    rendered = [d for d in yaml.safe_load_all(r.stdout) if d]
    if any(d["metadata"].get("labels", {}).get("app.kubernetes.io/part-of") != "ember" for d in rendered):
        raise Failure("kubectl kustomize: an object without the part-of label")
    print(f"ok: kubectl kustomize renders {len(rendered)} objects")


def check_dockerfile(ember):
    with open(os.path.join(ROOT, "Dockerfile")) as f:
        text = f.read()
    if not text.startswith("#") or "FROM debian:12" not in text:
        raise Failure("the Dockerfile is not on Debian 12")
    install = re.search(r"apt-get install -y --no-install-recommends(.*?)&&", text, re.S).group(1)
    packages = [p for p in install.replace("\\", " ").split() if p]
    if shutil.which("apt-cache"):
        missing = [p for p in packages if subprocess.run(["apt-cache", "show", p], capture_output=True).returncode]
        if missing:
            raise Failure(f"the Dockerfile installs packages Debian does not have: {missing}")
    cmd = re.search(r'^CMD \[(.*)\]$', text, re.M).group(1)
    check_args(ember, "Dockerfile CMD", [a.strip().strip('"') for a in cmd.split(",")])
    print(f"ok: Dockerfile: {len(packages)} Debian packages exist; its CMD is `ember serve` with options it takes")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--ember", required=True)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="ember-k8s-")
    try:
        objects = check_manifests(args.ember)
        check_config(args.ember, objects, work)
        check_render()
        check_dockerfile(args.ember)
    except Failure as e:
        print(f"FAIL: {e}")
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
