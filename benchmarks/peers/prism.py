"""Beam's Prism runner as a benchmark peer: built from the Go module proxy,
started as a local job server, and given pipelines through Beam Python's
`PortableRunner`.

    python -m benchmarks.peers.prism --check [--version 2.77.0]

builds Prism if it is not cached yet, starts it, runs a GroupByKey pipeline
and a fixed-window CombinePerKey pipeline on it, checks both outputs, and
prints the version, the binary, the start-up time and `ok`.

Build: `GOBIN=<tmp> go install github.com/apache/beam/sdks/v2/go/cmd/prism@v<version>`
with the machine's `go`, into `<peers cache>/prism-<version>/prism` (the
peers cache is `$BEAM_SPARK_PEERS_CACHE`, else
`~/.cache/beam-spark-runner/peers`). A cached binary is used as it is, never
rebuilt; concurrent callers build it once (a file lock), and the binary
appears only when complete. The version defaults to the installed Beam
Python SDK's release, so that the runner and the SDK speak the same protocol.

Start: `prism --job_port=0 --serve_http=false --log_kind=json --log_level=info`.
Prism picks a free port itself (no race with other processes); the port is
read from its `Serving JobManagement` log line, and the server counts as
ready once its Job API has answered a `GetJobs` call. The same port serves
artifact staging and the workers' Fn API. Prism listens on all interfaces.

Nothing here is a dependency of `beam_spark_runner`.
"""

import argparse
import fcntl
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.peers import PeerUnavailable, checks, peers_cache_dir

MODULE = "github.com/apache/beam/sdks/v2"
COMMAND = MODULE + "/go/cmd/prism"
BUILD_TIMEOUT_SECONDS = 1800
LOG_TAIL_LINES = 30


def default_version():
    """The installed Beam Python SDK's release ("2.77.0" for 2.77.0,
    2.77.0rc1 or 2.77.0.dev0)."""
    from apache_beam.version import __version__

    match = re.match(r"\d+\.\d+\.\d+", __version__)
    if not match:
        raise PeerUnavailable("Prism: cannot tell a release from apache_beam version %r" % __version__)
    return match.group(0)


def binary_path(version=None):
    """Where Prism `version` is (or would be) cached; nothing is built."""
    return peers_cache_dir() / ("prism-%s" % (version or default_version())) / "prism"


def build_info(version=None):
    """What built the cached binary: a dict with `go` (go's own version line),
    `command`, `seconds` and `size`; None when nothing is cached or the record
    is missing."""
    try:
        with open(binary_path(version).parent / "build.json") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _tail(path, lines=LOG_TAIL_LINES):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:]).rstrip()
    except OSError:
        return "(no output)"


