"""The gRPC servers the runner starts: the job service and each Java SDK
harness's Fn API endpoint.

Guarantee: a server listens on its port alone. gRPC sets SO_REUSEPORT on
its listening sockets by default, and with it two servers that each ask
for "any free port" can be given the same one; the kernel then spreads
connections between them, so a client (a harness JVM, a Beam Java
pipeline submitting a job) can reach another process's server and wait
there for an answer that never comes. A test run starts hundreds of such
servers. Off here, a port held by another socket is refused instead.
"""

import grpc
from apache_beam.utils import thread_pool_executor

_OPTIONS = (
    ("grpc.so_reuseport", 0),
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", -1),
    ("grpc.http2.max_pings_without_data", 0),
    ("grpc.http2.max_ping_strikes", 0),
)


def new_server() -> grpc.Server:
    """A gRPC server on Beam's shared executor (daemon threads, so a stream
    still open when the process exits does not hold it up), with unlimited
    message sizes, keepalive pings allowed, and no port sharing."""
    return grpc.server(thread_pool_executor.shared_unbounded_instance(), options=list(_OPTIONS))
