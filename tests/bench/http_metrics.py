#!/usr/bin/env python3
"""What a Prometheus scrape of /metrics costs, old server against new, in one run.

Starts two `squall run --http 0` processes on the same throttled word count
(one per binary), then in alternating rounds scrapes each one's /metrics
over a keep-alive connection (as Prometheus does; `--fresh` opens one per
scrape instead) and records, per scrape:

- the latency seen by the client (request sent to last byte read; with
  `--fresh`, connect included);
- the CPU time of the threads that serve HTTP (see `serving_cpu_secs`),
  which the topology's own work does not blur;
- the process CPU time it cost: the process's utime+stime over the burst,
  minus what the topology burns over as long (its rate measured while not
  scraped, before and after): noisier.

Prints the medians and the new/old ratios. Example:

    tests/bench/http_metrics.py --old /tmp/squall-old-bin --new target/release/squall
"""

import argparse
import http.client
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

TOPOLOGY = """
[topology]
name = "bench"
max_spout_pending = 1000

[plugins]
examples = "{plugins}/libsquall_examples.so"

[spouts.sentences]
component = "examples::RandomSentenceSpout"
config = {{ seed = 42 }}
throttle = {{ tuples_per_sec = 2000 }}

[bolts.split]
component = "examples::SplitSentence"
parallelism = 2
inputs = [{{ from = "sentences" }}]

[bolts.count]
component = "examples::WordCount"
parallelism = 2
inputs = [{{ from = "split", grouping = {{ fields = ["word"] }} }}]
"""

TICK = os.sysconf("SC_CLK_TCK")


def cpu_secs(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def task_cpu(pid, tid):
    with open(f"/proc/{pid}/task/{tid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def serving_cpu_secs(pid):
    """CPU time of the threads that serve HTTP, dead ones included: the
    process's total minus that of every live thread that does not (the
    executors, the acker, the history sampler, ...). Serving threads are
    the `__http*` ones and the unnamed ones (tiny_http's per-connection
    threads, which show the process's name), plus the idle main thread."""
    total = cpu_secs(pid)
    with open(f"/proc/{pid}/comm") as f:
        main = f.read().strip()
    other = 0.0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/comm") as f:
                comm = f.read().strip()
            serving = comm == main or (comm.startswith("__http") and comm != "__http-history")
            if not serving:
                other += task_cpu(pid, tid)
        except FileNotFoundError:
            pass  # a thread that just ended
    return total - other


def start(binary, topology):
    p = subprocess.Popen(
        [binary, "run", topology, "--http", "0", "--stats-interval", "0s"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.time() + 30
    for line in p.stderr:
        m = re.search(r"HTTP on http://([0-9.]+):(\d+)/", line)
        if m:
            return p, (m.group(1), int(m.group(2)))
        if time.time() > deadline:
            break
    raise SystemExit(f"{binary} never announced its HTTP address")


def burst(addr, n, fresh=False):
    conn = http.client.HTTPConnection(*addr, timeout=10)
    latencies = []
    for _ in range(n):
        t = time.perf_counter()
        if fresh:
            conn.close()
            conn = http.client.HTTPConnection(*addr, timeout=10)
        conn.request("GET", "/metrics", headers={"Accept": "text/plain"})
        r = conn.getresponse()
        body = r.read()
        latencies.append(time.perf_counter() - t)
        assert r.status == 200 and b"squall_emitted_total" in body, r.status
    conn.close()
    return latencies


def background_rate(pid, secs):
    c0, t0 = cpu_secs(pid), time.perf_counter()
    time.sleep(secs)
    return (cpu_secs(pid) - c0) / (time.perf_counter() - t0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--old", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--plugins", default="target/release")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--scrapes", type=int, default=100)
    ap.add_argument("--fresh", action="store_true", help="a new connection per scrape")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        topo = os.path.join(d, "bench.toml")
        with open(topo, "w") as f:
            f.write(TOPOLOGY.format(plugins=os.path.abspath(args.plugins)))
        servers = {name: start(binary, topo) for name, binary in (("old", args.old), ("new", args.new))}
        try:
            time.sleep(2)
            for _, addr in servers.values():
                burst(addr, 20)  # warm up
            rate = {name: background_rate(p.pid, 2.0) for name, (p, _) in servers.items()}
            lat = {name: [] for name in servers}
            cpu = {name: [] for name in servers}
            serving = {name: [] for name in servers}
            for r in range(args.rounds):
                order = ["old", "new"] if r % 2 == 0 else ["new", "old"]
                for name in order:
                    p, addr = servers[name]
                    c0, s0, t0 = cpu_secs(p.pid), serving_cpu_secs(p.pid), time.perf_counter()
                    ls = burst(addr, args.scrapes, args.fresh)
                    spent = cpu_secs(p.pid) - c0 - rate[name] * (time.perf_counter() - t0)
                    lat[name].append(statistics.median(ls))
                    cpu[name].append(max(spent, 0.0) / args.scrapes)
                    serving[name].append((serving_cpu_secs(p.pid) - s0) / args.scrapes)
            after = {name: background_rate(p.pid, 2.0) for name, (p, _) in servers.items()}
        finally:
            for p, _ in servers.values():
                p.terminate()
                p.wait(timeout=30)
    mode = "a new connection per scrape" if args.fresh else "keep-alive"
    print(f"{args.rounds} rounds x {args.scrapes} scrapes each, {mode}, alternating order")
    for name in ("old", "new"):
        print(
            f"{name}: median latency {statistics.median(lat[name]) * 1e6:.0f} us, "
            f"median CPU per scrape: serving threads {statistics.median(serving[name]) * 1e6:.0f} us, "
            f"process minus background {statistics.median(cpu[name]) * 1e6:.0f} us "
            f"(background {rate[name] * 100:.1f}% -> {after[name] * 100:.1f}% of a core)"
        )
    lr = statistics.median(lat["new"]) / statistics.median(lat["old"])
    def ratio(d):
        old = statistics.median(d["old"])
        return f"{statistics.median(d['new']) / old:.2f}" if old > 0 else "n/a (old measured 0)"

    print(f"new/old: latency {lr:.2f}, serving-thread CPU per scrape {ratio(serving)}, process CPU per scrape {ratio(cpu)}")


if __name__ == "__main__":
    sys.exit(main())
