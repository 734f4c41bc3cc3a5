"""Beam's Flink runner as a benchmark peer: Beam Java's Flink job server,
fetched from Maven Central, started as a local process with an embedded
Flink cluster, and given pipelines through Beam Python's `PortableRunner`.

    python -m benchmarks.peers.flink --check [--parallelism 2]

fetches the job server if it is not cached yet, starts it, runs a
GroupByKey pipeline, a fixed-window CombinePerKey pipeline (batch, then
with `--streaming`) and a streaming `PeriodicImpulse` pipeline on it,
checks every output, and prints the versions, the start-up time and `ok`.

What runs: Beam Java `BEAM_VERSION`'s Flink runner for Flink `FLINK_MINOR`
(the newest Flink line whose Beam runner Maven Central serves here), main
class `org.apache.beam.runners.flink.FlinkJobServerDriver`, the same main
class and classes as Beam's shaded `beam-runners-flink-<minor>-job-server`
jar. That shaded jar is not served by the Maven Central this machine
reaches, so the job server runs from the unshaded runner artifact and its
runtime dependencies on a class path, plus what the shaded jar adds
(slf4j-simple and jcl-over-slf4j for logging). One module is substituted:
`beam-runners-java-job-service` (the Job API front end: job submission,
state and message streams) is served only up to `JOB_SERVICE_VERSION`, so
that release is used; every other Beam module is `BEAM_VERSION` (checked
after each fetch). The translation to Flink, the Fn API runner side and
Flink itself are those of `BEAM_VERSION`.

Fetch: Maven (`mvn dependency:copy-dependencies`, checksums strict) into
`<peers cache>/flink-<minor>-job-server-<version>/`, where the peers cache
is `$BEAM_SPARK_PEERS_CACHE`, else `~/.cache/beam-spark-runner/peers`.
`classpath.txt` there is written last, so a fetch cut short is redone; once
it exists neither Maven nor the network is used. Maven also keeps a copy
in its local repository (`~/.m2` unless configured otherwise). Concurrent
callers fetch once (a file lock).

Start: `java <Flink's Java 17 module flags> -cp <jars>
org.apache.beam.runners.flink.FlinkJobServerDriver --job-host=localhost
--job-port=0 --artifact-port=0 --expansion-port=0 --flink-master=[local]
--artifacts-dir=<work>/artifacts`, with `-Djava.io.tmpdir=<work>/tmp`
(Flink's MiniCluster unpacks its RPC jar and keeps its blobs there), where
`<work>` is a temporary directory removed when the server stops. Port 0
lets the server pick free ports itself (no race with other processes); the
Job API port is read from its "JobService started on" log line, and the
server counts as ready once its Job API has answered a `GetJobs` call. With `[local]` each job runs on its own
embedded Flink MiniCluster, started when the job starts, so its start-up is
part of each job's time, not of `startup_seconds`.

Parallelism is a pipeline option, as Beam's Flink runner documents it:
`pipeline_args()` passes `--parallelism=N` (the server's `parallelism`);
the job server itself has no parallelism flag.

Nothing here is a dependency of `beam_spark_runner`.
"""

import argparse
import dataclasses
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

BEAM_VERSION = "2.70.0"
FLINK_MINOR = "1.19"
JOB_SERVICE_VERSION = "2.65.0"
SLF4J_VERSION = "2.0.16"
MAIN_CLASS = "org.apache.beam.runners.flink.FlinkJobServerDriver"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
FETCH_TIMEOUT_SECONDS = 1800
LOG_TAIL_LINES = 30
_LISTING = "classpath.txt"
_BEAM = "org.apache.beam"

# The JVM flags Flink's own launch scripts pass on Java 17 (Flink's default
# `env.java.opts.all`): Flink and its serializers reflect into these JDK
# packages.
JAVA17_FLAGS = (
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED",
    "--add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.api=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.parser=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.tree=ALL-UNNAMED",
    "--add-exports=jdk.compiler/com.sun.tools.javac.util=ALL-UNNAMED",
    "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.text=ALL-UNNAMED",
    "--add-opens=java.base/java.time=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED",
)


