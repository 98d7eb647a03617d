"""`python -m bench.transactions`: the cost of transactions, kavka and Tansu side by side.

On each broker (one kavka broker on disk, and Tansu, the Rust Kafka-compatible broker with its
memory engine, as `python -m bench` runs it) confluent-kafka writes `--records` records of `--record-size` bytes to a fresh one-partition
topic, acks=all, either with an idempotent producer (the baseline) or with a transactional one
committing every 1, 100 or 10,000 records; the idempotent and transactional runs alternate so
drift in the machine's load falls on both. Prints, per transaction size, the median records/s
and MB/s and the ratio to the idempotent producer (above 1 is faster), the broker's CPU per MB,
and commit_transaction()'s latency p50/p99 (the EndTxn round trip plus the wait for the
markers, which librdkafka does not wait for: it returns once the coordinator has the
PrepareCommit). Then a read_committed and a read_uncommitted consumer read the last
100-record-transaction topic from the start, alternating, and their MB/s are compared.

Transactions of one record commit far fewer records per second: each costs an EndTxn round
trip, a `__transaction_state` append replicated acks=all, and a marker write on every partition.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition

from bench import workloads
from bench.servers import Broker, start_kavka, start_tansu

TXN_SIZES = (1, 100, 10_000)


def _producer(broker: Broker, txn_id: str | None) -> Producer:
    conf: dict = {"bootstrap.servers": broker.bootstrap, "acks": "all", "enable.idempotence": True,
                  "linger.ms": 5, "batch.size": 1_000_000, **workloads.QUIET, **broker.extra}
    if txn_id is not None:
        conf.update({"transactional.id": txn_id, "transaction.timeout.ms": 60_000})
    return Producer(conf)


def produce(broker: Broker, *, record_size: int, records: int, txn_size: int | None) -> dict:
    """One run: `records` records, in transactions of `txn_size` (None: idempotent, no transactions)."""
    topic = workloads.create_topic(broker, 1)
    p = _producer(broker, None if txn_size is None else f"bench-{uuid.uuid4().hex[:8]}")
    value = b"x" * record_size
    commits: list[float] = []
    if txn_size is not None:
        p.init_transactions(60)
    errors: list = []

    def on_delivery(err, _msg) -> None:  # noqa: ANN001
        if err is not None:
            errors.append(err)

    # Warm up outside the clock: connections, metadata and (transactional) the partition added.
    if txn_size is not None:
        p.begin_transaction()
    p.produce(topic, value=value, partition=0, on_delivery=on_delivery)
    if txn_size is not None:
        p.commit_transaction(60)
    elif p.flush(60) != 0:
        raise RuntimeError("idempotent producer did not flush its first record")
    cpu0, ccpu0 = broker.cpu(), workloads._client_cpu()
    t0 = time.perf_counter()
    sent = 0
    while sent < records:
        n = min(records - sent, txn_size or records)
        if txn_size is not None:
            p.begin_transaction()
        for _ in range(n):
            while True:
                try:
                    p.produce(topic, value=value, partition=0, on_delivery=on_delivery)
                    break
                except BufferError:
                    p.poll(0.01)
        sent += n
        if txn_size is not None:
            c0 = time.perf_counter()
            p.commit_transaction(60)  # flushes first; the latency below is the commit's alone
            commits.append((time.perf_counter() - c0) * 1000)
    if txn_size is None and p.flush(60) != 0:
        raise RuntimeError("idempotent producer did not flush")
    elapsed = time.perf_counter() - t0
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first {errors[0]}")
    out = workloads._throughput(broker, records, record_size, elapsed, cpu0, ccpu0)
    out["topic"] = topic
    out["broker_cpu_ms_per_mb"] = out["broker_cpu"] * 1000 / out["mb_per_s"]
    if commits:
        qs = statistics.quantiles(commits, n=100, method="inclusive") if len(commits) > 1 else commits * 99
        out["commit_ms_p50"], out["commit_ms_p99"] = qs[49], qs[98]
    return out


def consume(broker: Broker, *, topic: str, records: int, record_size: int, isolation: str) -> dict:
    c = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                  "isolation.level": isolation, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                  "fetch.max.bytes": 50 * 1024 * 1024, **workloads.QUIET, **broker.extra})
    c.assign([TopicPartition(topic, 0, 0)])
    got = 0
    cpu0, ccpu0 = broker.cpu(), workloads._client_cpu()
    t0 = time.perf_counter()
    deadline = time.monotonic() + 120
    while got < records:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{isolation} consumer read {got} of {records} records")
        # Ask for no more than remain: consume() waits out its timeout for a batch it cannot fill.
        got += sum(1 for m in c.consume(min(10_000, records - got), timeout=1.0) if m.error() is None)
    elapsed = time.perf_counter() - t0
    c.close()
    return workloads._throughput(broker, records, record_size, elapsed, cpu0, ccpu0)


BROKERS = ("kavka", "tansu")


def _start(name: str, work: Path) -> Broker:
    if name == "kavka":
        return start_kavka({"transaction.state.log.num.partitions": "1"}, work=work / "kavka")
    return start_tansu()


def run(*, rounds: int, record_size: int, records: dict[int | None, int], brokers: tuple[str, ...] = BROKERS,
        log=print) -> dict:  # noqa: ANN001
    """Both brokers up at once; each round runs every producer kind on one broker then the other
    (the order alternating), so drift in the machine's load falls on both alike."""
    work = Path(tempfile.mkdtemp(prefix="kavka-bench-txn-"))
    (work / "kavka").mkdir()
    started: dict[str, Broker] = {}
    modes: list[int | None] = [None, *TXN_SIZES]
    runs: dict[str, dict[str, list[dict]]] = {b: {str(m): [] for m in modes} for b in brokers}
    reads: dict[str, dict[str, list[dict]]] = {b: {"read_committed": [], "read_uncommitted": []} for b in brokers}
    try:
        for name in brokers:
            started[name] = _start(name, work)
        for i in range(rounds):
            for name in brokers if i % 2 == 0 else brokers[::-1]:
                broker = started[name]
                for m in modes if i % 2 == 0 else modes[::-1]:
                    log(f"round {i + 1}/{rounds}: {name}, {'idempotent' if m is None else f'transactions of {m}'}")
                    runs[name][str(m)].append(produce(broker, record_size=record_size, records=records[m], txn_size=m))
                topic = runs[name]["100"][-1]["topic"]
                for iso in ("read_committed", "read_uncommitted") if i % 2 == 0 else ("read_uncommitted", "read_committed"):
                    reads[name][iso].append(consume(broker, topic=topic, records=records[100], record_size=record_size,
                                                    isolation=iso))
    finally:
        for b in started.values():
            b.stop()
        shutil.rmtree(work, ignore_errors=True)
    fields = ("records_per_s", "mb_per_s", "broker_cpu_ms_per_mb", "commit_ms_p50", "commit_ms_p99")
    median = {b: {m: {f: statistics.median(r[f] for r in rs) for f in fields if f in rs[0]} for m, rs in per.items()}
              for b, per in runs.items()}
    read_median = {b: {iso: statistics.median(r["mb_per_s"] for r in rs) for iso, rs in per.items()}
                   for b, per in reads.items()}
    return {"rounds": rounds, "record_size": record_size, "records": {str(k): v for k, v in records.items()},
            "brokers": list(brokers), "runs": runs, "reads": reads, "median": median, "read_median": read_median}


