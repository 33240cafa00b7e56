#!/usr/bin/env python3
"""Throughput with `--http` polled like the page (GET /api/v1/topology every
second) plus a Prometheus scrape every second, against the same run
without `--http`: alternating runs, medians of the spout's acked trees per
second from the `--json` summary.

    tests/bench/http_throughput.py --bin target/release/squall \
        --topology topologies/perf/const-id-null-ack.toml --runs 3 --secs 10
"""

import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile
import threading
import time
import urllib.request


def run(binary, topology, secs, http):
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "summary.json")
        args = [binary, "run", topology, "--duration", f"{secs}s", "--stats-interval", "0s", "--json", out]
        if http:
            args += ["--http", "0"]
        p = subprocess.Popen(args, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
        stop = threading.Event()
        polls = [0]

        def poll(addr):
            while not stop.wait(1.0):
                for path in ("/api/v1/topology", "/metrics"):
                    try:
                        urllib.request.urlopen(f"http://{addr}{path}", timeout=2).read()
                        polls[0] += 1
                    except OSError:
                        pass

        t = None
        for line in p.stderr:
            m = re.search(r"HTTP on http://([0-9.:]+)/", line)
            if http and m and t is None:
                t = threading.Thread(target=poll, args=(m.group(1),), daemon=True)
                t.start()
        p.wait()
        stop.set()
        with open(out) as f:
            s = json.load(f)
        spouts = [c for c in s["components"] if c.get("kind") == "spout"]
        acked = sum(c.get("acked", 0) for c in spouts)
        return acked / s["elapsed_secs"], polls[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/squall")
    ap.add_argument("--topology", default="topologies/perf/const-id-null-ack.toml")
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--secs", type=int, default=10)
    a = ap.parse_args()
    rates = {False: [], True: []}
    for i in range(a.runs):
        for http in ((False, True) if i % 2 == 0 else (True, False)):
            rate, polls = run(a.bin, a.topology, a.secs, http)
            rates[http].append(rate)
            print(f"run {i} http={http}: {rate:,.0f} acked/s" + (f" ({polls} requests)" if http else ""))
    off, on = statistics.median(rates[False]), statistics.median(rates[True])
    print(f"median without --http {off:,.0f}/s, with {on:,.0f}/s: ratio {on / off:.3f}")


if __name__ == "__main__":
    main()