def runner_artifact():
    """Maven coordinates of the Flink runner module."""
    return "%s:beam-runners-flink-%s:%s" % (_BEAM, FLINK_MINOR, BEAM_VERSION)


def shaded_artifact():
    """Maven coordinates of Beam's shaded job server jar for the same
    release (named in messages; not fetched, see the module docstring)."""
    return "%s:beam-runners-flink-%s-job-server:%s" % (_BEAM, FLINK_MINOR, BEAM_VERSION)


def runner_url():
    """The runner module's POM on Maven Central."""
    name = "beam-runners-flink-%s" % FLINK_MINOR
    return "%s/%s/%s/%s/%s-%s.pom" % (MAVEN_CENTRAL, _BEAM.replace(".", "/"), name, BEAM_VERSION, name, BEAM_VERSION)


def cache_dir():
    """Where the job server's jars are (or would be) cached; nothing is
    fetched."""
    return peers_cache_dir() / ("flink-%s-job-server-%s" % (FLINK_MINOR, BEAM_VERSION))


def fetch_info():
    """What the cached fetch recorded: a dict with `artifacts`, `maven`
    (Maven's version line), `seconds`, `jars` and `bytes`; None when nothing
    is cached or the record is missing."""
    try:
        with open(cache_dir() / "fetch.json") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _pom():
    """A POM whose runtime dependencies are the job server's class path."""
    no_commons_logging = (
        "<exclusion><groupId>commons-logging</groupId><artifactId>commons-logging</artifactId></exclusion>"
    )
    no_job_service = (
        "<exclusion><groupId>%s</groupId><artifactId>beam-runners-java-job-service</artifactId></exclusion>" % (_BEAM)
    )

    def dependency(group, artifact, version, exclusions=""):
        return "<dependency><groupId>%s</groupId><artifactId>%s</artifactId><version>%s</version>%s</dependency>" % (
            group,
            artifact,
            version,
            "<exclusions>%s</exclusions>" % exclusions if exclusions else "",
        )

    # Modules that the substituted job service also depends on, held at the
    # runner's release.
    managed = "".join(
        dependency(_BEAM, artifact, BEAM_VERSION)
        for artifact in (
            "beam-sdks-java-core",
            "beam-sdks-java-expansion-service",
            "beam-runners-java-fn-execution",
            "beam-runners-core-java",
            "beam-model-pipeline",
            "beam-model-job-management",
            "beam-model-fn-execution",
        )
    )
    dependencies = "".join(
        (
            dependency(_BEAM, "beam-runners-flink-%s" % FLINK_MINOR, BEAM_VERSION, no_job_service + no_commons_logging),
            dependency(_BEAM, "beam-runners-java-job-service", JOB_SERVICE_VERSION, no_commons_logging),
            dependency("org.slf4j", "slf4j-simple", SLF4J_VERSION),
            dependency("org.slf4j", "jcl-over-slf4j", SLF4J_VERSION),
        )
    )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>beam-spark-runner-peers</groupId><artifactId>flink-job-server</artifactId><version>1</version>"
        "<dependencyManagement><dependencies>%s</dependencies></dependencyManagement>"
        "<dependencies>%s</dependencies></project>" % (managed, dependencies)
    )


def _cached_classpath():
    try:
        with open(cache_dir() / _LISTING) as f:
            names = [line.strip() for line in f if line.strip()]
    except OSError:
        return None
    paths = [str(cache_dir() / "jars" / name) for name in names]
    return paths if paths and all(os.path.isfile(p) for p in paths) else None


def _tail(path, lines=LOG_TAIL_LINES):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:]).rstrip()
    except OSError:
        return "(no output)"


