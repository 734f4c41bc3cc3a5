#!/bin/sh
# tools/services.sh up|down|status [SERVICE ...]: the servers the test suite
# uses (PostgreSQL, MariaDB, Redis, NATS JetStream, Kafka) on loopback, and
# Chromium for the Spark UI test. See tools/services.py for what each does,
# where it keeps data and downloads, and the environment variables that point
# the tests at servers you already run.
exec python3 "$(dirname "$0")/services.py" "$@"
