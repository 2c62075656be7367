"""Mutual TLS and roles on the control plane, on real processes with real
certificates from `corescape certs init`: no certificate, no service; a node
certificate acts only for its own name; submitters submit and cancel their
own jobs, operators drain, rebalance and cancel anything; one live session
per (name, incarnation); daemons refuse to start without --tls_dir or
--insecure; reflection is off unless asked for."""

import importlib
import os
import subprocess
import unittest

import grpc

import cluster_harness as harness
from corescape.v1 import common_pb2, job_pb2, node_pb2, operator_pb2
from jobs_e2e_test import spec

SERVICES = [(node_pb2, "NodeService"), (operator_pb2, "OperatorService"),
            (job_pb2, "JobService")]


def message_class(descriptor):
    module = importlib.import_module(
        descriptor.file.name.replace("/", ".").removesuffix(".proto") + "_pb2")
    return getattr(module, descriptor.name)


def call(channel, service, method, request, timeout=5):
    """Any RPC by its descriptor; returns the response(s) or raises RpcError."""
    full = f"/{service.full_name}/{method.name}"
    response = message_class(method.output_type).FromString
    kwargs = {"request_serializer": type(request).SerializeToString,
              "response_deserializer": response}
    if method.client_streaming and method.server_streaming:
        return list(channel.stream_stream(full, **kwargs)(iter([request]), timeout=timeout))
    if method.server_streaming:
        return list(channel.unary_stream(full, **kwargs)(request, timeout=timeout))
    return channel.unary_unary(full, **kwargs)(request, timeout=timeout)


