"""`beam-spark-job-server` (also `python -m beam_spark_runner.job_server`):
a Beam job service that runs the jobs it receives on Spark.

    beam-spark-job-server --port 8099 --spark_master spark://host:7077
    python my_pipeline.py --runner=PortableRunner --job_endpoint=localhost:8099 \\
        --environment_type=LOOPBACK

The SparkSession starts with the server (its options: `--spark_master`,
`--spark_conf`, `--spark_app_name`) and every job runs on it. The server
listens on `--host` only (default localhost: give the edge node's address or
0.0.0.0 deliberately, docs/deployment.md). SIGTERM or Ctrl-C cancels the
running jobs and stops it.
"""

import argparse
import logging
import signal
import sys
import threading

from beam_spark_runner.options import DEFAULT_MASTER, parse_spark_conf

_LOG = logging.getLogger("beam_spark_runner.job_server")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="beam-spark-job-server", description="A Beam job service (Job API over gRPC) running jobs on Spark."
    )
    parser.add_argument("--host", default="localhost", help="Address to listen on (default: localhost).")
    parser.add_argument("--port", type=int, default=8099, help="Job API port (default 8099; 0 picks a free one).")
    parser.add_argument(
        "--artifacts_dir",
        default=None,
        help="Where clients' staged artifacts are kept, one directory per job, removed when the job "
        "ends (default: a temporary directory).",
    )
    parser.add_argument("--spark_master", default=DEFAULT_MASTER, help="Spark master URL (default %(default)s).")
    parser.add_argument(
        "--spark_conf", action="append", default=[], metavar="KEY=VALUE", help="A Spark setting; repeatable."
    )
    parser.add_argument("--spark_app_name", default="beam-spark-job-server", help="Spark application name.")
    parser.add_argument("--log_level", default="INFO", help="The server's log level (default INFO).")
    args = parser.parse_args(argv)
    try:
        parse_spark_conf(args.spark_conf)
    except ValueError as e:
        parser.error(str(e))
    return args


def start_session(args):
    from beam_spark_runner.session import ensure_python_workers_match_driver, merged_spark_conf, new_session

    ensure_python_workers_match_driver(parse_spark_conf(args.spark_conf))
    # Jobs of different clients share the executors (each batch run is its
    # own pool) instead of queueing behind each other; --spark_conf wins.
    conf = dict(merged_spark_conf(parse_spark_conf(args.spark_conf), args.spark_master))
    conf.setdefault("spark.scheduler.mode", "FAIR")
    return new_session(args.spark_master, args.spark_app_name, conf)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # force: importing Beam already gave the root logger a handler (a
    # warning logged at import), which would keep this format and level out.
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s", force=True
    )
    from beam_spark_runner.job_service.servicer import SparkJobServicer

    session = start_session(args)
    servicer = SparkJobServicer(
        staging_dir=args.artifacts_dir,
        spark_session=session,
        host=args.host,
        restart_session=lambda: start_session(args),
    )
    try:
        port = servicer.start_grpc_server(args.port)
    except OSError as e:
        session.stop()
        print("beam-spark-job-server: %s" % e, file=sys.stderr, flush=True)
        return 2
    # The line scripts wait for (the port is the real one when --port=0).
    print("beam-spark-job-server listening on %s:%d" % (args.host, port), flush=True)
    stopped = threading.Event()

    def stop(signum, frame):
        stopped.set()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while not stopped.wait(1):
        pass
    _LOG.info("Stopping: cancelling running jobs")
    servicer.stop()
    session.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
