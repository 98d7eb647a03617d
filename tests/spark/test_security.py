"""The connector over TLS and SASL: Spark's `kafka.security.protocol`, `kafka.ssl.*` and
`kafka.sasl.*` options against a real broker.

One broker for the module, formatted with `kavka storage format --add-scram` (user alice,
SCRAM-SHA-512), with a PLAINTEXT listener (confluent-kafka sets up and checks) and SECURE
(SASL_SSL serving SCRAM, its certificate from tests/tls_certs.py). Spark writes a batch over SECURE
as alice and reads it back over SECURE, with the CA as a PEM truststore and host name checking on.
A wrong password fails the query naming the listener and mechanism; options the connector does not
honour are refused naming the option, before any connection. The password shows in no error,
plan string, Spark log line or broker log.
"""

from __future__ import annotations

import pytest
from pyspark.sql import Row

from kavka.spark.options import OptionError, parse_source_options
from tests.broker_harness import BrokerProcess, free_port
from tests.integration.helpers import ck_read_to_end
from tests.spark.util import create_topic
from tests.tls_certs import CA, write_pem_keystore

ALICE_PW = "alice-spark-s3cret-71"
WRONG_PW = "wrong-spark-s3cret-72"
SCRAM_JAAS = 'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" password="{}";'


@pytest.fixture(scope="module")
def secure_broker(tmp_path_factory):
    d = tmp_path_factory.mktemp("spark-secure")
    ca = CA.create()
    (d / "ca.pem").write_bytes(ca.pem())
    write_pem_keystore(d / "server.pem", ca.issue("localhost"))
    plain, secure = free_port(), free_port()
    b = BrokerProcess(d, port=plain, overrides={
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SECURE://127.0.0.1:{secure}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "offsets.topic.replication.factor": "1",
        "connection.failed.authentication.delay.ms": "10",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(d / "server.pem"),
    })
    b.format_args = ["--add-scram", f"SCRAM-SHA-512=[name=alice,password={ALICE_PW}]"]
    b.format()
    b.start()
    b.secure = f"127.0.0.1:{secure}"
    b.ca = d / "ca.pem"
    yield b
    b.stop()
    log = "".join(b.output)
    assert ALICE_PW not in log and WRONG_PW not in log


def _options(b: BrokerProcess, password: str = ALICE_PW) -> dict[str, str]:
    return {
        "kafka.bootstrap.servers": b.secure,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": str(b.ca),
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": SCRAM_JAAS.format(password),
    }


def test_batch_write_and_read_over_sasl_ssl_with_scram(spark, secure_broker, capfd):
    b = secure_broker
    create_topic(b.bootstrap, "spark-secure", 2)
    rows = [Row(key=f"k{i}".encode(), value=f"v{i}".encode()) for i in range(40)]
    spark.createDataFrame(rows).write.format("kavka").options(**_options(b)).option("topic", "spark-secure").mode("append").save()
    assert sorted(r.value for r in ck_read_to_end(b.bootstrap, "spark-secure", [0, 1])) == sorted(r.value for r in rows)

    df = spark.read.format("kavka").options(**_options(b)).option("subscribe", "spark-secure").load()
    got = df.select("key", "value").collect()
    assert sorted((r.key, r.value) for r in got) == sorted((r.key, r.value) for r in rows)
    plans = df._jdf.queryExecution().toString()  # every plan Spark prints (explain(True))
    assert "spark-secure" in plans or "kavka" in plans.lower()
    assert ALICE_PW not in plans

    with pytest.raises(Exception) as err:
        spark.read.format("kavka").options(**_options(b, WRONG_PW)).option("subscribe", "spark-secure").load().collect()
    assert "on listener SASL_SSL with mechanism SCRAM-SHA-512 failed" in str(err.value)
    assert WRONG_PW not in str(err.value)
    out = capfd.readouterr()
    assert ALICE_PW not in out.out + out.err and WRONG_PW not in out.out + out.err


@pytest.mark.parametrize(("extra", "needle"), [
    ({"kafka.sasl.kerberos.service.name": "kafka"}, "kafka.sasl.kerberos.service.name: not supported by this connector"),
    ({"kafka.ssl.keymanager.algorithm": "SunX509"}, "kafka.ssl.keymanager.algorithm: not supported by this connector"),
    ({"kafka.sasl.mechanism": "GSSAPI"}, "kafka.sasl.mechanism: GSSAPI is not supported"),
    ({"kafka.sasl.mechanism": None}, "kafka.sasl.mechanism: GSSAPI (Kafka's default, which needs Kerberos) is not supported"),
    ({"kafka.ssl.truststore.type": "JKS"}, "kafka.ssl.truststore.type: JKS"),
    ({"kafka.ssl.truststore.location": "/nonexistent/ca.pem"}, "kafka.ssl.truststore.location"),
    ({"kafka.security.protocol": "PLAINTEXT"}, ": security.protocol is PLAINTEXT, so this key would have no effect"),
    ({"kafka.security.protocol": None, "kafka.ssl.truststore.type": None, "kafka.ssl.truststore.location": None,
      "kafka.sasl.mechanism": None}, "kafka.sasl.jaas.config: security.protocol is PLAINTEXT, so this key would have no effect"),
    ({"kafka.security.protocol": "TLS"}, "kafka.security.protocol: 'TLS' is not one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL"),
    ({"kafka.sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="a" password="' + WRONG_PW + '";'},
     "kafka.sasl.jaas.config: SCRAM-SHA-512 needs the login module"),
])
def test_options_the_connector_cannot_honour_are_refused_naming_them(secure_broker, extra, needle):
    opts = {**_options(secure_broker), "subscribe": "t"}
    for k, v in extra.items():
        if v is None:
            opts.pop(k)
        else:
            opts[k] = v
    with pytest.raises(OptionError) as err:
        parse_source_options(opts, streaming=False)
    assert needle in str(err.value)
    assert WRONG_PW not in str(err.value) and ALICE_PW not in str(err.value)


def test_the_security_options_stay_out_of_reprs(secure_broker):
    opts = parse_source_options({**_options(secure_broker), "subscribe": "t"}, streaming=False)
    assert ALICE_PW not in repr(opts)
    assert opts.client.client_security().protocol == "SASL_SSL"