class MutualTlsTest(harness.ClusterTestCase):

    def setUp(self):
        self.cluster = harness.Cluster(os.path.join(harness.TMP, self.id().split(".")[-1]),
                                       lease_ttl="4s")
        self.address = self.cluster.start_scheduler()

    def assertRefused(self, code, text, function, *args, **kwargs):
        with self.assertRaises(grpc.RpcError) as raised:
            function(*args, **kwargs)
        self.assertEqual(raised.exception.code(), code, raised.exception.details())
        self.assertIn(text, raised.exception.details())
        return raised.exception

    def assertEveryRpcUnauthenticated(self, channel):
        """Every method of every corescape service, called over `channel`
        without a client certificate, answers UNAUTHENTICATED."""
        called = []
        for module, name in SERVICES:
            service = module.DESCRIPTOR.services_by_name[name]
            for method in service.methods:
                request = message_class(method.input_type)()
                self.assertRefused(grpc.StatusCode.UNAUTHENTICATED, "no client certificate",
                                   call, channel, service, method, request)
                called.append(method.name)
        self.assertGreaterEqual(len(called), 14, called)

    def test_without_a_certificate_every_rpc_is_unauthenticated(self):
        with open(os.path.join(self.cluster.tls_dir, "ca.crt"), "rb") as f:
            trusts_the_server_only = grpc.ssl_channel_credentials(root_certificates=f.read())
        with grpc.secure_channel(self.address, trusts_the_server_only) as channel:
            self.assertEveryRpcUnauthenticated(channel)
        # Plaintext does not even connect.
        with grpc.insecure_channel(self.address) as channel:
            service = operator_pb2.DESCRIPTOR.services_by_name["OperatorService"]
            self.assertRefused(grpc.StatusCode.UNAVAILABLE, "", call, channel, service,
                               service.methods_by_name["GetClusterStatus"],
                               operator_pb2.GetClusterStatusRequest())
        # Nor does a certificate from another cluster's CA.
        other = os.path.join(self.cluster.workdir, "other-ca")
        harness.make_certificates(other)
        with grpc.secure_channel(self.address, harness.tls_credentials(other, "operator")) as channel:
            service = operator_pb2.DESCRIPTOR.services_by_name["OperatorService"]
            self.assertRefused(grpc.StatusCode.UNAVAILABLE, "", call, channel, service,
                               service.methods_by_name["GetClusterStatus"],
                               operator_pb2.GetClusterStatusRequest())

    def test_the_plaintext_health_port_answers_health_only(self):
        health = f"127.0.0.1:{harness.free_port()}"
        self.cluster.start_scheduler(extra_args=[f"--health_listen={health}"])
        worker_health = f"127.0.0.1:{harness.free_port()}"
        self.cluster.start_node("worker-0", harness.WORKER, [f"--health_listen={worker_health}"])
        for address in (health, worker_health):
            with grpc.insecure_channel(address) as channel:
                check = channel.unary_unary("/grpc.health.v1.Health/Check",
                                            request_serializer=lambda b: b,
                                            response_deserializer=lambda b: b)
                # HealthCheckRequest{} -> HealthCheckResponse{status: SERVING (1)}.
                self.assertEqual(check(b"", timeout=10, wait_for_ready=True), b"\x08\x01", address)
        with grpc.insecure_channel(health) as channel:
            self.assertEveryRpcUnauthenticated(channel)

    def test_a_node_certificate_acts_only_for_its_own_name(self):
        c = self.cluster
        harness.make_certificates(c.tls_dir, "node-x", "node-y")
        service = node_pb2.DESCRIPTOR.services_by_name["NodeService"]
        register = service.methods_by_name["Register"]
        session = service.methods_by_name["Session"]
        with c.channel(identity="node-node-x") as as_x:
            self.assertRefused(grpc.StatusCode.PERMISSION_DENIED,
                               "the certificate is for node 'node-x', not 'node-y'",
                               call, as_x, service, register, harness.register_request("node-y"))
            with c.channel(identity="node-node-y") as as_y:
                incarnation = call(as_y, service, register, harness.register_request("node-y")).incarnation
            hijack = node_pb2.NodeMessage()
            hijack.open.name = "node-y"
            hijack.open.incarnation = incarnation
            self.assertRefused(grpc.StatusCode.PERMISSION_DENIED, "not 'node-y'",
                               call, as_x, service, session, hijack)
            deregister = node_pb2.DeregisterRequest(name="node-y", incarnation=incarnation)
            self.assertRefused(grpc.StatusCode.PERMISSION_DENIED, "not 'node-y'", call, as_x,
                               service, service.methods_by_name["Deregister"], deregister)
            self.assertEqual(call(as_x, service, register, harness.register_request("node-x")).incarnation,
                             1)
        with c.channel(identity="operator") as as_operator:
            self.assertRefused(grpc.StatusCode.PERMISSION_DENIED, "is not a node",
                               call, as_operator, service, register, harness.register_request("node-z"))
        # The hijacker's Deregister did nothing.
        self.assertNotEqual(c.nodes_json()["node-y"]["state"], "DEREGISTERED")

        # A daemon takes the certificate of its own --name, and without one
        # refuses to start, naming the file and the command that makes it.
        result = subprocess.run(
            [harness.WORKER, f"--scheduler={self.address}", "--name=no-cert",
             f"--tls_dir={c.tls_dir}"], capture_output=True, text=True, timeout=20)
        self.assertEqual(result.returncode, 2, result.stderr)
        self.assertIn("node-no-cert.crt", result.stderr)
        self.assertIn("corescape certs init", result.stderr)

    def test_roles_submit_drain_rebalance_and_cancel(self):
        c = self.cluster
        c.start_node("worker-0", harness.WORKER)
        c.wait_for_states({"worker-0": "ALIVE"}, timeout=20)

        refused = c.cli("drain", "worker-0", "--identity", "submitter",
                        "--scheduler", self.address, check=False)
        self.assertEqual(refused.returncode, 1, refused.stderr)
        self.assertIn("PERMISSION_DENIED: draining a node needs the operator role", refused.stderr)
        self.assertEqual(c.nodes_json()["worker-0"]["state"], "ALIVE")

        operators = operator_pb2.DESCRIPTOR.services_by_name["OperatorService"]
        with c.channel(identity="submitter") as as_submitter:
            self.assertRefused(grpc.StatusCode.PERMISSION_DENIED,
                               "rebalancing needs the operator role", call, as_submitter,
                               operators, operators.methods_by_name["Rebalance"],
                               operator_pb2.RebalanceRequest(job_id="job-1"))

        jobs = job_pb2.DESCRIPTOR.services_by_name["JobService"]
        submit, cancel = jobs.methods_by_name["SubmitJob"], jobs.methods_by_name["CancelJob"]
        # Two workers wanted, one alive: the jobs stay PENDING.
        pending = spec("pending", steps=5, workers=2)
        with c.channel(identity="node-worker-0") as as_node:
            self.assertRefused(grpc.StatusCode.PERMISSION_DENIED,
                               "submitting a job needs the submitter or operator role",
                               call, as_node, jobs, submit, job_pb2.SubmitJobRequest(spec=pending))
        # A second submitter, its own identity.
        subprocess.run([harness.CLI, "certs", "init", c.tls_dir, "--submitter", "alice"],
                       check=True, capture_output=True, timeout=60)
        with c.channel(identity="submitter-alice") as as_alice, \
                c.channel(identity="submitter") as as_submitter:
            alices = call(as_alice, jobs, submit, job_pb2.SubmitJobRequest(spec=pending)).job
            self.assertEqual(alices.submitted_by, "alice")
            # Another submitter's job is not theirs to cancel.
            self.assertRefused(grpc.StatusCode.PERMISSION_DENIED,
                               "cancelling a job submitted by 'alice' needs the operator role",
                               call, as_submitter, jobs, cancel,
                               job_pb2.CancelJobRequest(job_id=alices.job_id))
            self.assertEqual(call(as_alice, jobs, cancel,
                                  job_pb2.CancelJobRequest(job_id=alices.job_id)).job.state,
                             job_pb2.CANCELLED)
        with c.channel(identity="submitter") as as_submitter, \
                c.channel(identity="operator") as as_operator:
            own = call(as_submitter, jobs, submit, job_pb2.SubmitJobRequest(spec=pending)).job
            self.assertEqual(own.submitted_by, "submitter")
            theirs = call(as_operator, jobs, submit, job_pb2.SubmitJobRequest(spec=pending)).job
            self.assertEqual(theirs.submitted_by, "operator")
            self.assertRefused(grpc.StatusCode.PERMISSION_DENIED,
                               "cancelling a job submitted by 'operator' needs the operator role",
                               call, as_submitter, jobs, cancel,
                               job_pb2.CancelJobRequest(job_id=theirs.job_id))
            cancelled = call(as_submitter, jobs, cancel,
                             job_pb2.CancelJobRequest(job_id=own.job_id)).job
            self.assertEqual(cancelled.state, job_pb2.CANCELLED)
            cancelled = call(as_operator, jobs, cancel,
                             job_pb2.CancelJobRequest(job_id=theirs.job_id)).job
            self.assertEqual(cancelled.state, job_pb2.CANCELLED)

        # The operator's certificate (the CLI's default) drains.
        drained = c.cli("drain", "worker-0", "--scheduler", self.address)
        self.assertIn("DRAINING", drained.stdout)
        # Reads need any valid certificate, a node's included.
        with c.channel(identity="node-worker-0") as as_node:
            listing = call(as_node, operators, operators.methods_by_name["ListNodes"],
                           operator_pb2.ListNodesRequest())
            self.assertEqual([n.state for n in listing.nodes], [common_pb2.DRAINING])

    def test_a_second_session_is_refused_and_the_first_keeps_its_commands(self):
        c = self.cluster
        worker = c.start_node("worker-0", harness.WORKER)
        incarnation = c.wait_for_states({"worker-0": "ALIVE"}, timeout=20)["worker-0"]["incarnation"]
        service = node_pb2.DESCRIPTOR.services_by_name["NodeService"]
        second = node_pb2.NodeMessage()
        second.open.name = "worker-0"
        second.open.incarnation = int(incarnation)
        # The impostor holds the real node's certificate: only the session rule stops it.
        with c.channel(identity="node-worker-0") as channel:
            self.assertRefused(grpc.StatusCode.ALREADY_EXISTS, "already has a live session",
                               call, channel, service, service.methods_by_name["Session"], second)
        c.cli("drain", "worker-0", "--reason", "after the impostor", "--scheduler", self.address)
        harness.wait_for(lambda: "draining: after the impostor" in worker.log(), 20,
                         "the first session to deliver the drain command")
        nodes = c.nodes_json()
        self.assertEqual(nodes["worker-0"]["state"], "DRAINING")
        self.assertEqual(nodes["worker-0"]["incarnation"], incarnation)

    def test_daemons_need_tls_or_an_explicit_insecure(self):
        env = {k: v for k, v in os.environ.items() if k != "CORESCAPE_SCHEDULER"}
        state = os.path.join(self.cluster.workdir, "other-state")
        for argv, message in [
            ([harness.SCHEDULER, "--listen=127.0.0.1:0", f"--state_dir={state}"],
             "--tls_dir: required"),
            ([harness.WORKER, f"--scheduler={self.address}", "--name=w"], "pass --insecure"),
            ([harness.ATTENTION_SERVER, f"--scheduler={self.address}", "--name=a",
              f"--tls_dir={self.cluster.tls_dir}", "--insecure"], "give one, not both"),
        ]:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=20, env=env)
            self.assertEqual(result.returncode, 2, (argv, result.stderr))
            self.assertIn(message, result.stderr)

        insecure = harness.Cluster(os.path.join(self.cluster.workdir, "plain"), tls=False)
        try:
            address = insecure.start_scheduler()
            self.assertIn("--insecure: gRPC in plaintext", insecure.scheduler.log())
            nodes = insecure.cli("nodes", "--json", "--scheduler", address, "--insecure")
            self.assertEqual(nodes.stdout.strip(), "[]")
        finally:
            insecure.stop_all()

    def test_reflection_is_off_unless_asked_for(self):
        def reflect(address):
            with self.cluster.channel(address) as channel:
                info = channel.stream_stream(
                    "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo",
                    request_serializer=lambda b: b, response_deserializer=lambda b: b)
                # ServerReflectionRequest{list_services: ""} (field 7).
                return list(info(iter([b"\x3a\x00"]), timeout=5))
        self.assertRefused(grpc.StatusCode.UNIMPLEMENTED, "", reflect, self.address)
        self.cluster.start_scheduler(extra_args=["--grpc_reflection"])
        self.assertTrue(reflect(self.cluster.scheduler_address))


if __name__ == "__main__":
    unittest.main(verbosity=2)
