"""The runner's gRPC servers listen on their port alone
(worker/grpc_servers.py): a port another socket holds with SO_REUSEPORT
(as every gRPC server does by default) is refused, where gRPC's default
would share it and let the kernel hand connections to either; and
"localhost" is both loopbacks, each bound explicitly, where some gRPC
releases bind ::1 alone when 127.0.0.1:port is held by another process and
report success (so a Java client, which resolves localhost to 127.0.0.1,
reaches that other process) and others refuse the port."""

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
        assert "grpc_servers.listening_server(" in source and "grpc.server(" not in source, module.__name__


@pytest.fixture
def held_ipv4_port():
    """A port some other socket listens on at 127.0.0.1 (without
    SO_REUSEPORT), free on ::1."""
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    yield holder.getsockname()[1]
    holder.close()


def test_a_port_held_on_one_address_of_the_host_is_an_error_naming_it(held_ipv4_port):
    with pytest.raises(OSError, match=r"localhost:%d: address 127\.0\.0\.1:%d is in use" % ((held_ipv4_port,) * 2)):
        grpc_servers.listening_server("localhost", held_ipv4_port)


def test_the_job_service_refuses_a_port_another_process_holds_on_localhost(held_ipv4_port, tmp_path):
    from beam_spark_runner.job_service.servicer import SparkJobServicer

    servicer = SparkJobServicer(spark_session=None, staging_dir=str(tmp_path))
    with pytest.raises(OSError, match="localhost:%d" % held_ipv4_port):
        servicer.start_grpc_server(held_ipv4_port)


def test_any_free_port_is_one_every_address_of_the_host_listens_on():
    server, port = grpc_servers.listening_server("localhost")
    try:
        server.start()
        for address in grpc_servers.host_addresses("localhost"):
            family = socket.AF_INET6 if address.startswith("[") else socket.AF_INET
            with socket.socket(family, socket.SOCK_STREAM) as other:
                with pytest.raises(OSError, match="in use"):
                    other.bind((address.strip("[]"), port))
    finally:
        server.stop(None)


def test_a_name_that_does_not_resolve_is_an_error_naming_it():
    with pytest.raises(OSError, match="no-such-host.invalid"):
        grpc_servers.listening_server("no-such-host.invalid")


def test_a_wildcard_host_is_one_address():
    assert grpc_servers.host_addresses("0.0.0.0") == ["[::]"]
    assert grpc_servers.host_addresses("127.0.0.1") == ["127.0.0.1"]


def test_localhost_is_both_loopbacks_since_grpc_clients_try_ipv6_first():
    """A port held on ::1 alone is refused on "localhost". The same port on
    127.0.0.1 may be held by another process of a busy machine, which is
    refused too but names the other address: then another port is tried."""
    if not grpc_servers.host_addresses("localhost")[1:]:
        pytest.fail("this machine has no IPv6 loopback; the CI machine has one")
    for _ in range(20):
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as holder:
            holder.bind(("::1", 0))
            holder.listen(1)
            port = holder.getsockname()[1]
            with pytest.raises(OSError, match=r"cannot listen on localhost:%d: address " % port) as refused:
                grpc_servers.listening_server("localhost", port)
            if "127.0.0.1:%d" % port in str(refused.value):
                continue
            assert "address [::1]:%d is in use" % port in str(refused.value)
            return
    pytest.fail("every port tried was held on 127.0.0.1 by another process too")
