#!/usr/bin/env python3
"""Helper of scripts/read-bench: makes the data, loads it into the servers, times the reads and
checks that the servers' answers agree. Standard library only.

Data (one set, loaded into every server the same way, in time order as live sensors send it):
  m,sensor=s00 value=...      1 Hz over the 7 days [S, E)            604,800 points
  m,sensor=s01..s49 value=... every 10 s over the same 7 days        49 x 60,480 points
  fleet,sensor=f00000..f09999 value=...  every 10 s over [E - 1 h, E) 10,000 x 360 points
E is the newest epoch-week boundary (Thursday 00:00 UTC) at least an hour before now, so S and
E are multiples of 604.8 s and 7 days are exactly 1,000 buckets of 604,800 ms on every server.
Values have two decimals (a daily sine plus noise), exact in every server's float storage.

  read_bench.py load --start S --end E URL...        # URL: http://host:port/write?db=bench...
  read_bench.py measure --start S --end E --sensordb URL --influxdb URL --victoriametrics URL
      --phase NAME --runs 9 --warmup 2 [--sensordb-pid PID --cpu-runs 30] --out FILE.json
  read_bench.py report FILE.json...                  # the table of medians over phases
"""

import argparse
import http.client
import json
import math
import os
import random
import statistics
import sys
import threading
import time
import urllib.parse

WEEK = 7 * 86400
BUCKETS = 1000
STEP_MS = WEEK * 1000 // BUCKETS  # 604,800 ms
DENSE = "s00"
SPARSE_SENSORS = 49
SPARSE_EVERY = 10
FLEET = 10_000
FLEET_EVERY = 10
FLEET_SECONDS = 3600
BATCH_LINES = 10_000


def bodies(start, end, seed):
    """The line-protocol bodies, time-ordered, BATCH_LINES lines each."""
    rng = random.Random(seed)
    lines = []

    def value(t, phase):
        return round(20.0 + 5.0 * math.sin(2 * math.pi * (t % 86400) / 86400 + phase) + rng.uniform(-0.5, 0.5), 2)

    fleet_from = end - FLEET_SECONDS
    for t in range(start, end):
        ns = f"{t}000000000"
        lines.append(f"m,sensor={DENSE} value={value(t, 0.0)} {ns}")
        if t % SPARSE_EVERY == 0:
            for i in range(1, SPARSE_SENSORS + 1):
                lines.append(f"m,sensor=s{i:02d} value={value(t, i * 0.1)} {ns}")
        if t >= fleet_from and t % FLEET_EVERY == 0:
            for i in range(FLEET):
                lines.append(f"fleet,sensor=f{i:05d} value={value(t, i * 0.001)} {ns}")
        if len(lines) >= BATCH_LINES:
            yield ("\n".join(lines) + "\n").encode()
            lines = []
    if lines:
        yield ("\n".join(lines) + "\n").encode()


