"""The runner's gRPC servers listen on their port alone
(worker/grpc_servers.py): a port another socket holds with SO_REUSEPORT
(as every gRPC server does by default) is refused, where gRPC's default
would share it and let the kernel hand connections to either."""

import socket

import grpc
import pytest

from beam_spark_runner.worker import grpc_servers


@pytest.fixture
def shared_port():
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    yield holder.getsockname()[1]
    holder.close()


def _bound(server, port):
    try:
        return server.add_insecure_port("127.0.0.1:%d" % port) == port
    except RuntimeError:  # newer gRPC raises where older ones return 0
        return False
    finally:
        server.stop(None)


def test_grpcs_default_would_share_a_port_another_socket_listens_on(shared_port):
    assert _bound(grpc.server(None), shared_port)


def test_the_runners_server_refuses_a_port_another_socket_listens_on(shared_port):
    assert not _bound(grpc_servers.new_server(), shared_port)


def test_the_job_service_and_the_java_harness_start_their_servers_here():
    import inspect

    from beam_spark_runner.job_service import servicer
    from beam_spark_runner.worker import java_harness

    for module in (servicer, java_harness):
        source = inspect.getsource(module)
        assert "grpc_servers.new_server()" in source and "grpc.server(" not in source, module.__name__
