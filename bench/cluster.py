"""`python -m bench.cluster`: what a KRaft cluster of real kavka processes costs in time.

- failover: kill -9 of the active controller (the raft leader, from DescribeQuorum) to the next
  successful CreateTopics through a surviving node; the killed node is restarted between runs;
- propagation: CreateTopics acknowledged to every node answering Metadata with the topic (each
  node polled directly);
- bulk create: one CreateTopics of `--partitions` partitions (100 topics) on a 3-node cluster,
  until every node lists them all.

Figures are medians and maxima over `--runs` runs for 3 and 5 nodes; `--smoke` shrinks them so the
harness is exercised in seconds. Results print as a table (JSON with --json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402
from tests.broker_harness import Cluster  # noqa: E402

from kavka.client.admin import AdminClient as KAdmin  # noqa: E402

_ADMINS: dict[str, AdminClient] = {}


def _admin(bootstrap: str) -> AdminClient:
    """One client per node, kept: a poll measures the broker, not a connection set-up."""
    if bootstrap not in _ADMINS:
        _ADMINS[bootstrap] = AdminClient({"bootstrap.servers": bootstrap})
    return _ADMINS[bootstrap]


def _create(bootstrap: str, topics: list[NewTopic], timeout_s: float = 30) -> None:
    admin = _admin(bootstrap)
    for fut in admin.create_topics(topics, request_timeout=timeout_s, operation_timeout=timeout_s).values():
        fut.result(timeout=timeout_s + 30)


def _leader(bootstrap: str) -> int:
    with KAdmin(bootstrap) as a:
        return a.describe_quorum().leader_id


_KADMINS: dict[str, KAdmin] = {}


def _listed(bootstrap: str, names: set[str]) -> bool:
    """Metadata from that node itself, on a kept connection (librdkafka may ask any broker it knows)."""
    a = _KADMINS.get(bootstrap)
    if a is None:
        a = _KADMINS[bootstrap] = KAdmin(bootstrap)
    try:
        return names <= {t.name for t in a.list_topics()}
    except Exception:
        _KADMINS.pop(bootstrap).close()
        raise


def failover(c: Cluster, runs: int) -> list[float]:
    out = []
    for r in range(runs):
        leader = _leader(c.nodes[1].bootstrap if c.nodes[1].alive() else c.nodes[2].bootstrap)
        survivor = next(n for i, n in c.nodes.items() if i != leader)
        c.nodes[leader].kill()
        t0 = time.monotonic()
        name = f"failover-{r}-{int(t0 * 1000)}"
        while True:
            try:
                _create(survivor.bootstrap, [NewTopic(name, 1, 1)])
                break
            except Exception as e:  # noqa: BLE001 -- retried until the new controller answers
                if "TOPIC_ALREADY_EXISTS" in str(e):
                    break
                time.sleep(0.05)
            if time.monotonic() - t0 > 60:
                raise TimeoutError("no CreateTopics success within 60s of the kill")
        out.append(time.monotonic() - t0)
        c.nodes[leader].start(timeout=60)
    return out


def propagation(c: Cluster, runs: int) -> list[float]:
    out = []
    for r in range(runs):
        name = f"prop-{r}-{int(time.time() * 1000)}"
        _create(c.nodes[1].bootstrap, [NewTopic(name, 1, 1)])
        t0 = time.monotonic()
        pending = set(c.nodes)
        while pending:
            pending = {i for i in pending if not _listed(c.nodes[i].bootstrap, {name})}
            if time.monotonic() - t0 > 30:
                raise TimeoutError(f"{name} not on nodes {pending} after 30s")
        out.append(time.monotonic() - t0)
    return out


def bulk_create(c: Cluster, partitions: int) -> float:
    per_topic = max(1, partitions // 100)
    topics = [NewTopic(f"bulk-{i}", per_topic, 1) for i in range(partitions // per_topic)]
    t0 = time.monotonic()
    _create(c.nodes[2].bootstrap, topics, timeout_s=600)
    names = {t.topic for t in topics}
    while not all(_listed(n.bootstrap, names) for n in c.nodes.values()):
        time.sleep(0.05)
    return time.monotonic() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--partitions", type=int, default=10_000)
    ap.add_argument("--smoke", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    runs, parts = (2, 200) if args.smoke else (args.runs, args.partitions)
    results: dict[str, object] = {}
    for nodes in (3, 5):
        with tempfile.TemporaryDirectory(prefix="kavka-bench-cluster-") as d:
            c = Cluster(Path(d), nodes).start(timeout=120)
            try:
                f = failover(c, runs)
                p = propagation(c, runs)
                results[f"{nodes} nodes"] = {
                    "failover_s": {"median": statistics.median(f), "max": max(f), "runs": len(f)},
                    "propagation_ms": {"median": 1000 * statistics.median(p), "max": 1000 * max(p), "runs": len(p)},
                }
                print(f"{nodes} nodes: {results[f'{nodes} nodes']}", file=sys.stderr, flush=True)
                if nodes == 3:
                    results["bulk_create_s"] = {"partitions": parts, "seconds": bulk_create(c, parts)}
                    print(f"bulk: {results['bulk_create_s']}", file=sys.stderr, flush=True)
            finally:
                for a in _KADMINS.values():
                    a.close()
                _KADMINS.clear()
                _ADMINS.clear()
                c.stop()
                for n in c.nodes.values():
                    n.kill()
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print("| cluster | failover median / max (s) | propagation median / max (ms) |")
    print("|---|---|---|")
    for k, v in results.items():
        if k.endswith("nodes"):
            f, p = v["failover_s"], v["propagation_ms"]  # type: ignore[index]
            print(f"| {k} | {f['median']:.2f} / {f['max']:.2f} ({f['runs']} runs) | {p['median']:.0f} / {p['max']:.0f} |")
    b = results["bulk_create_s"]
    print(f"\n{b['partitions']} partitions created on 3 nodes, listed by every node, in {b['seconds']:.1f} s")  # type: ignore[index]


if __name__ == "__main__":
    main()
