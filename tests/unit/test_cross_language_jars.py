"""The jar cache (maven_jars.py), the runner's expansion services' launcher
jars and their choice (cross_language/expansion_services.py), and the
committed jar of the runner's own Java expansions."""

import os
import subprocess
import sys
import zipfile

import pytest
from apache_beam.io.kafka import ReadFromKafka
from apache_beam.transforms.external import JavaJarExpansionService

from beam_spark_runner import maven_jars
from beam_spark_runner.cross_language import expansion_services, java_sdk

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = maven_jars.JarSet("test-set-1.0", (maven_jars.MavenArtifact("org.example", "thing", "1.0"),))


def test_a_set_neither_cached_nor_fetchable_names_the_artifacts_and_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv(maven_jars.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    with pytest.raises(maven_jars.MissingJars) as e:
        maven_jars.resolve(SMALL)
    message = str(e.value)
    assert "org.example:thing:1.0" in message
    assert os.path.join(str(tmp_path), "maven", "test-set-1.0") in message
    assert "Maven" in message and maven_jars.CACHE_ENV in message


def test_a_completed_cache_is_used_without_maven_or_network(tmp_path, monkeypatch):
    monkeypatch.setenv(maven_jars.CACHE_ENV, str(tmp_path))
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    directory = tmp_path / "maven" / "test-set-1.0"
    directory.mkdir(parents=True)
    (directory / "thing-1.0.jar").write_bytes(b"jar")
    (directory / "dep-2.jar").write_bytes(b"jar")
    (directory / "jars.txt").write_text("dep-2.jar\nthing-1.0.jar\n")
    assert maven_jars.resolve(SMALL) == (str(directory / "dep-2.jar"), str(directory / "thing-1.0.jar"))


def test_a_cache_missing_a_listed_jar_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setenv(maven_jars.CACHE_ENV, str(tmp_path))
    directory = tmp_path / "maven" / "test-set-1.0"
    directory.mkdir(parents=True)
    (directory / "jars.txt").write_text("gone.jar\n")
    assert maven_jars.cached_jars(SMALL) is None


def test_a_failing_maven_run_names_the_artifacts_and_what_maven_said(tmp_path, monkeypatch):
    monkeypatch.setenv(maven_jars.CACHE_ENV, str(tmp_path))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "mvn"
    fake.write_text("#!/bin/sh\necho 'Could not resolve org.example:thing:jar:1.0'\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    with pytest.raises(maven_jars.MissingJars, match=r"(?s)org.example:thing:1.0.*exit code 1.*Could not resolve"):
        maven_jars.resolve(SMALL)
    assert maven_jars.cached_jars(SMALL) is None


def test_the_harness_set_is_the_environments_release():
    assert java_sdk.java_version_of("apache/beam_java17_sdk:2.71.0") == "2.71.0"
    jars = java_sdk.harness_jars("2.71.0")
    assert {(a.artifact, a.version) for a in jars.artifacts if a.group == "org.apache.beam"} >= {
        ("beam-sdks-java-harness", "2.71.0"),
        ("beam-sdks-java-core", "2.71.0"),
    }
    with pytest.raises(ValueError, match="names no Beam version"):
        java_sdk.java_version_of("apache/beam_java17_sdk:latest")


def test_the_launcher_manifest_names_every_jar_in_lines_of_at_most_72_bytes(tmp_path):
    jars = [str(tmp_path / ("a-very-long-directory-name-%02d" % i) / "some-artifact-1.2.3.jar") for i in range(30)]
    launcher = tmp_path / "launcher.jar"
    expansion_services._write_launcher(str(launcher), expansion_services._manifest(jars))
    with zipfile.ZipFile(launcher) as jar:
        manifest = jar.read("META-INF/MANIFEST.MF")
    lines = manifest.split(b"\r\n")
    assert all(len(line) <= 72 for line in lines)
    unfolded = manifest.replace(b"\r\n ", b"").decode()
    assert "Main-Class: " + expansion_services.EXPANSION_SERVICE_MAIN in unfolded
    class_path = [line for line in unfolded.split("\r\n") if line.startswith("Class-Path: ")][0].split()[1:]
    assert class_path == ["file:" + j for j in jars]


def test_beams_default_expansion_service_is_replaced_and_a_users_choice_is_not(tmp_path, monkeypatch):
    launcher = tmp_path / "launcher.jar"
    launcher.write_bytes(b"")
    monkeypatch.setattr(expansion_services.JavaExpansionService, "launcher_jar", lambda self: str(launcher))
    default = ReadFromKafka(consumer_config={"bootstrap.servers": "x:1"}, topics=["t"])
    replacement = expansion_services.runner_expansion_service(default)
    assert isinstance(replacement, JavaJarExpansionService)
    assert replacement.path_to_jar == str(launcher)

    by_address = ReadFromKafka(consumer_config={"bootstrap.servers": "x:1"}, topics=["t"], expansion_service="h:1")
    assert expansion_services.runner_expansion_service(by_address) is None
    own_jar = JavaJarExpansionService(str(tmp_path / "mine.jar"))
    by_jar = ReadFromKafka(consumer_config={"bootstrap.servers": "x:1"}, topics=["t"], expansion_service=own_jar)
    assert expansion_services.runner_expansion_service(by_jar) is None


def test_the_registry_covers_kafka_jdbc_and_sql():
    assert set(expansion_services.known_targets()) == {
        "sdks:java:io:expansion-service:shadowJar",
        "sdks:java:extensions:schemaio-expansion-service:shadowJar",
        "sdks:java:extensions:sql:expansion-service:shadowJar",
    }


def test_the_committed_xlang_jar_is_what_java_sources_build(tmp_path):
    """tools/build_xlang_jar.sh builds the same bytes from java/xlang (the
    Beam Java jars it compiles against come through the jar cache)."""
    built = tmp_path / "xlang.jar"
    subprocess.run(
        ["sh", os.path.join(ROOT, "tools", "build_xlang_jar.sh")],
        env=dict(os.environ, PYTHON=sys.executable, OUT=str(built)),
        check=True,
        capture_output=True,
    )
    with open(expansion_services.RUNNER_XLANG_JAR, "rb") as committed:
        assert built.read_bytes() == committed.read(), "run tools/build_xlang_jar.sh and commit the jar"


def test_the_java_harness_gets_the_jobs_explicit_options_under_beams_option_urns():
    """A Java DoFn's PipelineOptions are the job's: the harness reads them
    from PIPELINE_OPTIONS, as Beam's boot programs pass them."""
    import json

    from apache_beam.options.pipeline_options import PipelineOptions

    options = PipelineOptions(["--job_name=counts", "--fake_option=not fake anymore"])
    passed = json.loads(java_sdk.harness_pipeline_options(options))
    assert passed["beam:option:job_name:v1"] == "counts"
    assert passed["beam:option:fake_option:v1"] == "not fake anymore"
    assert all(k.startswith("beam:option:") and k.endswith(":v1") for k in passed)
    assert "beam:option:runner:v1" not in passed  # defaults are the harness's own


def test_the_artifact_of_a_classifier_names_it_and_asks_maven_for_it():
    artifact = maven_jars.MavenArtifact("org.apache.beam", "beam-sdks-java-core", "2.65.0", classifier="tests")
    assert str(artifact) == "org.apache.beam:beam-sdks-java-core:2.65.0:tests"
    pom = maven_jars._pom(maven_jars.JarSet("x", (artifact,)))
    assert "<classifier>tests</classifier>" in pom
