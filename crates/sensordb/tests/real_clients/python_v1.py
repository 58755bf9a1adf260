"""Drives the InfluxDB 1.x Python client (`influxdb`, unchanged) against sensordb.

    python python_v1.py open  --host H --port P --db DB
    python python_v1.py auth  --host H --port P --db DB --writer TOKEN --reader TOKEN

Run by crates/sensordb/tests/real_clients/python_v1.rs, which then reads the points back through
sensordb's own query API. Prints, as its last line, one JSON object of what the client saw (return
values, exception classes, status codes and messages); any unexpected exception fails the run.
"""

import argparse
import datetime
import json

from influxdb import InfluxDBClient
from influxdb.exceptions import InfluxDBClientError


def refused(call):
    """The InfluxDBClientError a call raises, as {"code", "content"}; None if it succeeds."""
    try:
        call()
    except InfluxDBClientError as e:
        return {"code": e.code, "content": e.content}
    return None


def open_server(args):
    """No tokens configured: every field type, every precision, batches, gzip, bad writes."""
    seen = {}
    client = InfluxDBClient(host=args.host, port=args.port, database=args.db, timeout=30)
    seen["ping"] = client.ping()
    client.create_database(args.db)
    seen["databases"] = client.get_list_database()

    # JSON points (the client writes line protocol from them): tags that need escaping, and
    # float, integer, boolean and string fields; integer times in nanoseconds (no precision).
    client.write_points([
        {
            "measurement": "v1_types",
            "tags": {"host": "a", "region": "eu west"},
            "fields": {"temp": 21.5, "count": 7, "ok": True, "note": 'say "hi" \\o/'},
            "time": 1700000000000000001,
        },
        {
            "measurement": "v1_types",
            "tags": {"host": "a", "region": "eu west"},
            "fields": {"temp": -0.25, "count": -(2**62), "ok": False, "note": ""},
            "time": 1700000000000000002,
        },
    ])

    # Every precision the client accepts, with integer times in that unit...
    for precision, time in [
        ("n", 1700000000000000123),
        ("u", 1700000000000123),
        ("ms", 1700000000123),
        ("s", 1700000000),
        ("m", 28333333),
        ("h", 472222),
    ]:
        client.write_points(
            [{"measurement": "v1_precision", "tags": {"precision": precision}, "fields": {"v": 1.0}, "time": time}],
            time_precision=precision,
        )
    # ...and a datetime, which the client converts to the precision asked for.
    at = datetime.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=datetime.timezone.utc)
    client.write_points(
        [{"measurement": "v1_precision", "tags": {"precision": "ms_datetime"}, "fields": {"v": 2.0}, "time": at}],
        time_precision="ms",
    )

    # Line-protocol strings.
    client.write_points(
        ["v1_lines,host=b value=1 1700000000000000000", "v1_lines,host=b value=2 1700000001000000000"],
        protocol="line",
    )

    # Five points in batches of two (three requests), with the client's global tags.
    client.write_points(
        [{"measurement": "v1_batched", "fields": {"n": i}, "time": 1700000000000000000 + i} for i in range(5)],
        tags={"site": "x"},
        batch_size=2,
    )

    # A gzip-compressing client.
    gzip_client = InfluxDBClient(host=args.host, port=args.port, database=args.db, gzip=True, timeout=30)
    gzip_client.write_points(
        [{"measurement": "v1_gzip", "fields": {"v": float(i) / 4}, "time": 1700000000000000000 + i} for i in range(3)]
    )

    # A body with a bad line: the client raises, the valid lines are stored (partial write).
    seen["bad_line"] = refused(lambda: client.write_points(
        [
            "v1_bad,host=c value=1 1700000000000000000",
            "v1_bad,host=c value= 1700000000000000001",
            "v1_bad,host=c value=3 1700000000000000002",
        ],
        protocol="line",
    ))
    # A field whose type differs from the stored series.
    seen["type_conflict"] = refused(lambda: client.write_points(
        [{"measurement": "v1_types", "tags": {"host": "a", "region": "eu west"}, "fields": {"count": 1.5},
          "time": 1700000000000000009}]
    ))
    # InfluxQL reads through the client's own result parsing; a query that does not parse is
    # refused with its position.
    result = client.query("SELECT \"count\", \"note\" FROM v1_types WHERE \"host\" = 'a'", epoch="ns")
    seen["select"] = list(result.get_points())
    seen["bad_query"] = refused(lambda: client.query("SELECT * FROMM v1_types"))
    return seen


def auth(args):
    """Tokens configured: the client's username/password (HTTP Basic) and the u/p parameters."""
    seen = {}
    point = lambda via, value, time: [  # noqa: E731
        {"measurement": "v1_auth", "tags": {"via": via}, "fields": {"value": value}, "time": time}
    ]
    anonymous = InfluxDBClient(host=args.host, port=args.port, database=args.db, timeout=30)
    seen["anonymous_ping"] = anonymous.ping()
    seen["anonymous_write"] = refused(lambda: anonymous.write_points(point("anonymous", 0, 1700000000000000000)))
    seen["anonymous_create"] = refused(lambda: anonymous.create_database(args.db))

    writer = InfluxDBClient(host=args.host, port=args.port, username="sensor", password=args.writer,
                            database=args.db, timeout=30)
    writer.create_database(args.db)
    writer.write_points(point("basic", 1, 1700000000000000001) + point("basic", 2, 1700000000000000002))
    seen["writer_databases"] = writer.get_list_database()

    reader = InfluxDBClient(host=args.host, port=args.port, username="sensor", password=args.reader,
                            database=args.db, timeout=30)
    seen["reader_write"] = refused(lambda: reader.write_points(point("reader", 9, 1700000000000000009)))
    seen["reader_databases"] = reader.get_list_database()

    wrong = InfluxDBClient(host=args.host, port=args.port, username="sensor", password="not-a-token",
                           database=args.db, timeout=30)
    seen["wrong_write"] = refused(lambda: wrong.write_points(point("wrong", 9, 1700000000000000009)))

    # The 1.x query parameters u and p, through the client's own write().
    anonymous.write("v1_auth,via=query_params value=3i 1700000000000000003",
                    params={"db": args.db, "u": "sensor", "p": args.writer}, protocol="line")
    seen["reader_params_write"] = refused(lambda: anonymous.write(
        "v1_auth,via=reader_params value=9i 1700000000000000009",
        params={"db": args.db, "u": "sensor", "p": args.reader}, protocol="line"))
    return seen


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("scenario", choices=["open", "auth"])
    parser.add_argument("--host", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--db", required=True)
    parser.add_argument("--writer")
    parser.add_argument("--reader")
    args = parser.parse_args()
    seen = open_server(args) if args.scenario == "open" else auth(args)
    print(json.dumps(seen))


if __name__ == "__main__":
    main()
