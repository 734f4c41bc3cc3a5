"""The message brokers of tools/services.py: Redis and NATS from Debian's
packages, Kafka in KRaft mode from its jars on Maven Central at a pinned
version. Standard library only."""

import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from service_base import Service, ServiceError, _find, _is_root, _listening, _run, apt_install, cache_dir  # noqa: E402 -- beside this file
from service_probes import probe_kafka, probe_nats, probe_redis  # noqa: E402

KAFKA_VERSION = "4.1.1"
SCALA_VERSION = "2.13"
LOG4J_VERSION = "2.24.3"
# A fixed cluster id: the broker's data directory is formatted once with it.
KAFKA_CLUSTER_ID = "YmVhbS1zcGFyay1ydW5uZXI"


class Redis(Service):
    name = "redis"
    port = 6379
    env_var = "BEAM_SPARK_TEST_REDIS"
    process_marker = "redis-server"

    def probe(self):
        return probe_redis(self.host, self.port)

    def install(self):
        if not (shutil.which("redis-server") or os.path.exists("/usr/bin/redis-server")):
            apt_install(self.name, ["redis-server"])

    def start(self):
        os.makedirs(self.data_dir(), exist_ok=True)
        self._spawn(
            [
                shutil.which("redis-server") or "/usr/bin/redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--dir",
                self.data_dir(),
                "--save",
                "",
                "--appendonly",
                "no",
                "--daemonize",
                "no",
                "--protected-mode",
                "no",
            ]
        )


def nats_server_binary():
    return shutil.which("nats-server") or _find("/usr/bin/nats-server", "/usr/sbin/nats-server")


class Nats(Service):
    name = "nats"
    port = 4222
    env_var = "BEAM_SPARK_TEST_NATS"
    process_marker = "nats-server"

    def probe(self):
        return probe_nats(self.host, self.port)

    def install(self):
        if nats_server_binary() is None:
            apt_install(self.name, ["nats-server"])

    def start(self):
        os.makedirs(self.data_dir(), exist_ok=True)
        self._spawn([nats_server_binary(), "-a", "127.0.0.1", "-p", str(self.port), "-js", "-sd", self.data_dir()])


KAFKA_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>beam-spark-runner</groupId>
  <artifactId>kafka-broker</artifactId>
  <version>1</version>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_{scala}</artifactId><version>{kafka}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j-impl</artifactId><version>{log4j}</version></dependency>
  </dependencies>
</project>
"""

KAFKA_LOG4J = """Configuration:
  Appenders:
    Console:
      name: STDOUT
      PatternLayout:
        Pattern: "[%d] %p %m (%c)%n"
  Loggers:
    Root:
      level: WARN
      AppenderRef:
        - ref: STDOUT
"""


def kraft_properties(host, port, controller_port, data_dir):
    """A one-node KRaft broker's server.properties (broker and controller in
    one process) listening on host:port, its log in `data_dir`."""
    return "\n".join(
        [
            "process.roles=broker,controller",
            "node.id=1",
            "controller.quorum.voters=1@%s:%d" % (host, controller_port),
            "listeners=PLAINTEXT://%s:%d,CONTROLLER://%s:%d" % (host, port, host, controller_port),
            "advertised.listeners=PLAINTEXT://%s:%d" % (host, port),
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
            "log.dirs=" + data_dir,
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=true",
            # Tests produce messages stamped with event times months in the
            # past: time-based retention (7 days by default, checked every 5
            # minutes) would delete them at a moment no test controls.
            "log.retention.ms=-1",
            "",
        ]
    )


def kafka_libs():
    """The directory of the pinned Kafka broker's jars (present once fetched)."""
    return os.path.join(cache_dir(), "kafka", KAFKA_VERSION, "libs")


class Kafka(Service):
    name = "kafka"
    port = 9092
    controller_port = 9093
    env_var = "BEAM_SPARK_TEST_KAFKA"
    process_marker = "kafka.Kafka"

    def probe(self):
        return probe_kafka(self.host, self.port)

    def install(self):
        """Fetches org.apache.kafka:kafka_2.13 and its runtime dependencies
        from Maven Central into the cache (once: the directory is complete
        only when its marker file exists)."""
        libs = kafka_libs()
        if os.path.exists(os.path.join(libs, ".complete")):
            return
        java = shutil.which("java")
        if java is None:
            raise ServiceError("kafka: no `java` on the PATH (the broker needs Java 17)")
        mvn = shutil.which("mvn")
        if mvn is None:
            if _is_root():
                apt_install(self.name, ["maven"])
                mvn = shutil.which("mvn")
            else:
                raise ServiceError("kafka: Maven (`mvn`) is needed once to fetch Kafka's jars into %s" % libs)
        build = os.path.join(os.path.dirname(libs), "resolve")
        os.makedirs(build, exist_ok=True)
        with open(os.path.join(build, "pom.xml"), "w") as f:
            f.write(KAFKA_POM.format(scala=SCALA_VERSION, kafka=KAFKA_VERSION, log4j=LOG4J_VERSION))
        partial = libs + ".partial"
        shutil.rmtree(partial, ignore_errors=True)
        try:
            _run(
                self.name,
                [
                    mvn,
                    "-B",
                    "-q",
                    "-f",
                    os.path.join(build, "pom.xml"),
                    "dependency:copy-dependencies",
                    "-DincludeScope=runtime",
                    "-DoutputDirectory=" + partial,
                ],
            )
        except ServiceError as error:
            raise ServiceError(
                "%s\nKafka %s's jars (org.apache.kafka:kafka_%s:%s) could not be fetched from Maven Central into "
                "%s; with no network, copy them there from a machine that has them."
                % (error, KAFKA_VERSION, SCALA_VERSION, KAFKA_VERSION, libs)
            ) from None
        shutil.rmtree(libs, ignore_errors=True)
        os.rename(partial, libs)
        open(os.path.join(libs, ".complete"), "w").close()

    def _java(self, main, *args):
        return [
            "java",
            "-Xmx512m",
            "-Xms128m",
            "-Dlog4j2.configurationFile=" + os.path.join(self.dir, "log4j2.yaml"),
            "-cp",
            os.path.join(kafka_libs(), "*"),
            main,
            *args,
        ]

    def start(self):
        if _listening(self.host, self.controller_port):
            raise ServiceError("kafka: its controller port %s:%d is taken" % (self.host, self.controller_port))
        os.makedirs(self.data_dir(), exist_ok=True)
        config = os.path.join(self.dir, "server.properties")
        with open(config, "w") as f:
            f.write(kraft_properties(self.host, self.port, self.controller_port, self.data_dir()))
        with open(os.path.join(self.dir, "log4j2.yaml"), "w") as f:
            f.write(KAFKA_LOG4J)
        if not os.path.exists(os.path.join(self.data_dir(), "meta.properties")):
            _run(self.name, self._java("kafka.tools.StorageTool", "format", "-t", KAFKA_CLUSTER_ID, "-c", config))
        self._spawn(self._java("kafka.Kafka", config))
