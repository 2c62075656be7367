"""deploy/k8s renders with kubectl's kustomize (both overlays and the
submit example), every rendered object validates against the Kubernetes API
schemas offline (kubernetes-models, through node), and the invariants the
deployment rests on hold: stable names, probes on the port each daemon
serves gRPC health on, the scheduler's state volume where --state_dir
points, every flag known to its binary, the image tag and user those of the
image scripts/build_image.sh builds."""

import json
import os
import re
import shutil
import subprocess
import unittest

import yaml

import cluster_harness as harness

REPO = harness.RUNFILES
# kustomize does not follow the runfiles' symlinks: render from a copy.
K8S = os.path.join(harness.TMP, "k8s")
BINARY_OF = {
    "corescape-scheduler": harness.SCHEDULER,
    "corescape-worker": harness.WORKER,
    "corescape-attention-server": harness.ATTENTION_SERVER,
}
NODE_DAEMONS = ("corescape-worker", "corescape-attention-server")


def source_root():
    """The checkout this test's files come from (runfiles link into it):
    scripts/setup.sh installs the schema packages under its .cache/node."""
    real = os.path.realpath(os.path.join(REPO, "deploy", "k8s", "base", "kustomization.yaml"))
    return real[:-len("/deploy/k8s/base/kustomization.yaml")]


def kubectls():
    """The kubectl on PATH and, where scripts/setup.sh fetched it beside a
    newer one, Debian's 1.20 (kustomize 2.0.3): the manifests keep to what
    both render alike."""
    found = {"PathKubectl": "kubectl"}
    legacy = os.path.join(source_root(), ".cache", "kubernetes-client", "usr", "bin", "kubectl")
    if os.path.exists(legacy):
        found["Kubectl120"] = legacy
    return found


def render(kubectl, directory):
    result = subprocess.run([kubectl, "kustomize", directory], capture_output=True,
                            text=True, timeout=60)
    if result.returncode != 0:
        raise AssertionError(f"kubectl kustomize {directory}:\n{result.stderr}")
    return [o for o in yaml.safe_load_all(result.stdout) if o]


def validate(objects):
    node_path = os.path.join(source_root(), ".cache", "node", "node_modules")
    if not os.path.isdir(os.path.join(node_path, "kubernetes-models")):
        raise AssertionError(f"{node_path}/kubernetes-models missing: run scripts/setup.sh")
    result = subprocess.run(["node", os.path.join(REPO, "tests", "k8s_schema_validate.js")],
                            input=json.dumps(objects), capture_output=True, text=True,
                            timeout=60, env={**os.environ, "NODE_PATH": node_path})
    if result.returncode != 0:
        raise AssertionError(f"k8s_schema_validate.js:\n{result.stderr}")
    return json.loads(result.stdout)


def flags_known_to(binary):
    """Every flag name `binary --helpfull` lists."""
    result = subprocess.run([binary, "--helpfull"], capture_output=True, text=True, timeout=30)
    return set(re.findall(r"^\s+--([a-z_0-9]+) ", result.stdout + result.stderr, re.M))


def flag_names(args):
    return {a[2:].split("=")[0] for a in args if a.startswith("--")}


def flag_value(args, name):
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    return values[-1] if values else None


def find(objects, kind, name):
    for o in objects:
        if o["kind"] == kind and o["metadata"]["name"] == name:
            return o
    raise AssertionError(f"no {kind} {name} among {[(o['kind'], o['metadata']['name']) for o in objects]}")


def config_map(objects, generated_name):
    """The generated ConfigMap (kustomize appends a content hash)."""
    matches = [o for o in objects if o["kind"] == "ConfigMap"
               and re.fullmatch(re.escape(generated_name) + r"(-[a-z0-9]+)?", o["metadata"]["name"])]
    assert len(matches) == 1, matches
    return matches[0]


def read(*path):
    with open(os.path.join(REPO, *path)) as f:
        return f.read()


