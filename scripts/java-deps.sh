#!/usr/bin/env bash
# Fetches the Java parts the tests use (never needed to run kavka): Apache Kafka's Java client at
# each version in tests/java/versions.env, Kafka itself (broker and tools), and Spark's own Kafka
# connector (spark-sql-kafka-0-10, with what it needs beside pyspark's jars), from Maven Central
# into .cache/ (a Maven repository in .cache/m2, and one directory of jars per artifact set in
# .cache/java/<name>-<version>/, used as `java -cp '.cache/java/<dir>/*'`). Installs Debian's
# Maven when it is missing. Safe to re-run: a directory already filled is kept.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=/dev/null
source tests/java/versions.env
SUDO=""
[ "$(id -u)" -ne 0 ] && command -v sudo >/dev/null && SUDO="sudo"
if ! command -v javac >/dev/null; then  # tests/java/src is compiled by the tests (javac)
  echo "== installing a Java 17 compiler (Debian)"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq openjdk-17-jdk-headless >/dev/null
fi
if ! command -v mvn >/dev/null; then
  echo "== installing maven (Debian)"
  $SUDO apt-get update -qq && $SUDO apt-get install -y -qq maven >/dev/null
fi
fetch() {  # fetch <pom dir> <version> <output name> [<version property>, kafka.version]
  local out=".cache/java/$3"
  if [ -f "$out/.complete" ]; then return; fi
  echo "== fetching $3 from Maven Central into $out"
  rm -rf "$out"
  mvn -B -q -f "tests/java/$1/pom.xml" -Dmaven.repo.local="$PWD/.cache/m2" \
    -D"${4:-kafka.version}=$2" dependency:copy-dependencies -DoutputDirectory="$PWD/$out"
  touch "$out/.complete"
}
for v in $KAFKA_CLIENT_VERSIONS; do fetch clients "$v" "clients-$v"; done
fetch kafka "$KAFKA_VERSION" "kafka-$KAFKA_VERSION"
fetch spark-kafka "$SPARK_KAFKA_VERSION" "spark-kafka-$SPARK_KAFKA_VERSION" spark.version