def table(result: dict) -> str:
    brokers = result["brokers"]
    med = result["median"]
    head = "| producer | records |"
    rule = "|---|---:|"
    for b in brokers:
        head += f" {b} records/s | {b} / idempotent | {b} commit p50 ms | {b} commit p99 ms |"
        rule += "---:|---:|---:|---:|"
    if len(brokers) == 2:
        head += f" {brokers[0]} / {brokers[1]} |"
        rule += "---:|"
    lines = [head, rule]
    for m in ("None", *(str(s) for s in TXN_SIZES)):
        name = "idempotent" if m == "None" else f"transactions of {int(m):,}"
        row = f"| {name} | {int(result['records'][m]):,} |"
        for b in brokers:
            r, base = med[b][m], med[b]["None"]
            p50 = f"{r['commit_ms_p50']:.2f}" if "commit_ms_p50" in r else "-"
            p99 = f"{r['commit_ms_p99']:.2f}" if "commit_ms_p99" in r else "-"
            vs = r["records_per_s"] / base["records_per_s"] if base["records_per_s"] else 0.0
            row += f" {r['records_per_s']:,.0f} | {vs:.3g} | {p50} | {p99} |"
        if len(brokers) == 2:
            row += f" {workloads.ratio(med[brokers[0]][m]['records_per_s'], med[brokers[1]][m]['records_per_s'])} |"
        lines.append(row)
    rm = result["read_median"]
    lines += ["", "| consumer | " + " | ".join(f"{b} MB/s | {b} / read_uncommitted" for b in brokers) + " |",
              "|---|" + "---:|---:|" * len(brokers)]
    for iso in ("read_uncommitted", "read_committed"):
        lines.append(f"| {iso} | " + " | ".join(
            f"{rm[b][iso]:,.2f} | {workloads.ratio(rm[b][iso], rm[b]['read_uncommitted'])}" for b in brokers) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.transactions", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="runs per producer kind, alternating (default 3)")
    ap.add_argument("--records", type=int, default=100_000,
                    help="records per run with transactions of 100 or more (default 100,000)")
    ap.add_argument("--single-records", type=int, default=2_000,
                    help="records per run with transactions of one record (default 2,000)")
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--smoke", action="store_true", help="tiny counts: checks the harness, figures mean nothing")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw runs and medians here")
    ap.add_argument("--kavka-only", action="store_true", help="leave Tansu out")
    a = ap.parse_args(argv)
    rounds, many, single = (2, 2_000, 50) if a.smoke else (a.rounds, a.records, a.single_records)
    records: dict[int | None, int] = {None: many, 1: single, 100: many, 10_000: max(many, 10_000)}
    result = run(rounds=rounds, record_size=a.record_size, records=records,
                 brokers=("kavka",) if a.kavka_only else BROKERS, log=lambda m: print(m, file=sys.stderr, flush=True))
    if a.json:
        a.json.write_text(json.dumps(result, indent=1, default=str))
    print(f"{rounds} alternating rounds, records of {a.record_size} B, acks=all, one partition, medians")
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
