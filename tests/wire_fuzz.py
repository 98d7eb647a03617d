"""The wire fuzzers' shared parts: hostile frames, and what a fuzzer reads back from a listener.

Used by tests/integration/test_protocol_robustness.py (a client listener) and
tests/integration/test_controller_listener_robustness.py (the controller listener):

- `schema_frame(schema, key, version, corr, pick)` writes a request frame whose body follows the
  request class `schema`, each length's fate chosen by `pick` (tests/schema_bodies.py): the
  returned Body's `forbidden` says whether the frame must be refused;
- `random_fates(rng)` is such a pick, drawing from FATES: mostly valid, sometimes a null, negative
  or overlong length;
- `mutate(frame, rng)` is a valid frame with bytes flipped, cut short, extended, or replaced by
  random bytes, its size prefix kept true except for the flips (which may hit it);
- `answer_until_closed(sock)` is whatever a listener sends before closing (None: still open);
- `problems(lines)` are the log lines a fuzzed listener must never write (ERROR, CRITICAL, a
  traceback): a frame it cannot serve is a WARNING.
"""

from __future__ import annotations

import random
import socket
import struct

from kavka.protocol.framing import encode_request
from tests.schema_bodies import Body, Fate, Pick

FATES = [Fate.VALID] * 8 + [Fate.NULL, Fate.NULL, Fate.NEGATIVE, Fate.OVERLONG]
MUTATIONS = ("flip", "truncate", "extend", "random")


def schema_frame(schema: type, key: int, version: int, corr: int, pick: Pick) -> tuple[bytes, Body]:
    """A frame whose body is written from the request class `schema`, each length's fate chosen by `pick`."""
    body = Body(pick)
    data = body.entity(schema)
    frame = encode_request(api_key=key, api_version=version, correlation_id=corr, client_id="nulls", body=data,
                           flexible=bool(schema.__flexible__))
    return frame, body


def random_fates(rng: random.Random) -> Pick:
    return lambda where, nullable, flexible: rng.choice(FATES)


def mutate(frame: bytes, rng: random.Random, kind: str | None = None) -> bytes:
    """`frame` broken one of the MUTATIONS ways (`kind`, else drawn)."""
    kind = kind or rng.choice(MUTATIONS)
    out = bytearray(frame)
    if kind == "flip":
        for _ in range(rng.randint(1, 8)):
            out[rng.randint(4, len(out) - 1)] = rng.randrange(256)
    elif kind == "truncate":
        out = out[: rng.randint(5, len(out))]
        out[0:4] = struct.pack(">i", len(out) - 4)
    elif kind == "extend":
        out += rng.randbytes(rng.randint(1, 64))
        out[0:4] = struct.pack(">i", len(out) - 4)
    else:
        body = rng.randbytes(rng.randint(0, 200))
        out = bytearray(struct.pack(">i", len(body)) + body)
    return bytes(out)


def answer_until_closed(s: socket.socket, timeout: float = 10.0) -> bytes | None:
    """Whatever the listener sends before it closes the connection; None if it keeps it open."""
    s.settimeout(timeout)
    got = b""
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return got
            got += data
    except (ConnectionResetError, BrokenPipeError):
        return got
    except TimeoutError:
        return None


def problems(lines: list[str]) -> list[str]:
    return [line for line in lines if " ERROR " in line or "CRITICAL" in line or "Traceback" in line]
