"""What answers at an address: each service's own protocol, spoken just far
enough to tell the expected server (with the settings the tests need) from
anything else. Each `probe_*` returns None for the expected server, else
what it found; a silent listener is an error after a few seconds, never a
hang. Standard library only (tools/services.py runs before any virtualenv)."""

import json
import socket
import struct


def _connect(host, port, timeout=3):
    return socket.create_connection((host, port), timeout=timeout)


def _recv_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("the server closed the connection")
        data += chunk
    return data


def listening(host, port):
    try:
        with _connect(host, port, timeout=1):
            return True
    except OSError:
        return False


def probe_postgresql(host, port, user, database):
    """None when a PostgreSQL server lets `user` into `database` without a
    password (up to ReadyForQuery: the database is checked after the
    authentication); else what it answered."""
    params = b"user\0%s\0database\0%s\0\0" % (user.encode(), database.encode())
    with _connect(host, port) as sock:
        sock.sendall(struct.pack("!ii", 8 + len(params), 196608) + params)
        while True:
            kind = _recv_exact(sock, 1)
            if kind not in b"RSKEZN":
                return "not a PostgreSQL server (it answered %r)" % kind
            length = struct.unpack("!i", _recv_exact(sock, 4))[0]
            if not 4 <= length <= 1 << 16:
                return "not a PostgreSQL server (it answered %r with length %d)" % (kind, length)
            body = _recv_exact(sock, length - 4)
            if kind == b"R" and struct.unpack("!i", body[:4])[0] != 0:
                code = struct.unpack("!i", body[:4])[0]
                return "PostgreSQL asks %s for a password (authentication method %d)" % (user, code)
            if kind == b"E":
                fields = {f[:1]: f[1:].decode(errors="replace") for f in body.split(b"\0") if f}
                return "PostgreSQL refused %s on database %s: %s" % (user, database, fields.get(b"M", body))
            if kind == b"Z":
                sock.sendall(b"X\0\0\0\4")  # Terminate
                return None


def _mysql_packet(sock):
    header = _recv_exact(sock, 4)
    length = header[0] | header[1] << 8 | header[2] << 16
    return header[3], _recv_exact(sock, length)


def probe_mariadb(host, port, user, database):
    """None when a MariaDB/MySQL server lets `user` into `database` with an
    empty password; else what it answered."""
    with _connect(host, port) as sock:
        sequence, greeting = _mysql_packet(sock)
        if greeting[:1] == b"\xff":
            return "MariaDB refused the connection: %s" % greeting[9:].decode(errors="replace")
        if greeting[:1] != b"\x0a":
            return "not a MariaDB/MySQL server (its greeting starts %r)" % greeting[:8]
        # CLIENT_LONG_PASSWORD | PROTOCOL_41 | SECURE_CONNECTION | CONNECT_WITH_DB | PLUGIN_AUTH
        flags = 0x1 | 0x200 | 0x8000 | 0x8 | 0x80000
        payload = (
            struct.pack("<IIB23x", flags, 1 << 24, 33)
            + user.encode()
            + b"\0\0"
            + database.encode()
            + b"\0mysql_native_password\0"
        )
        sequence += 1
        sock.sendall(struct.pack("<I", len(payload))[:3] + bytes([sequence]) + payload)
        sequence, answer = _mysql_packet(sock)
        if answer[:1] == b"\xfe":  # the server switches plugin: answer with the empty password
            sock.sendall(b"\0\0\0" + bytes([sequence + 1]))
            sequence, answer = _mysql_packet(sock)
    if answer[:1] == b"\x00":
        return None
    if answer[:1] == b"\xff":
        return "MariaDB refused %s on database %s: %s" % (user, database, answer[9:].decode(errors="replace"))
    return "MariaDB answered the login with %r" % answer[:8]


def probe_redis(host, port):
    with _connect(host, port) as sock:
        sock.sendall(b"PING\r\n")
        answer = sock.recv(64)
    return None if answer.startswith(b"+PONG") else "not a Redis server (PING answered %r)" % answer[:40]


def probe_nats(host, port):
    with _connect(host, port) as sock:
        line = b""
        while not line.endswith(b"\r\n") and len(line) < 65536:
            chunk = sock.recv(4096)
            if not chunk:
                break
            line += chunk
    if not line.startswith(b"INFO "):
        return "not a NATS server (it sent %r)" % line[:40]
    info = json.loads(line[5:].strip())
    if not info.get("jetstream"):
        return "the NATS server runs without JetStream (start it with -js)"
    return None


def probe_kafka(host, port):
    """None when a Kafka broker answers an ApiVersions request."""
    client = b"services"
    request = struct.pack("!hhih", 18, 0, 7, len(client)) + client
    with _connect(host, port) as sock:
        sock.sendall(struct.pack("!i", len(request)) + request)
        length = struct.unpack("!i", _recv_exact(sock, 4))[0]
        body = _recv_exact(sock, length)
    correlation, error = struct.unpack("!ih", body[:6])
    if correlation != 7:
        return "not a Kafka broker (it answered %r)" % body[:16]
    return None if error == 0 else "the Kafka broker answered ApiVersions with error %d" % error
