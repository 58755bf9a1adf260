"""Drives the InfluxDB 2.x Python client (`influxdb-client`, unchanged) against sensordb.

    python python_v2.py --url URL --bucket B --org O --writer TOKEN --reader TOKEN

Run by crates/sensordb/tests/real_clients/python_v2.rs, which then reads the points back through
sensordb's own query API. Prints, as its last line, one JSON object of what the client saw (return
values, batch callbacks, exception statuses and bodies); any unexpected exception fails the run.
"""

import argparse
import datetime
import json

from influxdb_client import InfluxDBClient, Point, WritePrecision
from influxdb_client.client.write_api import SYNCHRONOUS, WriteOptions
from influxdb_client.rest import ApiException

T = 1700000000000000000


def refused(call):
    """The ApiException a call raises, as {"status", "body", "message"}; None if it succeeds."""
    try:
        call()
    except ApiException as e:
        body = e.body.decode("utf-8", "replace") if isinstance(e.body, bytes) else e.body
        return {"status": e.status, "body": body, "message": str(e.message)}
    return None


def synchronous(args, seen):
    """SYNCHRONOUS writes: Point objects with every field type and precision, strings, dicts."""
    with InfluxDBClient(url=args.url, token=args.writer, org=args.org, timeout=30_000) as client:
        seen["ping"] = client.ping()
        seen["version"] = client.version()
        write_api = client.write_api(write_options=SYNCHRONOUS)
        write_api.write(args.bucket, args.org, [
            Point("v2_types").tag("host", "a").tag("region", "eu west")
            .field("temp", 21.5).field("count", 7).field("ok", True).field("note", 'say "hi" \\o/')
            .time(T + 1, WritePrecision.NS),
            Point("v2_types").tag("host", "a").tag("region", "eu west")
            .field("temp", -0.25).field("count", -(2**62)).field("ok", False).field("note", "")
            .time(T + 2, WritePrecision.NS),
        ])
        # Each precision in its own request (the client groups points by precision).
        for precision, time in [
            (WritePrecision.NS, 1700000000000000123),
            (WritePrecision.US, 1700000000000123),
            (WritePrecision.MS, 1700000000123),
            (WritePrecision.S, 1700000000),
        ]:
            write_api.write(
                bucket=args.bucket, org=args.org, write_precision=precision,
                record=Point("v2_precision").tag("precision", precision).field("v", 1.0).time(time, precision),
            )
        # A datetime, converted by the client.
        at = datetime.datetime(2023, 11, 14, 22, 13, 20, 123456, tzinfo=datetime.timezone.utc)
        write_api.write(args.bucket, args.org, Point("v2_precision").tag("precision", "datetime").field("v", 2.0).time(at))
        # Line-protocol strings (one, a list, bytes) and a dictionary, with the request's precision.
        write_api.write(args.bucket, args.org, "v2_lines,host=b value=1i 1700000000", write_precision=WritePrecision.S)
        write_api.write(args.bucket, args.org, ["v2_lines,host=b value=2i 1700000001", "v2_lines,host=b value=3i 1700000002"],
                        write_precision=WritePrecision.S)
        write_api.write(args.bucket, args.org, b"v2_lines,host=b value=4i 1700000003", write_precision=WritePrecision.S)
        write_api.write(args.bucket, args.org, {"measurement": "v2_lines", "tags": {"host": "b"},
                                                "fields": {"value": 5}, "time": 1700000004},
                        write_precision=WritePrecision.S)
        # A bad line among good ones: ApiException with the server's message; the good lines stay.
        seen["bad_line"] = refused(lambda: write_api.write(
            args.bucket, args.org, ["v2_bad value=1 %d" % T, "v2_bad value= %d" % (T + 1), "v2_bad value=3 %d" % (T + 2)]))
        seen["no_bucket"] = refused(lambda: write_api.write("", args.org, "v2_bad value=9 %d" % (T + 9)))

    with InfluxDBClient(url=args.url, token=args.writer, org=args.org, enable_gzip=True, timeout=30_000) as client:
        client.write_api(write_options=SYNCHRONOUS).write(
            args.bucket, args.org, [Point("v2_gzip").field("v", i / 4).time(T + i) for i in range(3)])

    with InfluxDBClient(url=args.url, token=args.reader, org=args.org, timeout=30_000) as client:
        seen["reader_write"] = refused(
            lambda: client.write_api(write_options=SYNCHRONOUS).write(args.bucket, args.org, "v2_auth v=1 %d" % T))
    with InfluxDBClient(url=args.url, token="not-a-token", org=args.org, timeout=30_000) as client:
        seen["wrong_write"] = refused(
            lambda: client.write_api(write_options=SYNCHRONOUS).write(args.bucket, args.org, "v2_auth v=1 %d" % T))


def batching(args, seen):
    """The default (batching) write API: batches of at most 3, flushed when full, after the flush
    interval and on close(). (The interval also bounds how long the interpreter waits at exit for
    the client's window timer.)"""
    successes, errors = [], []
    options = WriteOptions(batch_size=3, flush_interval=2_000, max_retries=0)
    with InfluxDBClient(url=args.url, token=args.writer, org=args.org, timeout=30_000) as client:
        with client.write_api(
            write_options=options,
            success_callback=lambda conf, data: successes.append(data.decode() if isinstance(data, bytes) else data),
            error_callback=lambda conf, data, e: errors.append({"status": getattr(e, "status", None), "message": str(e)}),
        ) as write_api:
            for i in range(4):
                write_api.write(args.bucket, args.org, Point("v2_batched").tag("kind", "point").field("n", i).time(T + i))
            for i in range(3):
                write_api.write(args.bucket, args.org, "v2_batched,kind=line n=%di %d" % (i, T + i))
    seen["batch_successes"] = successes
    seen["batch_errors"] = errors

    # A batch holding a bad line reaches the error callback with the server's answer.
    failures = []
    with InfluxDBClient(url=args.url, token=args.writer, org=args.org, timeout=30_000) as client:
        with client.write_api(
            write_options=options,
            error_callback=lambda conf, data, e: failures.append({"status": getattr(e, "status", None),
                                                                  "message": str(getattr(e, "message", e))}),
        ) as write_api:
            write_api.write(args.bucket, args.org, ["v2_batched_bad value=1 %d" % T, "v2_batched_bad value= %d" % (T + 1)])
    seen["batch_failures"] = failures


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--bucket", required=True)
    parser.add_argument("--org", required=True)
    parser.add_argument("--writer", required=True)
    parser.add_argument("--reader", required=True)
    args = parser.parse_args()
    seen = {}
    synchronous(args, seen)
    batching(args, seen)
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
