"""`kavka demo`: the main job on the embedded default (see kavka.demo)."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
@click.option("--data-dir", type=click.Path(path_type=Path), default=Path("var/demo"), show_default=True,
              help="where the local broker keeps its data")
@click.option("--events", type=click.IntRange(1), default=50_000, show_default=True, help="events to produce")
@click.option("--seed", type=int, default=42, show_default=True, help="seed of the synthetic stream")
def demo(data_dir: Path, events: int, seed: int) -> None:
    """Start a local kavka broker, stream synthetic events through it, and summarise them."""
    from kavka.demo import run_demo

    try:
        run_demo(data_dir=data_dir.resolve(), events=events, seed=seed)
    except RuntimeError as e:
        raise click.ClickException(str(e)) from None