def prism_binary(version=None):
    """The path of the Prism binary for `version` (default: the Beam Python
    SDK's release), building it first if it is not cached.

    Raises PeerUnavailable, naming the version, the command and the tail of
    go's output, when `go` is missing or the build fails."""
    version = version or default_version()
    target = binary_path(version)
    if target.is_file() and os.access(target, os.X_OK):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent.parent / (target.parent.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.is_file() and os.access(target, os.X_OK):
            return target
        _build(version, target)
    return target


def _build(version, target):
    go = shutil.which("go")
    command = ["go", "install", "%s@v%s" % (COMMAND, version)]
    if go is None:
        raise PeerUnavailable("Prism %s: `go` is not on PATH, so `%s` cannot run" % (version, " ".join(command)))
    log_path = target.parent / "build.log"
    staging = Path(tempfile.mkdtemp(prefix="build-", dir=target.parent))
    try:
        env = dict(os.environ, GOBIN=str(staging))
        began = time.monotonic()
        with open(log_path, "w") as log:
            try:
                code = subprocess.run(
                    [go] + command[1:],
                    cwd=staging,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=BUILD_TIMEOUT_SECONDS,
                    check=False,
                ).returncode
            except subprocess.TimeoutExpired:
                code = "timeout after %ds" % BUILD_TIMEOUT_SECONDS
        seconds = time.monotonic() - began
        built = staging / "prism"
        if code != 0 or not built.is_file():
            raise PeerUnavailable(
                "Prism %s could not be built: `GOBIN=<temporary dir> %s` ended with %s (all of go's output: %s);"
                " it ends with:\n%s" % (version, " ".join(command), code, log_path, _tail(log_path))
            )
        go_version = subprocess.run([go, "version"], capture_output=True, text=True, check=False).stdout.strip()
        os.replace(built, target)
        with open(target.parent / "build.json", "w") as f:
            json.dump(
                {
                    "go": go_version,
                    "command": "GOBIN=<tmp> " + " ".join(command),
                    "seconds": round(seconds, 1),
                    "size": target.stat().st_size,
                },
                f,
                indent=1,
            )
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _stop_with_parent():
    """On Linux, a function for `preexec_fn` that has the child sent SIGTERM
    when the thread that started it ends (so Prism does not outlive a killed
    benchmark); elsewhere None."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    parent = os.getpid()
    pr_set_pdeathsig = 1

    def preexec():
        libc.prctl(pr_set_pdeathsig, signal.SIGTERM)
        if os.getppid() != parent:
            os._exit(1)

    return preexec


class PrismJobServer:
    """A Prism job server for the life of a `with` block.

    On entry: Prism is built if needed (not counted in the start-up), started
    on a free port, and waited for until its Job API answers. Then:

    - `endpoint`: "localhost:PORT", for `--job_endpoint`;
    - `port`: PORT;
    - `startup_seconds`: from starting the process until the Job API answered;
    - `version`: the Beam release Prism was built from;
    - `binary`, `pid`, `log_path` (Prism's own log, JSON lines).

    On exit the process is stopped (SIGTERM, then SIGKILL after 10 s). A
    temporary log is removed then; a `log_path` given by the caller is kept.
    On Linux Prism is also sent SIGTERM if the thread that entered the block
    ends without leaving it (the process was killed, say): enter it on a
    thread that lives as long as the server is needed. Prism runs in a
    session of its own, so a terminal's Ctrl-C reaches only this process,
    which then stops Prism on the way out.

    Stopping Prism within a second or so of a LOOPBACK job's end can make
    the submitting process's in-process SDK worker log an UNAVAILABLE
    "Stream removed" error from its state stream thread; the job's result
    is not affected.

    Raises PeerUnavailable when Prism cannot be built, exits before it is
    ready, or is not ready within `startup_timeout` seconds.

    `idle_shutdown_timeout` (seconds): Prism stops itself after that long
    without a job; by default it never does."""

    def __init__(self, version=None, *, log_path=None, startup_timeout=60.0, idle_shutdown_timeout=None):
        self.version = version or default_version()
        self.startup_timeout = startup_timeout
        self.idle_shutdown_timeout = idle_shutdown_timeout
        self._own_log = log_path is None
        self.log_path = str(log_path) if log_path else None
        self.binary = None
        self.process = None
        self.pid = None
        self.endpoint = None
        self.port = None
        self.startup_seconds = None

    def arguments(self):
        """Prism's command line, less the binary."""
        args = ["--job_port=0", "--serve_http=false", "--log_kind=json", "--log_level=info"]
        if self.idle_shutdown_timeout is not None:
            args.append("--idle_shutdown_timeout=%.3fs" % self.idle_shutdown_timeout)
        return args

    def __enter__(self):
        self.binary = prism_binary(self.version)
        if self._own_log:
            fd, self.log_path = tempfile.mkstemp(prefix="prism-", suffix=".log")
            os.close(fd)
        log = open(self.log_path, "w")
        try:
            began = time.monotonic()
            self.process = subprocess.Popen(
                [str(self.binary)] + self.arguments(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=True,
                preexec_fn=_stop_with_parent(),
            )
        finally:
            log.close()
        self.pid = self.process.pid
        try:
            self.port = self._wait_for_port(began + self.startup_timeout)
            self.endpoint = "localhost:%d" % self.port
            self._wait_for_job_api(began + self.startup_timeout)
            self.startup_seconds = time.monotonic() - began
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()
        return False

    def _unavailable(self, why):
        return PeerUnavailable(
            "Prism %s (%s): %s; its log ends with:\n%s" % (self.version, self.binary, why, _tail(self.log_path))
        )

    def _wait_for_port(self, deadline):
        while True:
            with open(self.log_path, errors="replace") as f:
                for line in f:
                    if "Serving JobManagement" not in line:
                        continue
                    try:
                        endpoint = json.loads(line).get("endpoint", "")
                    except ValueError:
                        continue
                    if endpoint.rpartition(":")[2].isdigit():
                        return int(endpoint.rpartition(":")[2])
            if self.process.poll() is not None:
                raise self._unavailable("exited with %s before serving" % self.process.returncode)
            if time.monotonic() > deadline:
                raise self._unavailable("no Job API port within %gs" % self.startup_timeout)
            time.sleep(0.005)

    def _wait_for_job_api(self, deadline):
        import grpc
        from apache_beam.portability.api import beam_job_api_pb2, beam_job_api_pb2_grpc

        with grpc.insecure_channel(self.endpoint) as channel:
            stub = beam_job_api_pb2_grpc.JobServiceStub(channel)
            try:
                stub.GetJobs(
                    beam_job_api_pb2.GetJobsRequest(),
                    timeout=max(0.1, deadline - time.monotonic()),
                    wait_for_ready=True,
                )
            except grpc.RpcError as e:
                if self.process.poll() is not None:
                    raise self._unavailable("exited with %s before serving" % self.process.returncode)
                raise self._unavailable("the Job API did not answer GetJobs (%s)" % e.code())

    def stop(self):
        """Stops Prism if it runs; safe to call more than once."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self._own_log and self.log_path:
            try:
                os.remove(self.log_path)
            except OSError:
                pass


def pipeline_args(server):
    """Beam Python pipeline arguments that submit a pipeline to `server`:
    `PortableRunner` at its endpoint with a LOOPBACK environment.

    LOOPBACK runs the SDK harness inside the submitting Python process (Beam
    starts a worker pool there and Prism connects back to it), as Beam's own
    PrismRunner does for Python. A DOCKER environment (PortableRunner's
    default) fails at once without a Docker engine, and a PROCESS one needs
    Beam's SDK boot program. Prism reads `--streaming` and the experiments
    `prism_disable_rtc` and `prism_disable_sdf_split` from the options it is
    sent; PortableRunner sends only options known to Beam Python."""
    return [
        "--runner=PortableRunner",
        "--job_endpoint=%s" % server.endpoint,
        "--environment_type=LOOPBACK",
    ]


def check(version=None):
    """Builds (if needed) and starts Prism, runs both check pipelines on it,
    and prints what it found; exits non-zero on a wrong result."""
    version = version or default_version()
    cached = binary_path(version).is_file()
    began = time.monotonic()
    binary = prism_binary(version)
    prepared = time.monotonic() - began
    info = build_info(version) or {}
    print("prism %s: %s (%d bytes)" % (version, binary, binary.stat().st_size))
    if info:
        print("built by %s with `%s` in %ss" % (info.get("go"), info.get("command"), info.get("seconds")))
    print("binary %s" % ("cached" if cached else "built now in %.1fs" % prepared))
    with PrismJobServer(version) as server, tempfile.TemporaryDirectory(prefix="prism-check-") as workdir:
        print("endpoint %s, startup %.3fs" % (server.endpoint, server.startup_seconds))
        args = pipeline_args(server)
        print("args: %s" % " ".join(args))
        print("GroupByKey pipeline: right output in %.1fs" % checks.check_group_by_key(args, workdir))
        print(
            "fixed-window CombinePerKey pipeline: right output in %.1fs"
            % checks.check_windowed_combine(args, workdir, "windowed")
        )
    print("ok")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers.prism", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="build, start and check Prism with two pipelines")
    parser.add_argument("--version", default=None, help="Beam release to build Prism from (default: the SDK's)")
    args = parser.parse_args(argv)
    if not args.check:
        parser.print_help()
        return 2
    try:
        check(args.version)
    except PeerUnavailable as e:
        print("unavailable: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
