"""`python -m beam_spark_runner.cross_language` prints the `--beam_services`
option that makes a PortableRunner client expand Beam's cross-language
transforms (Kafka, JDBC, SQL) in the runner's expansion services, as
SparkRunner does in-process (resolving their jars on first use)."""

import json

from beam_spark_runner.cross_language.expansion_services import beam_services


def main():
    print("--beam_services=" + json.dumps(beam_services(), sort_keys=True))


if __name__ == "__main__":
    main()
