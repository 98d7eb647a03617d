"""`python -m bench.replication_paths`: the CPU per MB of a piece of a replicated MB, in one process.

CPU per MB from `python -m bench.replication` swings by a third between runs of one tree on the
shared 2-core machine; this measures one piece, alternating the variants in one process, so the
difference stands out of the noise: 256 KiB response frames (librdkafka's batch.size in the
replication bench, so the size of a follower's fetch response there) over loopback TCP under
uvloop, read by an asyncio StreamReader (what AsyncChannel used) and by a buffered protocol
reading each frame into a buffer of its size (AsyncChannel's `ResponseFrames`, imported); the sending side's CPU
is in both figures. (At fb12a2e it also measured a leader's tail cache, since left out:
docs/benchmarks.md.)

Figures are milliseconds of process CPU (user + system) per MB; `--rounds` alternations, after a
warm-up, the variant that goes first alternating.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import struct
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import uvloop  # noqa: E402

from kavka.client.async_channel import ResponseFrames  # noqa: E402

FRAME = 256 * 1024


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


async def _frames(buffered: bool, n: int) -> float:
    payload = struct.pack(">i", FRAME) + b"x" * FRAME

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        for _ in range(n):
            await reader.readexactly(1)
            writer.write(payload)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    loop = asyncio.get_running_loop()
    if buffered:
        transport, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1", port)
        frames = ResponseFrames(transport, 2 * FRAME)  # AsyncChannel's own reader
        transport.set_protocol(frames)
        t0 = _cpu()
        for _ in range(n):
            transport.write(b"a")
            await frames.read()
        spent = _cpu() - t0
        transport.close()
    else:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        t0 = _cpu()
        for _ in range(n):
            writer.write(b"a")
            await writer.drain()
            (size,) = struct.unpack(">i", await reader.readexactly(4))
            await reader.readexactly(size)
        spent = _cpu() - t0
        writer.close()
    server.close()
    return 1000 * spent / (n * FRAME / 2**20)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    uvloop.run(_frames(False, 100))  # warm-up
    for r in range(args.rounds):
        first = r % 2 == 0  # which variant goes first alternates, so a drift in load falls on both
        runs = [uvloop.run(_frames(b, 800)) for b in ((False, True) if first else (True, False))]
        sr, bp = runs if first else reversed(runs)
        print(f"round {r + 1} frames: StreamReader {sr:.2f} ms/MB, buffered protocol {bp:.2f} ms/MB")


if __name__ == "__main__":
    main()
