"""`python -m bench.authorization`: what authorization costs on the produce and fetch paths.

Two kavka brokers, each with a PLAINTEXT listener (User:ANONYMOUS, a super user: it creates the
ACLs) and a SASL_PLAINTEXT listener (PLAIN, users `bench` and `root`); confluent-kafka produces
`--records` records of `--record-size` bytes (acks=1, one partition, the settings of
`python -m bench`) to a fresh topic and consumes them back, over SASL, in three modes:

- `off`: the first broker, no `authorizer.class.name` (every request allowed, nothing checked);
- `acls`: the second broker, `authorizer.class.name=kavka` with `--acls` ACLs (10,000 by default),
  as user `bench`, allowed by PREFIXED ACLs only (Write, Read, Create on topics `bench-`, Read on
  groups `bench`: what Kafka requires to create, produce to and read a topic with a group id);
- `super`: the second broker as user `root`, named in `super.users` (the check stops there).

The ACL set is a realistic mix (`acl_set`): LITERAL topic and group ACLs for other principals,
PREFIXED ones of many lengths (some covering `bench-...` topics for other principals, so a check of
bench's topic has ACLs to walk), a few LITERAL `*` wildcards, and DENYs for other principals on the
same patterns, which match the resource but never apply to `bench`.

Then, per mode, `--rate` records/s of 100 B for `--seconds` with linger.ms=0, acks=1: one Produce
request per record, so the broker's CPU per record is its CPU per request, where a per-request
check shows (large batches hide it); and the p50/p99 send-to-ack latency.

The rounds alternate the order of the modes (off, acls, super, then super, acls, off, ...) so drift
in the machine's load falls on all of them. Prints the median MB/s and broker CPU ms per MB of each
mode and its ratio to `off`, then the cost of one `Authorizer.authorize` call over the same ACL set
in this process (ns per check, best of `--repeat` timings): allowed by a PREFIXED ACL, denied (no
ACL applies), a LITERAL hit, and a super user.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import statistics
import sys
import tempfile
import time
import timeit
from pathlib import Path

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclBinding, AclBindingFilter, AdminClient, ResourcePatternType
from confluent_kafka.admin import AclOperation as CkOperation
from confluent_kafka.admin import AclPermissionType as CkPermission
from confluent_kafka.admin import ResourceType as CkResourceType

from bench import workloads
from bench.servers import Broker, start_kavka_listeners
from kavka.authorizer import Acl, Authorizer
from kavka.common import AclOperation, AclPermissionType, PatternType, ResourceType

MODES = ("off", "acls", "super")
USERS = {"bench": "bench-secret-pw", "root": "root-secret-pw"}
JAAS = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
        + " ".join(f'user_{u}="{pw}"' for u, pw in USERS.items()) + ";")
FIGURES = [  # (workload, figure)
    ("produce", "mb_per_s"),
    ("produce", "broker_cpu_ms_per_mb"),
    ("consume", "mb_per_s"),
    ("consume", "broker_cpu_ms_per_mb"),
    ("requests", "broker_cpu_us_per_request"),
    ("requests", "p50_ms"),
    ("requests", "p99_ms"),
]


# ------------------------------------------------------------------ the ACL set


def bench_acls() -> list[Acl]:
    """What user `bench` needs (Kafka's requirements): create, produce to and read `bench-*`
    topics (Create, Write, Read; each of Write and Read implies Describe) with group `bench`."""
    topic = [Acl(ResourceType.TOPIC, "bench-", PatternType.PREFIXED, "User:bench", "*", op, AclPermissionType.ALLOW)
             for op in (AclOperation.CREATE, AclOperation.WRITE, AclOperation.READ)]
    return [*topic, Acl(ResourceType.GROUP, "bench", PatternType.PREFIXED, "User:bench", "*", AclOperation.READ,
                        AclPermissionType.ALLOW)]


def acl_set(n: int) -> list[Acl]:
    """`n` distinct ACLs: bench's own (PREFIXED, see bench_acls) and `n - 4` for other principals.

    Of the others: 5 LITERAL `*` wildcards (Describe for monitoring principals); 2% DENYs for
    other principals on team prefixes, a tenth of them on `bench-` (they cover bench's topics and
    never apply to bench); 15% PREFIXED ALLOWs on team prefixes (`team7.`, `team7.sub2-`), one in a
    hundred on `bench-` for a reader; 8% LITERAL group ACLs; the rest LITERAL topic ACLs (Read or
    Write, a service principal each)."""
    allow, deny = AclPermissionType.ALLOW, AclPermissionType.DENY
    topic, prefixed, literal = ResourceType.TOPIC, PatternType.PREFIXED, PatternType.LITERAL
    out = bench_acls()
    rest = n - len(out)
    out += [Acl(topic, "*", literal, f"User:monitor-{k}", "*", AclOperation.DESCRIBE, allow) for k in range(min(5, rest))]
    out += [Acl(topic, "bench-" if k % 10 == 0 else f"team{k % 400}.", prefixed, f"User:intruder-{k}", "*",
                AclOperation.WRITE, deny) for k in range(rest // 50)]
    out += [Acl(topic, "bench-" if i % 100 == 0 else f"team{i % 400}." + (f"sub{i // 400}-" if i >= 400 else ""),
                prefixed, f"User:reader-{i}" if i % 100 == 0 else f"User:team-{i % 400}",
                f"10.0.{i % 250}.{i % 200}" if i % 3 == 0 else "*",
                (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)[i % 3], allow)
            for i in range(rest * 15 // 100)]
    out += [Acl(ResourceType.GROUP, f"team{i % 400}.group-{i}", literal, f"User:team-{i % 400}", "*",
                AclOperation.READ, allow) for i in range(rest * 8 // 100)]
    i = 0
    while len(out) < n:
        out.append(Acl(topic, f"team{i % 400}.topic-{i}", literal, f"User:svc-{i % 1000}", "*",
                       (AclOperation.READ, AclOperation.WRITE)[i % 2], allow))
        i += 1
    return out


def to_binding(acl: Acl) -> AclBinding:
    return AclBinding(CkResourceType[acl.resource_type.name], acl.resource_name,
                      ResourcePatternType[acl.pattern_type.name], acl.principal, acl.host,
                      CkOperation[acl.operation.name], CkPermission[acl.permission_type.name])


# ------------------------------------------------------------------ brokers


def start(work: Path, *, authorizer: bool) -> tuple[Broker, int]:
    """A broker (its Broker is the PLAINTEXT listener) and its SASL_PLAINTEXT port."""
    def config(ports: dict[str, int]) -> dict[str, str]:
        props = {
            "listeners": f"PLAINTEXT://127.0.0.1:{ports['PLAINTEXT']},SASL://127.0.0.1:{ports['SASL']}",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl.plain.sasl.jaas.config": JAAS,
        }
        if authorizer:
            props |= {"authorizer.class.name": "kavka", "super.users": "User:ANONYMOUS;User:root"}
        return props

    broker, ports = start_kavka_listeners(["PLAINTEXT", "SASL"], config, work=work)
    return broker, ports["SASL"]


def as_user(broker: Broker, sasl_port: int, user: str) -> Broker:
    return dataclasses.replace(broker, port=sasl_port, extra={
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.username": user, "sasl.password": USERS[user]})


def install(broker: Broker, acls: list[Acl], *, chunk: int = 1000, timeout: float = 300.0) -> None:
    """Create the ACLs over the PLAINTEXT listener (a super user) and wait until DescribeAcls
    lists them all."""
    admin = AdminClient({"bootstrap.servers": broker.bootstrap, **workloads.QUIET})
    for i in range(0, len(acls), chunk):
        bindings = [to_binding(a) for a in acls[i:i + chunk]]
        for attempt in range(3):
            try:
                for f in admin.create_acls(bindings, request_timeout=30).values():
                    f.result(timeout=60)
                break
            except KafkaException as e:
                # Once, librdkafka's admin timed out "waiting for controller" on a fresh broker; a
                # creation is idempotent (an ACL equal to an existing one adds nothing), so retry.
                if attempt == 2 or e.args[0].code() != KafkaError._TIMED_OUT:
                    raise
    everything = AclBindingFilter(CkResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                                  CkOperation.ANY, CkPermission.ANY)
    deadline = time.monotonic() + timeout
    while len(admin.describe_acls(everything, request_timeout=60).result(timeout=120)) < len(acls):
        if time.monotonic() > deadline:
            raise TimeoutError(f"the broker did not list {len(acls)} ACLs within {timeout}s")
        time.sleep(0.2)


def one(broker: Broker, *, record_size: int, records: int, rate: int, seconds: float) -> dict[str, dict]:
    p = workloads.produce(broker, record_size=record_size, count=records, acks="1", partitions=1)
    c = workloads.consume(broker, topic=p["topic"], partitions=1, count=records, record_size=record_size)
    out = {"produce": p, "consume": c}
    for r in out.values():
        r["broker_cpu_ms_per_mb"] = r["broker_cpu"] * 1000 / r["mb_per_s"]
    # Large batches hide a per-request cost: at a fixed rate with linger.ms=0 each record is its own
    # Produce request, so the broker's CPU per record is its CPU per request (one Write check each).
    lat = workloads.latency(broker, rate=rate, seconds=seconds)
    lat["broker_cpu_us_per_request"] = lat["broker_cpu"] / rate * 1e6
    out["requests"] = lat
    return out


# ------------------------------------------------------------------ the pure check


def microbench(acls: list[Acl], *, repeat: int, number: int) -> dict[str, float]:
    """ns per `Authorizer.authorize` call (best of `repeat` timings of `number` calls each)."""
    authz = Authorizer(acls, super_users=frozenset({"User:root"}))
    literal = next(a for a in acls if a.pattern_type == PatternType.LITERAL and a.resource_name != "*"
                   and a.resource_type == ResourceType.TOPIC)
    cases = {
        "allowed (PREFIXED)": ("User:bench", AclOperation.WRITE, "bench-0a1b2c3d", True),
        "denied (no ACL applies)": ("User:mallory", AclOperation.WRITE, "bench-0a1b2c3d", False),
        "allowed (LITERAL)": (literal.principal, literal.operation, literal.resource_name, True),
        "super user": ("User:root", AclOperation.WRITE, "bench-0a1b2c3d", True),
    }
    out = {}
    for name, (principal, op, topic, expect) in cases.items():
        got = authz.authorize(principal, "127.0.0.1", op, ResourceType.TOPIC, topic)
        if got != expect:
            raise AssertionError(f"{name}: authorize returned {got}, the ACL set says {expect}")
        t = timeit.Timer(lambda p=principal, o=op, n=topic: authz.authorize(p, "127.0.0.1", o, ResourceType.TOPIC, n))
        out[name] = min(t.repeat(repeat=repeat, number=number)) / number * 1e9
    return out


# ------------------------------------------------------------------ the run


def run(*, rounds: int, record_size: int, records: int, acls: int, repeat: int, number: int, rate: int,
        seconds: float, log=print) -> dict:  # noqa: ANN001
    acl_list = acl_set(acls)
    work = Path(tempfile.mkdtemp(prefix="kavka-bench-authz-"))
    brokers: list[Broker] = []
    try:
        off, off_sasl = start(work / "off", authorizer=False)
        brokers.append(off)
        on, on_sasl = start(work / "acls", authorizer=True)
        brokers.append(on)
        log(f"creating {len(acl_list):,} ACLs")
        t0 = time.perf_counter()
        install(on, acl_list)
        install_s = time.perf_counter() - t0
        views = {"off": as_user(off, off_sasl, "bench"), "acls": as_user(on, on_sasl, "bench"),
                 "super": as_user(on, on_sasl, "root")}
        runs: dict[str, list[dict]] = {m: [] for m in MODES}
        for i in range(rounds):
            for mode in MODES if i % 2 == 0 else MODES[::-1]:
                log(f"round {i + 1}/{rounds}: {mode}")
                runs[mode].append(one(views[mode], record_size=record_size, records=records, rate=rate, seconds=seconds))
    except BaseException:
        for b in brokers:
            log(f"{b.workdir.name}: exit code {b.proc.poll()}; its log ends:\n"
                + (b.workdir / "broker.log").read_text(errors="replace")[-3000:])
        raise
    finally:
        for b in brokers:
            b.stop()
        shutil.rmtree(work, ignore_errors=True)
    median = {m: {w: {f: statistics.median(r[w][f] for r in runs[m]) for f, v in runs[m][0][w].items()
                      if isinstance(v, (int, float))}
                  for w in ("produce", "consume", "requests")}
              for m in MODES}
    log("timing Authorizer.authorize")
    return {"rounds": rounds, "record_size": record_size, "records": records, "acls": len(acl_list),
            "request_rate": rate, "request_seconds": seconds,
            "install_seconds": install_s, "runs": runs, "median": median,
            "authorize_ns": microbench(acl_list, repeat=repeat, number=number),
            "acls_on_bench_topic": len(Authorizer(acl_list).resource_acls(ResourceType.TOPIC, "bench-0a1b2c3d"))}


def table(result: dict) -> str:
    med = result["median"]
    lines = ["| workload | figure | authorizer off | 10,000 ACLs | super user | ACLs / off | super / off |",
             "|---|---|---:|---:|---:|---:|---:|"]
    if result["acls"] != 10_000:
        lines[0] = lines[0].replace("10,000 ACLs", f"{result['acls']:,} ACLs")
    for w, f in FIGURES:
        o, a, s = med["off"][w][f], med["acls"][w][f], med["super"][w][f]
        what = (f"{result['request_rate']:,} Produce requests/s of 100 B" if w == "requests"
                else f"{w} {result['record_size']} B")
        lines.append(f"| {what} | {f} | {o:,.2f} | {a:,.2f} | {s:,.2f} | {workloads.ratio(a, o)} | {workloads.ratio(s, o)} |")
    lines += ["", f"| `Authorizer.authorize`, {result['acls']:,} ACLs | ns per check |", "|---|---:|"]
    for name, v in result["authorize_ns"].items():
        lines.append(f"| {name} | {v:,.0f} |")
    lines += ["", f"{result['acls_on_bench_topic']} ACLs cover bench's topic; a check reads those naming the "
              "requester or User:*."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.authorization", description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=4, help="runs per mode, alternating (default 4)")
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--record-size", type=int, default=1024)
    ap.add_argument("--rate", type=int, default=1_000, help="Produce requests/s of the small-request run (default 1,000)")
    ap.add_argument("--seconds", type=float, default=5.0, help="length of the small-request run (default 5)")
    ap.add_argument("--acls", type=int, default=10_000, help="ACLs on the authorizing broker (default 10,000)")
    ap.add_argument("--smoke", action="store_true", help="tiny counts: checks the harness, figures mean nothing")
    ap.add_argument("--json", type=Path, default=None, help="also write the raw runs and medians here")
    a = ap.parse_args(argv)
    if a.smoke:
        rounds, records, acls, repeat, number, seconds = 2, 2_000, 200, 2, 1_000, 0.5
    else:
        rounds, records, acls, repeat, number, seconds = a.rounds, a.records, a.acls, 5, 100_000, a.seconds
    result = run(rounds=rounds, record_size=a.record_size, records=records, acls=acls, repeat=repeat, number=number,
                 rate=a.rate, seconds=seconds, log=lambda m: print(m, file=sys.stderr, flush=True))
    if a.json:
        a.json.write_text(json.dumps(result, indent=1, default=str))
    print(f"{rounds} alternating rounds per mode, {records:,} records of {a.record_size} B each, "
          f"{result['acls']:,} ACLs (created in {result['install_seconds']:.1f} s), medians")
    print(table(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