def post_all(url, chunks, workers=2):
    """Posts every chunk to url over `workers` kept-alive connections; fails on any non-2xx."""
    parsed = urllib.parse.urlsplit(url)
    target = parsed.path + ("?" + parsed.query if parsed.query else "")
    errors = []

    def work(part):
        conn = http.client.HTTPConnection(parsed.hostname, parsed.port, timeout=300)
        for body in part:
            conn.request("POST", target, body=body, headers={"Content-Type": "text/plain"})
            response = conn.getresponse()
            text = response.read()
            if response.status // 100 != 2:
                errors.append(f"{url}: {response.status} {text[:300]!r}")
                return
        conn.close()

    threads = [threading.Thread(target=work, args=(chunks[i::workers],)) for i in range(workers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise SystemExit("load failed: " + errors[0])


def cmd_load(args):
    t0 = time.perf_counter()
    chunks = list(bodies(args.start, args.end, args.seed))
    lines = sum(c.count(b"\n") for c in chunks)
    size = sum(len(c) for c in chunks)
    print(f"data: {lines:,} lines, {size / 1e6:.0f} MB in {len(chunks)} bodies, made in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    for url in args.urls:
        t0 = time.perf_counter()
        post_all(url, chunks)
        print(f"loaded {url} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)


class Client:
    """One kept-alive connection; times each request from sending to the last body byte."""

    def __init__(self, base):
        parsed = urllib.parse.urlsplit(base)
        self.host, self.port = parsed.hostname, parsed.port
        self.conn = http.client.HTTPConnection(self.host, self.port, timeout=120)

    def get(self, path):
        t0 = time.perf_counter()
        self.conn.request("GET", path)
        response = self.conn.getresponse()
        body = response.read()
        elapsed = time.perf_counter() - t0
        if response.status != 200:
            raise RuntimeError(f"{self.host}:{self.port}{path[:200]}: {response.status} {body[:300]!r}")
        return elapsed, body


def q(text):
    return urllib.parse.quote(text, safe="")


def requests_of(args):
    """(figure, server, path) of every timed read."""
    s, e = args.start, args.end
    day_from = e - 86400
    a_query = (
        f'SELECT min("value"),max("value"),mean("value") FROM "m" WHERE "sensor" = \'{DENSE}\' '
        f"AND time >= {s * 1000}ms AND time < {e * 1000}ms GROUP BY time({STEP_MS}ms)"
    )
    b_query = f'SELECT "value" FROM "m" WHERE "sensor" = \'{DENSE}\' AND time >= {day_from * 1000}ms AND time < {e * 1000}ms'
    c_query = 'SELECT last("value") FROM "fleet" GROUP BY *'
    # VictoriaMetrics evaluates a rollup at t over (t - window, t]: evaluated at the end of each
    # bucket with `offset 1ms` it covers [bucket start, bucket end) at its millisecond resolution,
    # the InfluxQL bucket.
    vm_a = q(f'rollup(m_value{{sensor="{DENSE}"}}[{STEP_MS}ms] offset 1ms)')
    vm_b = q('m_value{sensor="%s"}' % DENSE)
    vm_a_range = f"start={s + STEP_MS / 1000:.3f}&end={e}&step={STEP_MS}ms"
    return [
        ("A", "sensordb /query", "sensordb", f"/query?db=bench&epoch=ms&q={q(a_query)}"),
        ("A", "sensordb /sensordb/graph (M4)", "sensordb",
         f"/sensordb/graph?db=bench&measurement=m&field=value&tag.sensor={DENSE}&from={s}000000000&to={e * 1_000_000_000 - 1}&width={BUCKETS}"),
        ("A", "InfluxDB /query", "influxdb", f"/query?db=bench&epoch=ms&q={q(a_query)}"),
        ("A", "VictoriaMetrics query_range nocache=1", "victoriametrics", f"/api/v1/query_range?query={vm_a}&{vm_a_range}&nocache=1"),
        ("A", "VictoriaMetrics query_range (its cache)", "victoriametrics", f"/api/v1/query_range?query={vm_a}&{vm_a_range}"),
        ("B", "sensordb /query", "sensordb", f"/query?db=bench&epoch=ms&q={q(b_query)}"),
        ("B", "sensordb /sensordb/points", "sensordb",
         f"/sensordb/points?db=bench&measurement=m&field=value&tag.sensor={DENSE}&from={day_from}000000000&to={e}000000000"),
        ("B", "InfluxDB /query", "influxdb", f"/query?db=bench&epoch=ms&q={q(b_query)}"),
        ("B", "VictoriaMetrics /api/v1/export", "victoriametrics",
         f"/api/v1/export?match[]={vm_b}&start={day_from}&end={e - 1}"),
        ("C", "sensordb /query", "sensordb", f"/query?db=bench&epoch=ms&q={q(c_query)}"),
        ("C", "InfluxDB /query", "influxdb", f"/query?db=bench&epoch=ms&q={q(c_query)}"),
        ("C", "VictoriaMetrics /api/v1/query nocache=1", "victoriametrics",
         f"/api/v1/query?query={q('last_over_time(fleet_value[1h])')}&time={e}&nocache=1"),
        # What a Prometheus dashboard sends for "current value": the newest sample within the
        # default 5-minute lookback.
        ("C", "VictoriaMetrics /api/v1/query, bare selector", "victoriametrics", f"/api/v1/query?query=fleet_value&time={e}&nocache=1"),
    ]


def influx_rows(body):
    result = json.loads(body)["results"][0]
    if "error" in result:
        raise RuntimeError(result["error"])
    return result.get("series", [])


def close(a, b):
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def check_a(answers, args):
    """Every bucket of every server against InfluxDB's."""
    lines = []
    series = influx_rows(answers["A", "InfluxDB /query"])
    reference = [(row[0], row[1], row[2], row[3]) for row in series[0]["values"]]
    lines.append(f"A InfluxDB: {len(reference)} buckets")
    ours = [(r[0], r[1], r[2], r[3]) for r in influx_rows(answers["A", "sensordb /query"])[0]["values"]]
    bad = [i for i, (x, y) in enumerate(zip(reference, ours)) if x[0] != y[0] or not all(close(a, b) for a, b in zip(x[1:], y[1:]))]
    lines.append(f"A sensordb /query: {len(ours)} buckets, {len(reference) - len(bad) if len(ours) == len(reference) else 0} equal to InfluxDB's"
                 + (f"; first difference at bucket {bad[0]}: {reference[bad[0]]} vs {ours[bad[0]]}" if bad else ""))
    vm = json.loads(answers["A", "VictoriaMetrics query_range nocache=1"])["data"]["result"]
    by_rollup = {r["metric"].get("rollup"): {round(float(t) * 1000) - STEP_MS: float(v) for t, v in r["values"]} for r in vm}
    equal = 0
    first_bad = None
    for t, lo, hi, mean in reference:
        got = (by_rollup.get("min", {}).get(t), by_rollup.get("max", {}).get(t), by_rollup.get("avg", {}).get(t))
        if all(close(a, b) for a, b in zip((lo, hi, mean), got)):
            equal += 1
        elif first_bad is None:
            first_bad = (t, (lo, hi, mean), got)
    counts = {k: len(v) for k, v in by_rollup.items()}
    lines.append(f"A VictoriaMetrics: points per rollup {counts}, {equal} buckets equal to InfluxDB's"
                 + (f"; first difference {first_bad}" if first_bad else ""))
    graph = json.loads(answers["A", "sensordb /sensordb/graph (M4)"])["series"]
    points = graph[0]["points"] if graph else []
    values = [p[1] for p in points]
    overall = (min(r[1] for r in reference), max(r[2] for r in reference))
    ends = (points[0][0], points[-1][0]) if points else None
    lines.append(f"A sensordb graph: {len(points)} M4 points, overall min/max {(min(values), max(values)) if values else None} "
                 f"(InfluxDB's {overall}), first/last time {ends} (expected {(args.start * 1000, (args.end - 1) * 1000)})")
    ok = len(ours) == len(reference) == BUCKETS and not bad and equal == BUCKETS and values and (min(values), max(values)) == overall
    return ok, lines


def check_b(answers):
    lines = []
    summaries = {}
    rows = influx_rows(answers["B", "InfluxDB /query"])[0]["values"]
    summaries["InfluxDB /query"] = [(r[0], r[1]) for r in rows]
    rows = influx_rows(answers["B", "sensordb /query"])[0]["values"]
    summaries["sensordb /query"] = [(r[0], r[1]) for r in rows]
    points = json.loads(answers["B", "sensordb /sensordb/points"])["series"][0]["points"]
    summaries["sensordb /sensordb/points"] = [(p[0] // 1_000_000, p[1]) for p in points]
    export = json.loads(answers["B", "VictoriaMetrics /api/v1/export"].splitlines()[0])
    summaries["VictoriaMetrics /api/v1/export"] = list(zip(export["timestamps"], export["values"]))
    reference = summaries["InfluxDB /query"]
    ok = True
    for name, got in summaries.items():
        same = len(got) == len(reference) and all(a[0] == b[0] and close(a[1], b[1]) for a, b in zip(got, reference))
        ok &= same and len(got) == 86400
        lines.append(f"B {name}: {len(got)} points, first {got[0] if got else None}, last {got[-1] if got else None}, "
                     f"{'every point equal to' if same else 'DIFFERENT from'} InfluxDB's")
    return ok, lines


def check_c(answers):
    lines = []
    maps = {}
    for name in ("InfluxDB /query", "sensordb /query"):
        maps[name] = {s["tags"]["sensor"]: (s["values"][0][0], s["values"][0][1]) for s in influx_rows(answers["C", name])}
    vm = json.loads(answers["C", "VictoriaMetrics /api/v1/query nocache=1"])["data"]["result"]
    # last_over_time answers at the query's time, not the point's: compare values only.
    maps["VictoriaMetrics /api/v1/query nocache=1"] = {r["metric"]["sensor"]: (None, float(r["value"][1])) for r in vm}
    vm = json.loads(answers["C", "VictoriaMetrics /api/v1/query, bare selector"])["data"]["result"]
    maps["VictoriaMetrics /api/v1/query, bare selector"] = {r["metric"]["sensor"]: (None, float(r["value"][1])) for r in vm}
    reference = maps["InfluxDB /query"]
    ok = True
    for name, got in maps.items():
        same = got.keys() == reference.keys() and all(
            close(got[k][1], reference[k][1]) and (got[k][0] is None or got[k][0] == reference[k][0]) for k in reference)
        ok &= same and len(got) == FLEET
        sample = sorted(got)[:2]
        lines.append(f"C {name}: {len(got)} latest values, e.g. {[(k, got[k]) for k in sample]}, "
                     f"{'all equal to' if same else 'DIFFERENT from'} InfluxDB's")
    return ok, lines


def cmd_measure(args):
    bases = {"sensordb": args.sensordb, "influxdb": args.influxdb, "victoriametrics": args.victoriametrics}
    clients = {name: Client(url) for name, url in bases.items()}
    reads = requests_of(args)
    # Round-robin: every read once per round, so drift in the shared machine's load falls on
    # every server alike instead of on whichever was being timed.
    for figure, name, server, path in reads:
        for _ in range(args.warmup):
            clients[server].get(path)
    times = {(figure, name): [] for figure, name, _, _ in reads}
    answers = {}
    for _ in range(args.runs):
        for figure, name, server, path in reads:
            elapsed, body = clients[server].get(path)
            times[figure, name].append(elapsed * 1000)
            answers[figure, name] = body
    results = []
    for figure, name, _, _ in reads:
        ms = times[figure, name]
        size = len(answers[figure, name])
        results.append({"phase": args.phase, "figure": figure, "read": name, "median_ms": statistics.median(ms),
                        "min_ms": min(ms), "max_ms": max(ms), "bytes": size, "runs": args.runs})
        print(f"{args.phase:14} {figure} {name:46} median {statistics.median(ms):9.2f} ms "
              f"(min {min(ms):.2f}, max {max(ms):.2f}), {size:,} bytes", file=sys.stderr)
    if args.sensordb_pid:
        # The server's own cost, free of waiting for a CPU on a shared machine: its CPU time
        # (every thread, /proc/PID/stat utime + stime) over --cpu-runs requests back to back.
        tick = os.sysconf("SC_CLK_TCK")

        def cpu_seconds():
            with open(f"/proc/{args.sensordb_pid}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / tick

        for result, (_, _, server, path) in zip(results, reads):
            if server != "sensordb":
                continue
            before = cpu_seconds()
            t0 = time.perf_counter()
            for _ in range(args.cpu_runs):
                clients[server].get(path)
            wall = (time.perf_counter() - t0) * 1000 / args.cpu_runs
            result["server_cpu_ms"] = (cpu_seconds() - before) * 1000 / args.cpu_runs
            print(f"{args.phase:14} {result['figure']} {result['read']:46} sensordb CPU {result['server_cpu_ms']:7.2f} ms a request "
                  f"(mean wall {wall:.2f} ms, {args.cpu_runs} back to back)", file=sys.stderr)
    checks = []
    all_ok = True
    for check in (lambda: check_a(answers, args), lambda: check_b(answers), lambda: check_c(answers)):
        try:
            ok, lines = check()
        except Exception as error:  # a malformed answer is a failed check, reported as such
            ok, lines = False, [f"check failed: {error!r}"]
        all_ok &= ok
        checks.extend(lines)
    for line in checks:
        print(f"{args.phase:14} agree: {line}", file=sys.stderr)
    print(f"{args.phase:14} answers agree: {'yes' if all_ok else 'NO'}", file=sys.stderr)
    with open(args.out, "w") as out:
        json.dump({"phase": args.phase, "results": results, "checks": checks, "agree": all_ok}, out, indent=1)
    return 0 if all_ok else 1


def cmd_report(args):
    phases = [json.load(open(f)) for f in args.files]
    names = [p["phase"] for p in phases]
    rows = {}
    for phase in phases:
        for r in phase["results"]:
            rows.setdefault((r["figure"], r["read"]), {})[phase["phase"]] = r
    print(f"\n{'figure':6} {'read':46} " + " ".join(f"{n + ' ms':>16}" for n in names) + f" {'bytes':>12}"
          + "".join(f" {n + ' CPU ms':>22}" for n in names))
    for (figure, read), by_phase in rows.items():
        cells = " ".join(f"{by_phase[n]['median_ms']:16.2f}" if n in by_phase else f"{'-':>16}" for n in names)
        size = next(iter(by_phase.values()))["bytes"]
        cpu = "".join(f" {by_phase[n]['server_cpu_ms']:22.2f}" if "server_cpu_ms" in by_phase.get(n, {}) else f" {'':>22}" for n in names)
        print(f"{figure:6} {read:46} {cells} {size:12,}{cpu}")
    print("medians of " + ", ".join(f"{p['phase']}: {p['results'][0]['runs']} runs" for p in phases)
          + "; answers agree: " + ", ".join(f"{p['phase']} {'yes' if p['agree'] else 'NO'}" for p in phases))
    return 0 if all(p["agree"] for p in phases) else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    load = sub.add_parser("load")
    load.add_argument("--start", type=int, required=True)
    load.add_argument("--end", type=int, required=True)
    load.add_argument("--seed", type=int, default=12)
    load.add_argument("urls", nargs="+")
    measure = sub.add_parser("measure")
    measure.add_argument("--start", type=int, required=True)
    measure.add_argument("--end", type=int, required=True)
    for name in ("sensordb", "influxdb", "victoriametrics"):
        measure.add_argument(f"--{name}", required=True)
    measure.add_argument("--phase", required=True)
    measure.add_argument("--runs", type=int, default=9)
    measure.add_argument("--warmup", type=int, default=2)
    measure.add_argument("--out", required=True)
    measure.add_argument("--sensordb-pid", type=int, help="also report sensordb's CPU time a request")
    measure.add_argument("--cpu-runs", type=int, default=30)
    report = sub.add_parser("report")
    report.add_argument("files", nargs="+")
    args = parser.parse_args()
    if args.command in ("load", "measure") and (args.end - args.start != WEEK or args.start * 1000 % STEP_MS):
        raise SystemExit("--start and --end: 7 days apart, start a multiple of 604.8 s")
    return {"load": cmd_load, "measure": cmd_measure, "report": cmd_report}[args.command](args) or 0


if __name__ == "__main__":
    sys.exit(main())