def job_server_classpath():
    """The job server's class path (jar paths), fetching the jars first if
    they are not cached.

    Raises PeerUnavailable, naming the artifact, its URL and the tail of
    Maven's output, when `mvn` is missing or the fetch fails, or when the
    fetched Beam modules are not at the pinned releases."""
    cached = _cached_classpath()
    if cached is not None:
        return cached
    target = cache_dir()
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / (target.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cached = _cached_classpath()
        if cached is not None:
            return cached
        _fetch(target)
    return _cached_classpath()


def _check_versions(names):
    """Every Beam module at its pinned release (vendored libraries aside)."""
    wrong = []
    for name in names:
        match = re.match(r"(beam-(?!vendor-).*)-(\d+\.\d+\.\d+)\.jar$", name)
        if not match:
            continue
        artifact, version = match.groups()
        want = JOB_SERVICE_VERSION if artifact == "beam-runners-java-job-service" else BEAM_VERSION
        if version != want:
            wrong.append("%s (want %s)" % (name, want))
    return wrong


def _fetch(target):
    what = "%s (for %s, with %s:beam-runners-java-job-service:%s) from %s" % (
        runner_artifact(),
        shaded_artifact(),
        _BEAM,
        JOB_SERVICE_VERSION,
        runner_url(),
    )
    mvn = shutil.which("mvn")
    if mvn is None:
        raise PeerUnavailable("Flink job server: `mvn` is not on PATH, so %s cannot be fetched" % what)
    staging = Path(tempfile.mkdtemp(prefix="fetch-", dir=target.parent))
    log_path = staging / "maven.log"
    try:
        (staging / "pom.xml").write_text(_pom())
        began = time.monotonic()
        with open(log_path, "w") as log:
            try:
                code = subprocess.run(
                    [
                        mvn,
                        "-B",
                        "-C",
                        "-Dstyle.color=never",
                        "-f",
                        str(staging / "pom.xml"),
                        "dependency:copy-dependencies",
                        "-DoutputDirectory=" + str(staging / "jars"),
                        "-DincludeScope=runtime",
                    ],
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    timeout=FETCH_TIMEOUT_SECONDS,
                    check=False,
                ).returncode
            except subprocess.TimeoutExpired:
                code = "timeout after %ds" % FETCH_TIMEOUT_SECONDS
        seconds = time.monotonic() - began
        jars = staging / "jars"
        names = sorted(os.listdir(jars)) if jars.is_dir() else []
        if code != 0 or not names:
            raise PeerUnavailable(
                "Flink job server: Maven could not fetch %s (exit %s); its output ends with:\n%s"
                % (what, code, _tail(log_path))
            )
        wrong = _check_versions(names)
        if wrong:
            raise PeerUnavailable("Flink job server: %s resolved Beam modules at other releases: %s" % (what, wrong))
        maven = subprocess.run([mvn, "-B", "-v"], capture_output=True, text=True, check=False).stdout.splitlines()
        maven = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in maven]
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir()
        os.replace(jars, target / "jars")
        with open(target / "fetch.json", "w") as f:
            json.dump(
                {
                    "artifacts": [
                        runner_artifact(),
                        "%s:beam-runners-java-job-service:%s" % (_BEAM, JOB_SERVICE_VERSION),
                        "org.slf4j:slf4j-simple:%s" % SLF4J_VERSION,
                        "org.slf4j:jcl-over-slf4j:%s" % SLF4J_VERSION,
                    ],
                    "maven": maven[0] if maven else "",
                    "seconds": round(seconds, 1),
                    "jars": len(names),
                    "bytes": sum((target / "jars" / n).stat().st_size for n in names),
                },
                f,
                indent=1,
            )
        with open(target / (_LISTING + ".tmp"), "w") as f:
            f.write("".join(name + "\n" for name in names))
        os.replace(target / (_LISTING + ".tmp"), target / _LISTING)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@dataclasses.dataclass(frozen=True)
class FlinkPeerVersion:
    """The releases a job server runs: Beam Java (the Flink runner), the
    Beam job service module, and Flink (from the class path's flink-runtime
    jar)."""

    beam: str
    job_service: str
    flink: str

    def __str__(self):
        return "Beam Java %s Flink runner (job service %s) on Flink %s" % (self.beam, self.job_service, self.flink)


