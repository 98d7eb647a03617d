"""`python -m bench.tls_throughput`: produce and consume over TLS against plaintext, one broker.

One kavka broker with a PLAINTEXT and an SSL listener (a CA and a PEM keystore from kavka.certs,
EC P-256; OpenSSL picks the cipher: TLS 1.3 with AES-256-GCM against librdkafka); confluent-kafka
produces `--records` records of `--record-size` bytes (acks=1, one partition, the settings of
`python -m bench`) to a fresh topic and consumes them back, over one listener then the other, in
the order plain, tls, tls, plain, ... so drift in the machine's load falls on both. Prints the
median MB/s and the broker's and the client's CPU milliseconds per MB of each, and TLS/plaintext
ratios (above 1 is better for MB/s, below 1 better for CPU per MB). Where the CPU goes differs by
direction: a plaintext consumer is served by sendfile from the segment files, a TLS consumer's
bytes are read into the broker and encrypted there.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from bench import workloads
from bench.servers import Broker, start_kavka_listeners
from kavka import certs

MODES = ("plaintext", "tls")
FIGURES = [  # (workload, figure, better when higher)
    ("produce", "mb_per_s", True),
    ("produce", "broker_cpu_ms_per_mb", False),
    ("produce", "client_cpu_ms_per_mb", False),
    ("consume", "mb_per_s", True),
    ("consume", "broker_cpu_ms_per_mb", False),
    ("consume", "client_cpu_ms_per_mb", False),
]


def start(work: Path) -> dict[str, Broker]:
    """The broker, and a view of it per listener (the same process; stop only `plaintext`)."""
    ca = certs.ensure_ca(work / "certs")
    keystore = certs.ensure_server_keystore(ca, work / "certs" / "broker.pem", cn="bench broker")
    broker, ports = start_kavka_listeners(
        ["PLAINTEXT", "SSL"],
        lambda ports: {
            "listeners": ",".join(f"{name}://127.0.0.1:{port}" for name, port in ports.items()),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(keystore),
        },
        work=work,
    )
    extra = {"security.protocol": "SSL", "ssl.ca.location": str(ca.cert_path)}
    return {"plaintext": broker, "tls": dataclasses.replace(broker, port=ports["SSL"], extra=extra)}


def one(broker: Broker, *, record_size: int, records: int) -> dict[str, dict]:
    p = workloads.produce(broker, record_size=record_size, count=records, acks="1", partitions=1)
    c = workloads.consume(broker, topic=p["topic"], partitions=1, count=records, record_size=record_size)
    out = {"produce": p, "consume": c}
    for r in out.values():
        r["broker_cpu_ms_per_mb"] = r["broker_cpu"] * 1000 / r["mb_per_s"]
        r["client_cpu_ms_per_mb"] = r["client_cpu"] * 1000 / r["mb_per_s"]
    return out


def run(*, rounds: int, record_size: int, records: int, log=print) -> dict:  # noqa: ANN001
    work = Path(tempfile.mkdtemp(prefix="kavka-bench-tls-"))
    try:
        views = start(work)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    runs: dict[str, list[dict]] = {m: [] for m in MODES}
    try:
        for i in range(rounds):
            for mode in MODES if i % 2 == 0 else MODES[::-1]:
                log(f"round {i + 1}/{rounds}: {mode}")
                runs[mode].append(one(views[mode], record_size=record_size, records=records))
    except BaseException:
        log(f"broker exit code {views['plaintext'].proc.poll()}; its log ends:\n"
            + (views["plaintext"].workdir / "broker.log").read_text(errors="replace")[-3000:])
        raise
    finally:
        views["plaintext"].stop()
        shutil.rmtree(work, ignore_errors=True)
    fields = ("mb_per_s", "records_per_s", "broker_cpu", "client_cpu", "broker_cpu_ms_per_mb", "client_cpu_ms_per_mb")
    median = {m: {w: {f: statistics.median(r[w][f] for r in runs[m]) for f in fields} for w in ("produce", "consume")}
              for m in MODES}
    return {"rounds": rounds, "record_size": record_size, "records": records, "runs": runs, "median": median}


def table(result: dict) -> str:
    med = result["median"]
    lines = ["| workload | figure | plaintext | TLS | TLS / plaintext |", "|---|---|---:|---:|---:|"]
    for w, f, _higher in FIGURES:
        p, t = med["plaintext"][w][f], med["tls"][w][f]
        lines.append(f"| {w} {result['record_size']} B | {f} | {p:,.2f} | {t:,.2f} | {workloads.ratio(t, p)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.tls_throughput", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=4, help="runs per listener, alternating (default 4)")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--smoke", action="store_true", help="tiny counts: checks the harness, figures mean nothing")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw runs and medians here")
    a = ap.parse_args(argv)
    rounds, records = (2, 2_000) if a.smoke else (a.rounds, a.records)
    result = run(rounds=rounds, record_size=a.record_size, records=records,
                 log=lambda m: print(m, file=sys.stderr, flush=True))
    if a.json:
        a.json.write_text(json.dumps(result, indent=1, default=str))
    print(f"{rounds} alternating rounds per listener, {records:,} records of {a.record_size} B each, medians")
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
