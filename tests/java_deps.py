"""Where the tests find Apache Kafka's Java parts: the Java client at each version the suite
covers, Kafka itself (broker and command-line tools), and Spark's own Kafka connector
(spark-sql-kafka-0-10, format "kafka"). scripts/java-deps.sh (run by the
README's test command) fetches them from Maven Central into .cache/java/; a test that needs them
fails with that instruction when they are missing, never skips."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
JAVA_DIR = ROOT / "tests" / "java"
CACHE = ROOT / ".cache" / "java"


def _versions() -> dict[str, str]:
    text = (JAVA_DIR / "versions.env").read_text()
    return dict(re.findall(r'^([A-Z_]+)="([^"]*)"', text, re.M))


KAFKA_CLIENT_VERSIONS: tuple[str, ...] = tuple(_versions()["KAFKA_CLIENT_VERSIONS"].split())
KAFKA_VERSION: str = _versions()["KAFKA_VERSION"]
SPARK_KAFKA_VERSION: str = _versions()["SPARK_KAFKA_VERSION"]


def java() -> str:
    """The `java` the tests run (JAVA_HOME's when set)."""
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if not found:
        raise RuntimeError("no java on PATH: the tests need Java 17")
    return found


def jar_dir(name: str) -> Path:
    """.cache/java/<name>, e.g. 'clients-4.4.0' or 'kafka-4.4.0', checked to be complete."""
    d = CACHE / name
    if not (d / ".complete").exists():
        raise RuntimeError(f"{d} is missing: run `bash scripts/java-deps.sh` (the test command does)")
    return d


def client_classpath(version: str) -> str:
    """Apache Kafka's Java client (kafka-clients) at `version`, with slf4j-simple."""
    return str(jar_dir(f"clients-{version}")) + "/*"


def kafka_classpath(version: str = KAFKA_VERSION) -> str:
    """Apache Kafka's broker and tools (kafka_2.13, kafka-tools) at `version`."""
    return str(jar_dir(f"kafka-{version}")) + "/*"


def spark_kafka_jars(version: str = SPARK_KAFKA_VERSION) -> list[Path]:
    """Spark's own Kafka connector (spark-sql-kafka-0-10_2.13 at `version`) and the jars it needs
    beside pyspark's (spark-token-provider-kafka-0-10, kafka-clients, commons-pool2): a
    SparkSession's `spark.jars`, set before its JVM starts."""
    return sorted(jar_dir(f"spark-kafka-{version}").glob("*.jar"))


def run_kafka_tool(
    main_class: str, *args: str, version: str = KAFKA_VERSION, timeout: float = 120,
    check: bool = False, input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run one of Kafka's command-line tools from its jars as bin/kafka-run-class.sh does, e.g.
    run_kafka_tool("org.apache.kafka.tools.TopicCommand", "--bootstrap-server", b, "--list")."""
    cmd = [java(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
           "-cp", kafka_classpath(version), main_class, *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=check,
                          input=input)


PROBE_SRC = JAVA_DIR / "src"


def probe_classes(version: str) -> Path:
    """tests/java/src compiled (javac, Java 17) against the Java client at `version`, into
    .cache/java/probe-<version>-<hash of the sources>/: compiled once, then reused until a source
    changes. Safe under pytest-xdist: each compiler writes a temp dir and renames it into place
    (an atomic rename; the loser of a race keeps the winner's identical classes)."""
    import hashlib
    import tempfile

    sources = sorted(PROBE_SRC.glob("*.java"))
    digest = hashlib.sha256(b"".join(s.name.encode() + s.read_bytes() for s in sources)).hexdigest()[:12]
    out = CACHE / f"probe-{version}-{digest}"
    if (out / ".complete").exists():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".probe-{version}-", dir=CACHE))
    javac = Path(java()).resolve().parent / "javac"  # the JDK of the `java` the tests run
    if not javac.exists():
        found = shutil.which("javac")
        if not found:
            raise RuntimeError("no javac: run `bash scripts/java-deps.sh` (it installs a Java 17 JDK)")
        javac = Path(found)
    res = subprocess.run([str(javac), "-nowarn", "-Xlint:none", "--release", "17", "-d", str(tmp),
                          "-cp", client_classpath(version), *map(str, sources)],
                         capture_output=True, text=True, timeout=300)
    if res.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise RuntimeError(f"javac failed against kafka-clients {version}:\n{res.stdout}{res.stderr}")
    (tmp / ".complete").touch()
    try:
        tmp.rename(out)
    except OSError:  # another worker renamed its copy first
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def probe_command(version: str, scenario: str, **args: object) -> list[str]:
    """The command line running `KavkaClientProbe <scenario> key=value...` on the Java client at
    `version`."""
    cp = f"{probe_classes(version)}{os.pathsep}{client_classpath(version)}"
    return [java(), "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
            "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn", "-cp", cp, "KavkaClientProbe", scenario,
            *(f"{k}={v}" for k, v in args.items())]
