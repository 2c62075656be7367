"""Scheduler, two workers and an attention server as real processes on
loopback: registration, lease expiry after kill -9, scheduler restart,
malformed requests, drain, clean shutdown, and the CLI against all of it."""

import os
import signal
import subprocess
import time
import unittest

import grpc

import cluster_harness as harness
from corescape.v1 import common_pb2, node_pb2, operator_pb2

LEASE_TTL_SECONDS = 2.0
# Reaper period (ttl/20) plus scheduling noise on a loaded 2-core machine.
DEAD_MARGIN_SECONDS = 1.5


def unary(channel, method, request_type, response_type):
    return channel.unary_unary(method,
                               request_serializer=request_type.SerializeToString,
                               response_deserializer=response_type.FromString)


def valid_register_request(name="probe"):
    return harness.register_request(name)


class ClusterIntegrationTest(harness.ClusterTestCase):

    def setUp(self):
        self.cluster = harness.Cluster(os.path.join(harness.TMP, self.id().split(".")[-1]),
                                       lease_ttl=f"{int(LEASE_TTL_SECONDS * 1000)}ms")

    def start_three_nodes(self):
        c = self.cluster
        c.start_scheduler()
        c.start_node("worker-0", harness.WORKER)
        c.start_node("worker-1", harness.WORKER)
        c.start_node("attn-0", harness.ATTENTION_SERVER)
        return c.wait_for_states({"worker-0": "ALIVE", "worker-1": "ALIVE",
                                  "attn-0": "ALIVE"}, timeout=20)

    def test_nodes_register_die_and_survive_scheduler_restart(self):
        c = self.cluster
        nodes = self.start_three_nodes()

        # --json carries what operators and scripts rely on.
        self.assertEqual(len(nodes), 3)
        self.assertEqual(nodes["worker-0"]["role"], "WORKER")
        self.assertEqual(nodes["attn-0"]["role"], "ATTENTION_SERVER")
        for name, node in nodes.items():
            self.assertEqual(node["incarnation"], 1, name)
            self.assertEqual(node["host"], "127.0.0.1", name)
            self.assertEqual(node["pid"], c.nodes[name].process.pid, name)
            self.assertTrue(node["last_heartbeat"], name)
            self.assertTrue(node["grpc_address"].startswith("127.0.0.1:"), name)
        node_ids = {name: node["node_id"] for name, node in nodes.items()}
        self.assertEqual(len(set(node_ids.values())), 3)

        # Heartbeats keep the lease: well past one TTL everyone is alive.
        time.sleep(LEASE_TTL_SECONDS * 1.5)
        c.wait_for_states({"worker-0": "ALIVE", "worker-1": "ALIVE", "attn-0": "ALIVE"},
                          timeout=1)

        # kill -9 a worker: DEAD within the TTL plus a small margin.
        killed_at = time.monotonic()
        c.nodes["worker-1"].kill(signal.SIGKILL)
        c.wait_for_states({"worker-1": "DEAD"},
                          timeout=LEASE_TTL_SECONDS + DEAD_MARGIN_SECONDS)
        detected_after = time.monotonic() - killed_at
        self.assertGreaterEqual(detected_after, LEASE_TTL_SECONDS * 0.5)
        nodes = c.nodes_json()
        self.assertEqual(nodes["worker-0"]["state"], "ALIVE")
        self.assertEqual(nodes["attn-0"]["state"], "ALIVE")
        status = c.cli("status", "--json", "--scheduler", c.scheduler_address)
        self.assertIn("NODE_DEAD", status.stdout)

        # Restart the scheduler on the same address and state directory:
        # the survivors come back under their old names and identities.
        address = c.scheduler_address
        c.scheduler.kill(signal.SIGTERM)
        self.assertEqual(c.scheduler.wait(timeout=10), 0, c.scheduler.log())
        c.start_scheduler(listen=address)
        self.assertEqual(c.scheduler_address, address)
        nodes = c.wait_for_states({"worker-0": "ALIVE", "attn-0": "ALIVE",
                                   "worker-1": "DEAD"}, timeout=15)
        for name in ("worker-0", "attn-0"):
            self.assertEqual(nodes[name]["node_id"], node_ids[name], name)
            self.assertEqual(nodes[name]["pid"], c.nodes[name].process.pid, name)
        # Restored records look ALIVE at once (a grace lease); the sessions
        # themselves resume a moment later.
        harness.wait_for(lambda: c.scheduler.log().count("NODE_RESUMED") == 2, 10,
                         "both survivors to resume their sessions")
        # Still alive well after the grace lease: sessions really resumed.
        time.sleep(LEASE_TTL_SECONDS * 1.5)
        c.wait_for_states({"worker-0": "ALIVE", "attn-0": "ALIVE"}, timeout=1)

        # The dead worker restarts under its name: same id, new incarnation.
        c.start_node("worker-1", harness.WORKER)
        nodes = c.wait_for_states({"worker-1": "ALIVE"}, timeout=15)
        self.assertEqual(nodes["worker-1"]["node_id"], node_ids["worker-1"])
        self.assertEqual(nodes["worker-1"]["incarnation"], 2)

        # Drain through the CLI; an unknown name is a clear error.
        drained = c.cli("drain", "worker-0", "--scheduler", c.scheduler_address)
        self.assertIn("DRAINING", drained.stdout)
        self.assertEqual(c.nodes_json()["worker-0"]["state"], "DRAINING")
        unknown = c.cli("drain", "no-such-node", "--scheduler", c.scheduler_address,
                        check=False)
        self.assertEqual(unknown.returncode, 4, unknown.stderr)
        self.assertIn("no-such-node", unknown.stderr)
        self.assertEqual(len(unknown.stderr.strip().splitlines()), 1, unknown.stderr)

        # SIGTERM: a clean exit that deregisters at once.
        c.nodes["attn-0"].kill(signal.SIGTERM)
        self.assertEqual(c.nodes["attn-0"].wait(timeout=10), 0)
        c.wait_for_states({"attn-0": "DEREGISTERED"}, timeout=2)

    def test_malformed_requests_are_rejected_and_scheduler_keeps_serving(self):
        c = self.cluster
        c.start_scheduler()
        # A node certificate for "probe": past authentication, every bad
        # field is still named.
        harness.make_certificates(c.tls_dir, "probe", "ghost")
        channel = c.channel(identity="node-probe")
        register = unary(channel, "/corescape.v1.NodeService/Register",
                         node_pb2.RegisterRequest, node_pb2.RegisterResponse)

        cases = []
        bad = valid_register_request(); bad.name = ""; cases.append((bad, "name"))
        bad = valid_register_request(); bad.name = "x" * 500; cases.append((bad, "name"))
        bad = valid_register_request(); bad.name = "rm -rf /"; cases.append((bad, "name"))
        bad = valid_register_request(); bad.role = 77; cases.append((bad, "role"))
        bad = valid_register_request(); bad.grpc_address = "nonsense"; cases.append((bad, "grpc_address"))
        bad = valid_register_request(); bad.data_address = "1.2.3.4:70000"; cases.append((bad, "data_address"))
        bad = valid_register_request(); bad.resources.cpu_cores = -3; cases.append((bad, "resources.cpu_cores"))
        bad = valid_register_request(); bad.resources.memory_bytes = 2**62; cases.append((bad, "resources.memory_bytes"))
        bad = valid_register_request(); bad.resources.gpus = 1000000; cases.append((bad, "resources.gpus"))
        bad = valid_register_request(); bad.pid = 0; cases.append((bad, "pid"))
        for request, field in cases:
            with self.assertRaises(grpc.RpcError) as raised:
                register(request, timeout=5)
            self.assertEqual(raised.exception.code(), grpc.StatusCode.INVALID_ARGUMENT, field)
            self.assertTrue(raised.exception.details().startswith(field + ":"),
                            (field, raised.exception.details()))

        # Bytes that are not a protobuf at all.
        raw = channel.unary_unary("/corescape.v1.NodeService/Register")
        with self.assertRaises(grpc.RpcError) as raised:
            raw(b"\xff\xff\xff\xff\x0f garbage", timeout=5)
        self.assertNotEqual(raised.exception.code(), grpc.StatusCode.OK)

        # A session that does not start with SessionOpen is refused.
        session = channel.stream_stream(
            "/corescape.v1.NodeService/Session",
            request_serializer=node_pb2.NodeMessage.SerializeToString,
            response_deserializer=node_pb2.SchedulerCommand.FromString)
        heartbeat = node_pb2.NodeMessage()
        heartbeat.heartbeat.unix_ms = 1
        with self.assertRaises(grpc.RpcError) as raised:
            list(session(iter([heartbeat]), timeout=5))
        self.assertEqual(raised.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        # And one for a name that never registered is NOT_FOUND.
        ghost = node_pb2.NodeMessage()
        ghost.open.name = "ghost"
        ghost.open.incarnation = 1
        with c.channel(identity="node-ghost") as ghost_channel:
            ghost_session = ghost_channel.stream_stream(
                "/corescape.v1.NodeService/Session",
                request_serializer=node_pb2.NodeMessage.SerializeToString,
                response_deserializer=node_pb2.SchedulerCommand.FromString)
            with self.assertRaises(grpc.RpcError) as raised:
                list(ghost_session(iter([ghost]), timeout=5))
            self.assertEqual(raised.exception.code(), grpc.StatusCode.NOT_FOUND)

        # The scheduler is still up and nothing bad got registered.
        self.assertIsNone(c.scheduler.process.poll())
        list_nodes = unary(channel, "/corescape.v1.OperatorService/ListNodes",
                           operator_pb2.ListNodesRequest, operator_pb2.ListNodesResponse)
        self.assertEqual(len(list_nodes(operator_pb2.ListNodesRequest(), timeout=5).nodes), 0)
        good = register(valid_register_request("probe"), timeout=5)
        self.assertEqual(good.incarnation, 1)
        self.assertEqual([n.name for n in list_nodes(operator_pb2.ListNodesRequest(),
                                                     timeout=5).nodes], ["probe"])
        channel.close()

    def test_daemons_reject_bad_flags_with_clear_message(self):
        for argv, flag in [
            ([harness.SCHEDULER, "--listen=nonsense"], "--listen"),
            ([harness.SCHEDULER, "--lease_ttl=1ms"], "--lease_ttl"),
            ([harness.WORKER, "--scheduler=127.0.0.1:1", "--name=bad name"], "--name"),
            ([harness.WORKER], "--scheduler"),
            ([harness.ATTENTION_SERVER, "--scheduler=host"], "--scheduler"),
        ]:
            result = subprocess.run(argv, capture_output=True, text=True, timeout=10,
                                    env={k: v for k, v in os.environ.items()
                                         if k != "CORESCAPE_SCHEDULER"})
            self.assertEqual(result.returncode, 2, (argv, result.stderr))
            self.assertIn(flag, result.stderr)

    def test_second_scheduler_on_same_state_dir_is_refused(self):
        c = self.cluster
        c.start_scheduler()
        second = subprocess.run(
            [harness.SCHEDULER, "--listen=127.0.0.1:0", f"--state_dir={c.state_dir}",
             *c.security_flags()],
            capture_output=True, text=True, timeout=10)
        self.assertEqual(second.returncode, 1)
        self.assertIn("in use by another scheduler", second.stderr)

    def test_cli_reports_unreachable_scheduler_quickly(self):
        started = time.monotonic()
        result = self.cluster.cli("nodes", "--scheduler", "127.0.0.1:1", "--rpc-timeout", "2",
                                  check=False)
        self.assertLess(time.monotonic() - started, 10)
        self.assertEqual(result.returncode, 3, result.stderr)
        self.assertEqual(len(result.stderr.strip().splitlines()), 1, result.stderr)
        self.assertIn("unreachable", result.stderr)


if __name__ == "__main__":
    unittest.main(verbosity=2)
