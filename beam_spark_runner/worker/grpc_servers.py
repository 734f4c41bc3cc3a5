"""The gRPC servers the runner starts: the job service and each Java SDK
harness's Fn API endpoint.

Guarantees:

- A server listens on its port alone. gRPC sets SO_REUSEPORT on its
  listening sockets by default, and with it two servers that each ask for
  "any free port" can be given the same one; the kernel then spreads
  connections between them, so a client (a harness JVM, a Beam Java
  pipeline submitting a job) can reach another process's server and wait
  there for an answer that never comes. A test run starts hundreds of such
  servers. Off here, a port held by another socket is refused instead.
- A server listens on every address its host name stands for, or not at
  all. gRPC binds a name such as "localhost" to each address it resolves
  to (127.0.0.1 and ::1) and is content when one of them binds: with the
  IPv4 port held by another process, a client that resolves "localhost"
  to 127.0.0.1 reaches that process. `listening_server` binds each
  address explicitly (both loopbacks for "localhost", else those the
  system's resolver gives), and a port it cannot have on all of them is
  an error naming the address (for "any free port": another port is
  tried).
"""

import socket

import grpc
from apache_beam.utils import thread_pool_executor

_OPTIONS = (
    ("grpc.so_reuseport", 0),
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.http2.max_ping_strikes", 0),
)

# How many ports "any free port" tries before it gives up: each attempt
# fails only when another process holds the port on one of the addresses.
_FREE_PORT_ATTEMPTS = 20

_WILDCARDS = frozenset(["", "0.0.0.0", "::", "[::]"])


def new_server() -> grpc.Server:
    """A gRPC server on Beam's shared executor (daemon threads, so a stream
    still open when the process exits does not hold it up), with unlimited
    message sizes, keepalive pings allowed, and no port sharing."""
    return grpc.server(thread_pool_executor.shared_unbounded_instance(), options=list(_OPTIONS))


def host_addresses(host: str) -> list:
    """The addresses `host` listens on, formatted for gRPC ("127.0.0.1",
    "[::1]"), in the resolver's order without repeats. A wildcard stays
    one wildcard address (the kernel then listens on every interface)."""
    if host in _WILDCARDS:
        return ["[::]"]
    if host == "localhost":
        # Clients resolve "localhost" their own way: gRPC's resolver gives
        # ::1 first even where the system's gives 127.0.0.1 alone. Both
        # loopbacks, so that neither can lead to another process.
        return ["127.0.0.1", "[::1]"] if _ipv6_loopback() else ["127.0.0.1"]
    bare = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        infos = socket.getaddrinfo(bare, None, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        raise OSError("cannot listen on host %r: it does not resolve (%s)" % (host, e)) from e
    addresses = []
    for family, _, _, _, sockaddr in infos:
        address = "[%s]" % sockaddr[0] if family == socket.AF_INET6 else sockaddr[0]
        if address not in addresses:
            addresses.append(address)
    return addresses


def _ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


def _add_port(server: grpc.Server, address: str, port: int) -> int:
    try:
        return server.add_insecure_port("%s:%d" % (address, port))
    except RuntimeError:  # newer gRPC raises where older ones return 0
        return 0


def listening_server(host: str, port: int = 0):
    """A new server (see `new_server`), not yet started, bound to `port`
    (0: any free port) on every address of `host`; returns (server, port).
    Raises OSError naming the host, the address and the port when the port
    is held there by another socket (for port 0: after trying
    `_FREE_PORT_ATTEMPTS` ports)."""
    addresses = host_addresses(host)
    failure = None
    for _ in range(_FREE_PORT_ATTEMPTS if port == 0 else 1):
        server = new_server()
        bound = _add_port(server, addresses[0], port)
        failure = (addresses[0], port)
        if bound:
            failure = next(((a, bound) for a in addresses[1:] if not _add_port(server, a, bound)), None)
            if failure is None:
                return server, bound
        server.stop(None)
    address, held = failure
    if port == 0:
        raise OSError(
            "cannot listen on %s: %d free ports in a row were held on one of its addresses (%s) by other sockets"
            % (host, _FREE_PORT_ATTEMPTS, ", ".join(addresses))
        )
    raise OSError("cannot listen on %s:%d: address %s:%d is in use by another socket" % (host, port, address, held))
