"""An independent client: Python's grpcio (Debian's python3-grpcio) calls the
scheduler's and a worker's grpc.health.v1 service and corescape.v1 RPCs over
mutual TLS (grpc.ssl_channel_credentials with the cluster's certificates),
proving the API is usable from outside C++."""

import os
import unittest

import grpc

import cluster_harness as harness
from corescape.v1 import common_pb2, operator_pb2
from grpc_health_v1 import health_pb2


def health_status(channel_of, address, service):
    with channel_of(address) as channel:
        check = channel.unary_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString)
        return check(health_pb2.HealthCheckRequest(service=service), timeout=5).status


class PythonClientTest(unittest.TestCase):

    def setUp(self):
        self.cluster = harness.Cluster(os.path.join(harness.TMP, "python-client"))

    def tearDown(self):
        self.cluster.stop_all()

    def test_health_and_cluster_status_from_python(self):
        c = self.cluster
        address = c.start_scheduler()
        worker = c.start_node("py-worker", harness.WORKER)
        c.wait_for_states({"py-worker": "ALIVE"}, timeout=20)

        serving = health_pb2.HealthCheckResponse.SERVING
        self.assertEqual(health_status(c.channel, address, ""), serving)
        self.assertEqual(health_status(c.channel, address, "corescape.v1.NodeService"), serving)
        self.assertEqual(health_status(c.channel, worker.address(), ""), serving)
        with self.assertRaises(grpc.RpcError) as raised:
            health_status(c.channel, address, "no.such.Service")
        self.assertEqual(raised.exception.code(), grpc.StatusCode.NOT_FOUND)

        with c.channel(identity="submitter") as channel:
            get_status = channel.unary_unary(
                "/corescape.v1.OperatorService/GetClusterStatus",
                request_serializer=operator_pb2.GetClusterStatusRequest.SerializeToString,
                response_deserializer=operator_pb2.GetClusterStatusResponse.FromString)
            status = get_status(operator_pb2.GetClusterStatusRequest(), timeout=5)
            self.assertEqual(status.workers_alive, 1)
            self.assertEqual(status.attention_servers_alive, 0)
            self.assertEqual(status.lease_ttl_ms, 2000)
            self.assertTrue(status.scheduler_id.startswith("sched-"))
            kinds = [e.kind for e in status.recent_events]
            self.assertIn(common_pb2.ClusterEvent.NODE_REGISTERED, kinds)

            list_nodes = channel.unary_unary(
                "/corescape.v1.OperatorService/ListNodes",
                request_serializer=operator_pb2.ListNodesRequest.SerializeToString,
                response_deserializer=operator_pb2.ListNodesResponse.FromString)
            only_servers = list_nodes(
                operator_pb2.ListNodesRequest(role=common_pb2.ATTENTION_SERVER), timeout=5)
            self.assertEqual(len(only_servers.nodes), 0)
            workers = list_nodes(operator_pb2.ListNodesRequest(role=common_pb2.WORKER),
                                 timeout=5)
            self.assertEqual([n.name for n in workers.nodes], ["py-worker"])
            self.assertEqual(workers.nodes[0].pid, worker.process.pid)


if __name__ == "__main__":
    unittest.main(verbosity=2)