class K8sManifestsChecks:
    KUBECTL = None  # set per subclass below

    @classmethod
    def setUpClass(cls):
        if not os.path.isdir(K8S):
            shutil.copytree(os.path.join(REPO, "deploy", "k8s"), K8S)
        cls.rendered = {overlay: render(cls.KUBECTL, os.path.join(K8S, "overlays", overlay))
                        for overlay in ("cpu", "gpu")}
        cls.submit = render(cls.KUBECTL, os.path.join(K8S, "submit"))
        cls.known_flags = {name: flags_known_to(path) for name, path in BINARY_OF.items()}
        cls.version = read("VERSION").strip()
        passwd = [line.split(":") for line in read("deploy", "image", "passwd").splitlines()]
        cls.image_uid = int(next(f[2] for f in passwd if f[0] == "corescape"))

    def statefulsets(self, objects):
        return {o["metadata"]["name"]: o for o in objects if o["kind"] == "StatefulSet"}

    def container(self, statefulset):
        containers = statefulset["spec"]["template"]["spec"]["containers"]
        self.assertEqual(len(containers), 1)
        return containers[0]

    def flag_file(self, objects, statefulset, args):
        """The --flagfile's lines, read from the ConfigMap volume it lives on."""
        path = flag_value(args, "flagfile")
        self.assertIsNotNone(path, "no --flagfile")
        pod = statefulset["spec"]["template"]["spec"]
        directory, key = os.path.split(path)
        mount = next(m for m in self.container(statefulset)["volumeMounts"]
                     if m["mountPath"] == directory)
        volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
        flags = find(objects, "ConfigMap", volume["configMap"]["name"])
        return [line.strip() for line in flags["data"][key].splitlines()
                if line.strip() and not line.startswith("#")]

    def test_every_object_validates_against_the_api_schemas(self):
        for name, objects in [*self.rendered.items(), ("submit", self.submit)]:
            for result in validate(objects):
                self.assertIsNone(result["error"], f"{name}: {result}")
        # The validator is not a rubber stamp: a malformed copy fails.
        broken = json.loads(json.dumps(self.statefulsets(self.rendered["cpu"])["corescape-worker"]))
        self.container(broken)["ports"][0]["containerPort"] = "grpc"
        self.assertIn("containerPort", validate([broken])[0]["error"] or "")

    def test_stable_names_from_statefulsets_and_headless_services(self):
        for overlay, objects in self.rendered.items():
            statefulsets = self.statefulsets(objects)
            self.assertEqual(set(statefulsets), {"corescape-scheduler", *NODE_DAEMONS}, overlay)
            self.assertEqual(statefulsets["corescape-scheduler"]["spec"]["replicas"], 1)
            for name, sts in statefulsets.items():
                service = find(objects, "Service", sts["spec"]["serviceName"])
                self.assertEqual(service["spec"]["clusterIP"], "None", name)
                labels = sts["spec"]["template"]["metadata"]["labels"]
                for key, value in service["spec"]["selector"].items():
                    self.assertEqual(labels.get(key), value, name)
            for name in NODE_DAEMONS:
                container = self.container(statefulsets[name])
                self.assertEqual(flag_value(container["args"], "name"), "$(POD_NAME)", name)
                env = {e["name"]: e for e in container["env"]}
                self.assertEqual(env["POD_NAME"]["valueFrom"]["fieldRef"]["fieldPath"],
                                 "metadata.name", name)

    def test_probes_and_ports_are_the_grpc_health_port(self):
        for overlay, objects in self.rendered.items():
            for name, sts in self.statefulsets(objects).items():
                container = self.container(sts)
                listen = flag_value(self.flag_file(objects, sts, container["args"])
                                    + container["args"], "listen")
                port = int(listen.rsplit(":", 1)[1])
                self.assertNotEqual(port, 0, f"{name}: a fixed --listen port")
                declared = {p["name"]: p["containerPort"] for p in container["ports"]}
                self.assertEqual(declared["grpc"], port, name)
                # kubelet's gRPC probe is plaintext and the main port mutual
                # TLS only: the probes ask grpc.health.v1 on --health_listen.
                health = int(flag_value(self.flag_file(objects, sts, container["args"])
                                        + container["args"], "health_listen").rsplit(":", 1)[1])
                self.assertNotEqual(health, port, name)
                self.assertEqual(declared["health"], health, name)
                for probe in ("readinessProbe", "livenessProbe"):
                    self.assertEqual(container[probe]["grpc"]["port"], health,
                                     f"{name} {probe}")
                service = find(objects, "Service", sts["spec"]["serviceName"])
                self.assertEqual(service["spec"]["ports"][0]["port"], port, name)
                if name in NODE_DAEMONS:
                    # The data plane's port is fixed and declared.
                    data_port = int(flag_value(self.flag_file(objects, sts, container["args"])
                                               + container["args"], "data_port"))
                    self.assertNotEqual(data_port, 0, f"{name}: a fixed --data_port")
                    self.assertEqual(declared["data"], data_port, name)

    def test_scheduler_state_volume_is_the_state_dir(self):
        for overlay, objects in self.rendered.items():
            sts = self.statefulsets(objects)["corescape-scheduler"]
            container = self.container(sts)
            state_dir = flag_value(container["args"], "state_dir")
            claims = {c["metadata"]["name"] for c in sts["spec"]["volumeClaimTemplates"]}
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            self.assertIn(state_dir, mounts, overlay)
            self.assertIn(mounts[state_dir], claims, overlay)

    def test_every_flag_exists_in_its_binary(self):
        for overlay, objects in self.rendered.items():
            for sts in self.statefulsets(objects).values():
                container = self.container(sts)
                binary = os.path.basename(container["command"][0])
                args = self.flag_file(objects, sts, container["args"]) + container["args"]
                unknown = flag_names(args) - self.known_flags[binary]
                self.assertFalse(unknown, f"{overlay}: {binary} has no {unknown}")
        job = find(self.submit, "Job", "corescape-submit-tiny-fortunes")
        container = job["spec"]["template"]["spec"]["containers"][0]
        self.assertEqual(container["args"][0], "submit")
        help_text = subprocess.run([harness.CLI, "submit", "--help"], capture_output=True,
                                   text=True, timeout=30).stdout
        for flag in flag_names(container["args"]):
            self.assertRegex(help_text, rf"--{re.escape(flag)}\b", f"corescape submit --{flag}")

    def test_nodes_and_the_submit_job_reach_the_scheduler(self):
        for overlay, objects in self.rendered.items():
            sts = self.statefulsets(objects)["corescape-scheduler"]
            port = self.container(sts)["ports"][0]["containerPort"]
            expected = (f"{sts['metadata']['name']}-0.{sts['spec']['serviceName']}:{port}")
            env = config_map(objects, "corescape-env")["data"]
            self.assertEqual(env["CORESCAPE_SCHEDULER"], expected, overlay)
            for name in NODE_DAEMONS:
                container = self.container(self.statefulsets(objects)[name])
                self.assertEqual([e["configMapRef"]["name"] for e in container["envFrom"]],
                                 [config_map(objects, "corescape-env")["metadata"]["name"]])
            job = find(self.submit, "Job", "corescape-submit-tiny-fortunes")
            args = job["spec"]["template"]["spec"]["containers"][0]["args"]
            self.assertEqual(flag_value(args, "scheduler"), expected)
            self.assertEqual(job["metadata"]["namespace"], sts["metadata"]["namespace"])

    def test_image_tag_user_and_certificates(self):
        for name, objects in [*self.rendered.items(), ("submit", self.submit)]:
            for o in objects:
                if o["kind"] not in ("StatefulSet", "Job"):
                    continue
                pod = o["spec"]["template"]["spec"]
                self.assertEqual(pod["securityContext"]["runAsUser"], self.image_uid)
                # The gpu overlay runs the CUDA build (build_image.sh --config cuda).
                image = "corescape-cuda" if name == "gpu" else "corescape"
                for container in pod["containers"]:
                    self.assertEqual(container["image"], f"{image}:{self.version}",
                                     f"{name} {o['metadata']['name']}")
                # Mutual TLS: the certificates Secret is required (no silent
                # fallback to plaintext), mounted where --tls_dir points.
                secrets = [v for v in pod.get("volumes", []) if "secret" in v]
                self.assertEqual([v["secret"]["secretName"] for v in secrets],
                                 ["corescape-tls"], o["metadata"]["name"])
                self.assertFalse(secrets[0]["secret"].get("optional", False))
                mounts = {m["name"]: m["mountPath"] for m in pod["containers"][0]["volumeMounts"]}
                self.assertEqual(mounts[secrets[0]["name"]], "/etc/corescape/tls")
                container = pod["containers"][0]
                flags = list(container["args"])
                if o["kind"] == "StatefulSet":
                    flags += self.flag_file(objects, o, container["args"])
                    self.assertEqual(flag_value(flags, "tls_dir"), "/etc/corescape/tls")
                else:
                    self.assertIn("--tls-dir=/etc/corescape/tls", flags)
                self.assertNotIn("--insecure", flags)

    def test_gpu_overlay_one_gpu_per_worker(self):
        cpu = self.container(self.statefulsets(self.rendered["cpu"])["corescape-worker"])
        gpu = self.container(self.statefulsets(self.rendered["gpu"])["corescape-worker"])
        self.assertEqual(gpu["resources"]["limits"]["nvidia.com/gpu"], 1)
        self.assertNotIn("nvidia.com/gpu", json.dumps(cpu))
        # The pod's one GPU is its device; the base's arguments stay.
        self.assertEqual(gpu["args"], cpu["args"] + ["--device=cuda:0"])
        self.assertFalse(any(a.startswith("--device") for a in cpu["args"]))
        for overlay, objects in self.rendered.items():
            for sts in self.statefulsets(objects).values():
                self.assertIn("requests", self.container(sts)["resources"])
        attention = self.container(self.statefulsets(self.rendered["gpu"])["corescape-attention-server"])
        self.assertNotIn("nvidia.com/gpu", json.dumps(attention))


for _name, _kubectl in kubectls().items():
    globals()[f"K8sManifestsTest{_name}"] = type(
        f"K8sManifestsTest{_name}", (K8sManifestsChecks, unittest.TestCase), {"KUBECTL": _kubectl})


if __name__ == "__main__":
    unittest.main(verbosity=2)
