"""`kavka demo`: the main job on the embedded default (see kavka.demo)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.option("--data-dir", type=click.Path(path_type=Path), default=Path("var/demo"), show_default=True,
              help="where the local cluster keeps its data")
@click.option("--nodes", type=click.IntRange(1, 9), default=3, show_default=True,
              help="nodes of the local cluster (combined broker,controller processes)")
@click.option("--events", type=click.IntRange(1), default=50_000, show_default=True, help="events to produce")
@click.option("--seed", type=int, default=42, show_default=True, help="seed of the synthetic stream")
@click.option("--window-seconds", type=click.IntRange(1), default=10, show_default=True,
              help="event-time window of the aggregation")
@click.option("--trigger-seconds", type=click.FloatRange(0.1), default=2.0, show_default=True,
              help="processing-time trigger interval of the Spark job")
@click.option("--console-port", type=click.IntRange(1, 65535), default=None,
              help="Also serve the web console (kavka console) on 127.0.0.1 at this port while the demo runs.")
def demo(data_dir: Path, nodes: int, events: int, seed: int, window_seconds: int, trigger_seconds: float,
         console_port: int | None) -> None:
    """Start a local kavka cluster, stream synthetic events through it, and aggregate them with Spark."""
    from kavka.demo import run_demo

    try:
        run_demo(
            data_dir=data_dir.resolve(),
            events=events,
            nodes=nodes,
            seed=seed,
            window_seconds=window_seconds,
            trigger_seconds=trigger_seconds,
            console_port=console_port,
        )
    except RuntimeError as e:
        raise click.ClickException(str(e)) from None
