"""`python -m bench.quota_accuracy`: how closely a real broker holds clients to the request and
controller-mutation quotas (KIP-124, KIP-599).

request_percentage: one client floods Metadata (no topics) back to back, as fast as the broker
answers and unmutes it, for `--seconds` after a warm-up of two windows; printed per quota: the
share of the event loop the broker itself measured for the client (its `request-time` sensor from
the Prometheus endpoint, averaged over the run by sampling it each second), the broker process's
CPU share over the run (an upper bound: it includes everything else the broker does), the
client's request rate, and the unthrottled baseline of the same figures.

controller_mutation_rate: one client creates one-partition topics with CreateTopics v7 in a loop
and, like Java's Admin, retries a topic refused THROTTLING_QUOTA_EXCEEDED after the throttle time;
printed: partitions created per second after the burst, against the quota.

The broker runs with quota.window.num=2 and quota.window.size.seconds=1 (a quota bites within a
second; Kafka's default of 11 windows admits a 10-window burst first).
"""

from __future__ import annotations

import argparse
import json
import re
import time
import urllib.request
from datetime import timedelta

from kio.schema.errors import ErrorCode

from bench.servers import Broker, start_kavka
from kavka.client.admin import AdminClient
from kavka.client.connection import BlockingConnection
from kavka.protocol import api
from kavka.protocol.api import ApiKey
from kavka.protocol.messages import make, nested


def request_time(metrics_port: int, client_id: str) -> float | None:
    """The broker's request-time sensor of `client_id` (percent of the loop), None if absent."""
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    pattern = 'kafka_server_request_request_time{client_id="' + client_id + '",user=""} '
    line = next((ln for ln in text.splitlines() if ln.startswith(pattern)), None)
    return float(line[len(pattern):]) if line is not None else None


def flood(broker: Broker, metrics_port: int, client_id: str, seconds: float, warmup: float) -> dict:
    req = make(api.request_schema(ApiKey.METADATA, 12), topics=(), allow_auto_topic_creation=False,
               include_topic_authorized_operations=False)
    with BlockingConnection("127.0.0.1", broker.port, client_id=client_id) as conn:
        end_warmup = time.monotonic() + warmup
        while time.monotonic() < end_warmup:
            conn.send(req)
        cpu0, t0 = broker.cpu(), time.monotonic()
        n = 0
        throttled = 0
        samples = []
        next_sample = t0 + 1.0
        while (now := time.monotonic()) < t0 + seconds:
            resp = conn.send(req)
            n += 1
            throttled += resp.throttle_time > timedelta(0)
            if now >= next_sample:
                next_sample += 1.0
                v = request_time(metrics_port, client_id)
                if v is not None:
                    samples.append(v)
        elapsed = time.monotonic() - t0
    return {
        "requests_per_s": round(n / elapsed, 1),
        "throttled_share": round(throttled / max(1, n), 3),
        "broker_cpu_percent": round((broker.cpu() - cpu0) / elapsed * 100, 1),
        "measured_request_time_percent": round(sum(samples) / len(samples), 2) if samples else None,
    }


def mutations(port: int, quota: float, seconds: float) -> dict:
    req_cls = api.request_schema(ApiKey.CREATE_TOPICS, 7)
    topic_cls = nested(req_cls, "CreatableTopic")
    created: list[float] = []
    refused = 0
    i = 0
    with BlockingConnection("127.0.0.1", port, client_id="mutator") as conn:
        t0 = time.monotonic()
        while time.monotonic() < t0 + seconds:
            topic = make(topic_cls, name=f"bench-mut-{i}", num_partitions=1, replication_factor=1, assignments=(), configs=())
            resp = conn.send(make(req_cls, topics=(topic,), timeout=timedelta(seconds=30), validate_only=False))
            r = resp.topics[0]
            if r.error_code == ErrorCode.throttling_quota_exceeded:
                refused += 1
                time.sleep(resp.throttle_time.total_seconds())  # as Java's Admin retries after the throttle time
                continue
            assert r.error_code == ErrorCode.none, r
            created.append(time.monotonic())
            i += 1
    burst = int(quota * 2)  # 2 windows of 1 s
    after = created[burst:]
    rate = (len(after) - 1) / (after[-1] - after[0]) if len(after) > 1 else 0.0
    return {"quota": quota, "partitions": len(created), "refused": refused, "rate_after_burst": round(rate, 2)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--quotas", default="10,25,50", help="request_percentage values to run")
    ap.add_argument("--mutation-rate", type=float, default=5.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    broker = start_kavka({"quota.window.num": "2", "quota.window.size.seconds": "1", "metrics.prometheus.port": "0"})
    out: dict = {}
    try:
        log = broker.workdir / "broker.log"
        deadline = time.monotonic() + 10
        while not (m := re.search(r"prometheus metrics on http://127\.0\.0\.1:(\d+)/metrics", log.read_text())):
            if time.monotonic() > deadline:
                raise RuntimeError("no metrics endpoint in the broker log")
            time.sleep(0.1)
        metrics_port = int(m.group(1))
        with AdminClient(f"127.0.0.1:{broker.port}") as admin:
            # A quota for a client id no one uses, so the request sensor exists for the baseline's too.
            admin.alter_client_quotas([([("client-id", "baseline")], [("request_percentage", 1000.0)])])
        out["baseline"] = flood(broker, metrics_port, "baseline", args.seconds, 2.0)
        for q in (float(x) for x in args.quotas.split(",")):
            cid = f"flood-{q:g}"
            with AdminClient(f"127.0.0.1:{broker.port}") as admin:
                admin.alter_client_quotas([([("client-id", cid)], [("request_percentage", q)])])
            out[f"request_percentage={q:g}"] = flood(broker, metrics_port, cid, args.seconds, 2.0)
        with AdminClient(f"127.0.0.1:{broker.port}") as admin:
            admin.alter_client_quotas([([("client-id", "mutator")], [("controller_mutation_rate", args.mutation_rate)])])
        out["controller_mutation_rate"] = mutations(broker.port, args.mutation_rate, args.seconds)
    finally:
        broker.stop()
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        for k, v in out.items():
            print(f"{k:28} {v}")


if __name__ == "__main__":
    main()
