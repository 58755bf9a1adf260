#!/usr/bin/env python3
"""Sends each TSBS query (JSON lines from scripts/tsbs-queries) to two InfluxQL servers and
compares their JSON answers: numbers within a relative 1e-9 (Go prints 2.0 as 2, so integers
and floats compare by value), series and rows in the expected server's order. Prints per query
type `equal` or `different` with the first difference; exits 1 when a type differs.

    scripts/tsbs_compare.py --queries Q.jsonl --db benchmark \
        --expected http://127.0.0.1:18286 --actual http://127.0.0.1:18186
"""

import argparse
import json
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections import OrderedDict

REL_TOL = 1e-9


def ask(base, query, db, timeout):
    """The server's parsed answer (status, body) to query's method and path with db added."""
    url = f"{base}{query['path']}&db={urllib.parse.quote(db)}"
    request = urllib.request.Request(url, method=query.get("method") or "GET", data=b"" if query.get("method") == "POST" else None)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as e:
        body = e.read()
        try:
            return e.code, json.loads(body)
        except ValueError:
            return e.code, body.decode(errors="replace")
    except (urllib.error.URLError, TimeoutError) as e:
        return None, f"request failed: {e}"


def numbers_equal(a, b):
    if a == b:
        return True
    scale = max(abs(a), abs(b))
    return abs(a - b) <= REL_TOL * scale


def first_difference(expected, actual, path="$"):
    """The path and both values of the first place the answers differ, or None."""
    if isinstance(expected, bool) or isinstance(actual, bool):
        return None if expected is actual else (path, expected, actual)
    if isinstance(expected, (int, float)) and isinstance(actual, (int, float)):
        return None if numbers_equal(expected, actual) else (path, expected, actual)
    if type(expected) is not type(actual):
        return (path, expected, actual)
    if isinstance(expected, dict):
        for key in list(expected) + [k for k in actual if k not in expected]:
            if key not in actual or key not in expected:
                return (f"{path}.{key}", expected.get(key, "<absent>"), actual.get(key, "<absent>"))
            found = first_difference(expected[key], actual[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        for i, (e, a) in enumerate(zip(expected, actual)):
            found = first_difference(e, a, f"{path}[{i}]")
            if found:
                return found
        if len(expected) != len(actual):
            i = min(len(expected), len(actual))
            return (
                f"{path} length",
                f"{len(expected)} (next: {short(expected[i]) if i < len(expected) else '-'})",
                f"{len(actual)} (next: {short(actual[i]) if i < len(actual) else '-'})",
            )
        return None
    return None if expected == actual else (path, expected, actual)


def short(value, limit=300):
    text = json.dumps(value) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[:limit] + "..."


def context_of(answer, path):
    """The name and tags of the series a difference is in, when the path names one."""
    try:
        result = int(path.split("results[")[1].split("]")[0])
        index = int(path.split(".series[")[1].split("]")[0])
        series = answer["results"][result]["series"][index]
        return f" (series {series.get('name')} {json.dumps(series.get('tags', {}))})"
    except (KeyError, IndexError, ValueError, TypeError, AttributeError):
        return ""


def series_count(answer):
    try:
        return sum(len(r.get("series", [])) for r in answer["results"])
    except (KeyError, TypeError, AttributeError):
        return "?"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--queries", required=True)
    parser.add_argument("--db", default="benchmark")
    parser.add_argument("--expected", required=True, help="InfluxDB's URL")
    parser.add_argument("--actual", required=True, help="sensordb's URL")
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args()

    by_type = OrderedDict()
    with open(args.queries) as f:
        for line in f:
            query = json.loads(line)
            by_type.setdefault(query["type"], []).append(query)

    differing = 0
    for query_type, queries in by_type.items():
        first = None
        equal = 0
        for n, query in enumerate(queries):
            expected_status, expected = ask(args.expected, query, args.db, args.timeout)
            actual_status, actual = ask(args.actual, query, args.db, args.timeout)
            found = None
            if expected_status != actual_status:
                found = ("HTTP status", expected_status, actual_status)
            else:
                found = first_difference(expected, actual)
            if found is None:
                equal += 1
            elif first is None:
                first = (n, query, found, expected, actual)
            if args.verbose:
                print(f"  {query_type} #{n}: {'equal' if found is None else 'different'}; series {series_count(expected)} / {series_count(actual)}")
        if first is None:
            print(f"{query_type:36} equal ({equal}/{len(queries)})")
            continue
        differing += 1
        n, query, (path, e, a), expected, actual = first
        print(f"{query_type:36} different ({equal}/{len(queries)} equal)")
        print(f"    query #{n}: {' '.join(query['query'].split())}")
        print(f"    first difference at {path}{context_of(expected, path)}")
        print(f"      influxdb: {short(e)}")
        print(f"      sensordb: {short(a)}")
        print(f"    series: influxdb {series_count(expected)}, sensordb {series_count(actual)}")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