def peer_version(classpath=None):
    """The `FlinkPeerVersion` of the cached (or given) class path."""
    flink = "unknown"
    for path in classpath or job_server_classpath():
        match = re.match(r"flink-runtime-(\d[^-]*)\.jar$", os.path.basename(path))
        if match:
            flink = match.group(1)
    return FlinkPeerVersion(BEAM_VERSION, JOB_SERVICE_VERSION, flink)


class FlinkJobServer:
    """A Beam Flink job server for the life of a `with` block.

    On entry: the jars are fetched if needed (not counted in the start-up),
    the JVM is started in its own process group, and waited for until its
    Job API answers. Then:

    - `endpoint`: "localhost:PORT", for `--job_endpoint`;
    - `port`: PORT;
    - `startup_seconds`: from starting the JVM until the Job API answered;
    - `version`: a `FlinkPeerVersion` (Beam and Flink releases);
    - `parallelism`: what `pipeline_args()` passes as `--parallelism`;
    - `command`, `pid`, `log_path` (the job server's own log).

    On exit the process group is stopped (SIGTERM, then SIGKILL after 10 s)
    and its work directory (staged artifacts, the JVM's temporary files)
    removed. A temporary log is removed then; a `log_path` given by the
    caller is kept. Raises PeerUnavailable
    when the jars cannot be had, or the JVM exits before it is ready or is
    not ready within `startup_timeout` seconds.

    `log_level`: slf4j-simple's level for everything but the line that
    names the Job API port ("warn" by default; "info" shows Flink's
    MiniCluster at work). `jvm_args`: extra JVM flags (heap size, say).
    `java`: the java binary (default: `$JAVA_HOME/bin/java`, else `java`
    on PATH)."""

    def __init__(
        self,
        parallelism=2,
        *,
        log_path=None,
        startup_timeout=120.0,
        log_level="warn",
        jvm_args=(),
        java=None,
    ):
        self.parallelism = int(parallelism)
        self.startup_timeout = startup_timeout
        self.log_level = log_level
        self.jvm_args = tuple(jvm_args)
        self.java = java or _default_java()
        self._own_log = log_path is None
        self.log_path = str(log_path) if log_path else None
        self.version = None
        self.command = None
        self.process = None
        self.pid = None
        self.endpoint = None
        self.port = None
        self.startup_seconds = None
        self._workdir = None

    def arguments(self):
        """The job server's own flags (after the main class); the work
        directory shows as `<work>` before the server is entered."""
        work = self._workdir or "<work>"
        return [
            "--job-host=localhost",
            "--job-port=0",
            "--artifact-port=0",
            "--expansion-port=0",
            "--flink-master=[local]",
            "--artifacts-dir=%s" % os.path.join(work, "artifacts"),
        ]

    def __enter__(self):
        classpath = job_server_classpath()
        self.version = peer_version(classpath)
        self._workdir = tempfile.mkdtemp(prefix="flink-job-server-")
        os.mkdir(os.path.join(self._workdir, "tmp"))
        if self._own_log:
            fd, self.log_path = tempfile.mkstemp(prefix="flink-job-server-", suffix=".log")
            os.close(fd)
        self.command = (
            [self.java]
            + list(JAVA17_FLAGS)
            + [
                "-Djava.io.tmpdir=%s" % os.path.join(self._workdir, "tmp"),
                "-Dorg.slf4j.simpleLogger.defaultLogLevel=%s" % self.log_level,
                "-Dorg.slf4j.simpleLogger.log.org.apache.beam.runners.jobsubmission.JobServerDriver=info",
            ]
            + list(self.jvm_args)
            + ["-cp", os.pathsep.join(classpath), MAIN_CLASS]
            + self.arguments()
        )
        log = open(self.log_path, "w")
        try:
            began = time.monotonic()
            try:
                self.process = subprocess.Popen(
                    self.command, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
                )
            except OSError as e:
                raise PeerUnavailable("Flink job server: cannot start %s (%s)" % (self.java, e))
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
            "Flink job server (%s): %s; its log ends with:\n%s" % (self.version, why, _tail(self.log_path))
        )

    def _wait_for_port(self, deadline):
        pattern = re.compile(r"JobService started on \S*:(\d+)")
        while True:
            with open(self.log_path, errors="replace") as f:
                match = pattern.search(f.read())
            if match:
                return int(match.group(1))
            if self.process.poll() is not None:
                raise self._unavailable("exited with %s before serving" % self.process.returncode)
            if time.monotonic() > deadline:
                raise self._unavailable("no Job API port within %gs" % self.startup_timeout)
            time.sleep(0.01)

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
        """Stops the job server's process group if it runs; safe to call more
        than once."""
        if self.process is not None and self.process.poll() is None:
            try:
                os.killpg(self.process.pid, 15)
            except ProcessLookupError:
                pass
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(self.process.pid, 9)
                except ProcessLookupError:
                    pass
                self.process.wait()
        if self._workdir:
            shutil.rmtree(self._workdir, ignore_errors=True)
        if self._own_log and self.log_path:
            try:
                os.remove(self.log_path)
            except OSError:
                pass


