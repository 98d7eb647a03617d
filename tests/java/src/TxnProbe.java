// A transactional producer run from the tests (tests/integration/test_java_transactions.py) with
// Apache Kafka's Java client, unmodified: initTransactions, then N transactions of three records
// each, every third one aborted, the others committed with sendOffsetsToTransaction. Prints one
// JSON line per transaction ({"txn": i, "committed": true/false, "offsets": [..]}) and a final
// {"done": N}. With "fence" in place of N: Kafka's testFencingOnCommit (see fence()). A Kafka
// 4.x client uses transactions v2 (KIP-890 part 2) when the broker finalizes transaction.version
// 2; a 3.9 client uses v1.
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;
import java.util.concurrent.Future;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringSerializer;

public final class TxnProbe {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1], txnId = args[2];
        if (args[3].equals("fence")) {
            fence(bootstrap, topic, txnId);
            return;
        }
        int count = Integer.parseInt(args[3]);
        String group = args[4];
        Properties p = props(bootstrap, txnId);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(p)) {
            run(producer, topic, count, group);
        }
        System.out.println("{\"done\": " + count + "}");
    }

    // Kafka's testFencingOnCommit: a zombie (first) with a transaction open, a new instance
    // (second) with the same transactional.id; the zombie's commit must fail fenced and its
    // records stay invisible to read_committed; the new instance commits. Prints
    // {"zombie": "<exception class>"} and {"second": "committed"}.
    static void fence(String bootstrap, String topic, String txnId) throws Exception {
        try (KafkaProducer<String, String> first = new KafkaProducer<>(props(bootstrap, txnId))) {
            first.initTransactions();
            first.beginTransaction();
            first.send(new ProducerRecord<>(topic, 0, "zombie", "zombie-0")).get();
            try (KafkaProducer<String, String> second = new KafkaProducer<>(props(bootstrap, txnId))) {
                second.initTransactions();
                String outcome = "committed";
                try {
                    first.send(new ProducerRecord<>(topic, 1, "zombie", "zombie-1")).get();
                    first.commitTransaction();
                } catch (Exception e) {
                    Throwable c = e.getCause() != null && e instanceof java.util.concurrent.ExecutionException ? e.getCause() : e;
                    outcome = c.getClass().getSimpleName();
                }
                System.out.println("{\"zombie\": \"" + outcome + "\"}");
                second.beginTransaction();
                second.send(new ProducerRecord<>(topic, 0, "second", "second-0")).get();
                second.commitTransaction();
                System.out.println("{\"second\": \"committed\"}");
            }
        }
    }

    static Properties props(String bootstrap, String txnId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("transactional.id", txnId);
        p.put("acks", "all");
        p.put("linger.ms", "0");
        p.put("key.serializer", StringSerializer.class.getName());
        p.put("value.serializer", StringSerializer.class.getName());
        return p;
    }

    static void run(KafkaProducer<String, String> producer, String topic, int count, String group) throws Exception {
        {
            producer.initTransactions();
            for (int i = 0; i < count; i++) {
                producer.beginTransaction();
                StringBuilder offsets = new StringBuilder();
                for (int j = 0; j < 3; j++) {
                    ProducerRecord<String, String> r = new ProducerRecord<>(topic, j % 2, "k" + i, "txn-" + i + "-" + j);
                    r.headers().add("txn", Integer.toString(i).getBytes("UTF-8"));
                    Future<RecordMetadata> f = producer.send(r);
                    RecordMetadata md = f.get();
                    if (offsets.length() > 0) offsets.append(',');
                    offsets.append("[").append(md.partition()).append(',').append(md.offset()).append("]");
                }
                boolean commit = i % 3 != 2;
                if (commit) {
                    Map<TopicPartition, OffsetAndMetadata> consumed = new HashMap<>();
                    consumed.put(new TopicPartition(topic, 0), new OffsetAndMetadata(i + 1));
                    producer.sendOffsetsToTransaction(consumed, new ConsumerGroupMetadata(group));
                    producer.commitTransaction();
                } else {
                    producer.abortTransaction();
                }
                System.out.println("{\"txn\": " + i + ", \"committed\": " + commit + ", \"offsets\": [" + offsets + "]}");
            }
        }
    }
}
