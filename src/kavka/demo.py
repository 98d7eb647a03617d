"""`kavka demo`: a local kavka broker, a synthetic event stream, and a summary.

Starts a real broker process (`kavka server start`) with its data under
`./var/demo` (or --data-dir) on a free loopback port, creates the topics,
produces a synthetic stream of purchase events with a progress bar, reads it
back, aggregates per 10-second window and event type, writes the aggregates to
an output topic, prints a summary table, and stops the broker cleanly. Ctrl-C at
any point stops everything cleanly. (Issue 3 replaces the aggregation step with
a Spark Structured Streaming job.)
"""

from __future__ import annotations

import json
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

EVENT_TYPES = ("view", "cart", "purchase", "refund")
WINDOW_MS = 10_000


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalBroker:
    """A kavka broker subprocess for the demo (formatted on first use)."""

    def __init__(self, data_dir: Path, console: Console) -> None:
        self.data_dir = data_dir
        self.console = console
        self.port = _free_port()
        self.proc: subprocess.Popen[str] | None = None
        self.output: list[str] = []

    def start(self, timeout: float = 30.0) -> str:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        cfg = self.data_dir / "server.properties"
        cfg.write_text(
            f"node.id=1\nlisteners=PLAINTEXT://127.0.0.1:{self.port}\n"
            f"log.dirs={self.data_dir / 'logs'}\nnum.partitions=3\n"
        )
        kavka = [sys.executable, "-m", "kavka"]
        if not (self.data_dir / "logs" / "meta.properties").exists():
            subprocess.run(
                [*kavka, "storage", "format", "--config", str(cfg)],
                check=True,
                capture_output=True,
                text=True,
            )
        self.proc = subprocess.Popen(
            [*kavka, "server", "start", "--config", str(cfg)],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,  # Ctrl-C goes to the demo, which stops the broker in order
        )
        ready = threading.Event()

        def pump() -> None:
            assert self.proc is not None and self.proc.stdout is not None
            for line in self.proc.stdout:
                self.output.append(line)
                if line.startswith("KAVKA_READY"):
                    ready.set()
            ready.set()

        threading.Thread(target=pump, daemon=True).start()
        if not ready.wait(timeout) or self.proc.poll() is not None:
            self.stop()
            raise RuntimeError("the broker did not start:\n" + "".join(self.output[-30:]))
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def run_demo(
    *, data_dir: Path, events: int, seed: int = 42, console: Console | None = None
) -> dict[tuple[int, str], tuple[int, float]]:
    console = console or Console()
    broker = LocalBroker(data_dir, console)
    try:
        with console.status("starting a local kavka broker"):
            bootstrap = broker.start()
        console.print(f"[green]kavka broker up[/green] at {bootstrap}, data in {data_dir}")
        # The clients live inside _pipeline, so they are closed before the broker stops.
        return _pipeline(bootstrap, events=events, seed=seed, console=console)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: stopping the broker[/yellow]")
        return {}
    finally:
        broker.stop()
        console.print(
            "broker stopped cleanly"
            if broker.proc is None or broker.proc.returncode == 0
            else f"broker exited with {broker.proc.returncode}"
        )


def _pipeline(
    bootstrap: str, *, events: int, seed: int, console: Console
) -> dict[tuple[int, str], tuple[int, float]]:
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    run_id = time.strftime("%Y%m%d-%H%M%S")
    source, sink = f"demo-events-{run_id}", f"demo-summary-{run_id}"

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic(source, 3, 1), NewTopic(sink, 1, 1)]).values():
        f.result(15)
    console.print(f"created topics [bold]{source}[/bold] (3 partitions) and [bold]{sink}[/bold]")

    rng = random.Random(seed)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5, "compression.type": "lz4"}
    )
    acked = 0
    failures: list[str] = []

    def on_delivery(err, _msg) -> None:  # noqa: ANN001
        nonlocal acked
        if err is not None:
            failures.append(str(err))
        else:
            acked += 1

    start_ms = int(time.time() * 1000)
    progress = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    )
    with progress:
        task = progress.add_task("producing events", total=events)
        for i in range(events):
            kind = rng.choices(EVENT_TYPES, weights=(60, 25, 12, 3))[0]
            event = {
                "user": f"user-{rng.randrange(500)}",
                "type": kind,
                "amount": round(rng.uniform(1, 200), 2),
            }
            ts = start_ms + i * 7  # a synthetic clock: 7 ms between events
            producer.produce(
                source,
                key=event["user"].encode(),
                value=json.dumps(event).encode(),
                timestamp=ts,
                on_delivery=on_delivery,
            )
            if i % 1000 == 0:
                producer.poll(0)
            progress.advance(task)
        producer.flush(30)
    if failures:
        raise RuntimeError(f"{len(failures)} events were not acknowledged: {failures[:3]}")

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kavka-demo",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(source, p, 0) for p in range(3)])
    agg: dict[tuple[int, str], list[float]] = defaultdict(lambda: [0, 0.0])
    seen = 0
    deadline = time.monotonic() + 60
    with Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console
    ) as prog:
        task = prog.add_task("reading and aggregating", total=acked)
        while seen < acked and time.monotonic() < deadline:
            for msg in consumer.consume(1000, 0.5):
                if msg.error():
                    raise RuntimeError(str(msg.error()))
                event = json.loads(msg.value())
                window = msg.timestamp()[1] // WINDOW_MS * WINDOW_MS
                a = agg[(window, event["type"])]
                a[0] += 1
                a[1] += event["amount"]
                seen += 1
                prog.advance(task)
    consumer.close()
    if seen != acked:
        raise RuntimeError(f"read {seen} of {acked} acknowledged events")

    for (window, kind), (count, total) in sorted(agg.items()):
        producer.produce(
            sink,
            key=f"{window}:{kind}".encode(),
            value=json.dumps(
                {"window_start": window, "type": kind, "count": count, "amount": round(total, 2)}
            ).encode(),
        )
    producer.flush(30)

    table = Table(
        title=f"{acked} events in {len({w for w, _ in agg})} windows of {WINDOW_MS // 1000}s -> {sink}"
    )
    table.add_column("event type")
    table.add_column("events", justify="right")
    table.add_column("amount", justify="right")
    for kind in EVENT_TYPES:
        rows = [v for (w, k), v in agg.items() if k == kind]
        table.add_row(kind, str(sum(r[0] for r in rows)), f"{sum(r[1] for r in rows):,.2f}")
    console.print(table)
    return {k: (int(v[0]), v[1]) for k, v in agg.items()}