def _default_java():
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "java"), os.X_OK):
        return os.path.join(home, "bin", "java")
    return "java"


def pipeline_args(server):
    """Beam Python pipeline arguments that submit a pipeline to `server`:
    `PortableRunner` at its endpoint, a LOOPBACK environment, and the
    server's parallelism as Flink's `--parallelism`.

    LOOPBACK runs the SDK harness inside the submitting Python process
    (Beam starts a worker pool there and the Flink tasks connect back to
    it); no Docker engine is needed. Add `--streaming` for Flink's streaming
    mode."""
    return [
        "--runner=PortableRunner",
        "--job_endpoint=%s" % server.endpoint,
        "--environment_type=LOOPBACK",
        "--parallelism=%d" % server.parallelism,
    ]


def check(parallelism=2):
    """Fetches (if needed) and starts the job server, runs the check
    pipelines on it, and prints what it found; exits non-zero on a wrong
    result."""
    import apache_beam

    cached = _cached_classpath() is not None
    began = time.monotonic()
    classpath = job_server_classpath()
    prepared = time.monotonic() - began
    info = fetch_info() or {}
    print("%s" % peer_version(classpath))
    print("Beam Python SDK %s" % apache_beam.__version__)
    print("job server: %s (%d jars, %d bytes)" % (cache_dir(), len(classpath), info.get("bytes", 0)))
    if info:
        print(
            "fetched %s by %s in %ss" % (", ".join(info.get("artifacts", [])), info.get("maven"), info.get("seconds"))
        )
    print("jars %s" % ("cached" if cached else "fetched now in %.1fs" % prepared))
    java = _default_java()
    java_version = subprocess.run([java, "-version"], capture_output=True, text=True, check=False).stderr.splitlines()
    print("java: %s" % (java_version[0] if java_version else java))
    with FlinkJobServer(parallelism) as server, tempfile.TemporaryDirectory(prefix="flink-check-") as workdir:
        print("endpoint %s, startup %.3fs" % (server.endpoint, server.startup_seconds))
        print("server flags: %s" % " ".join(server.arguments()))
        args = pipeline_args(server)
        print("args: %s" % " ".join(args))
        print("batch GroupByKey pipeline: right output in %.1fs" % checks.check_group_by_key(args, workdir))
        print(
            "batch fixed-window CombinePerKey pipeline: right output in %.1fs"
            % checks.check_windowed_combine(args, workdir, "batch-windowed")
        )
        streaming = args + ["--streaming"]
        print(
            "streaming fixed-window CombinePerKey pipeline (bounded Create): right output in %.1fs"
            % checks.check_windowed_combine(streaming, workdir, "streaming-windowed")
        )
        print(
            "streaming PeriodicImpulse pipeline: right output in %.1fs"
            % checks.check_periodic_impulse(streaming, workdir)
        )
    print("ok")


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers.flink", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="fetch, start and check the Flink job server")
    parser.add_argument("--parallelism", type=int, default=2, help="Flink parallelism for the check (default 2)")
    args = parser.parse_args(argv)
    if not args.check:
        parser.print_help()
        return 2
    try:
        check(args.parallelism)
    except PeerUnavailable as e:
        print("unavailable: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
