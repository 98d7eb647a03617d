// Apache Kafka's Java client (unmodified, kafka-clients at the version on the classpath) driven
// against kavka by tests/integration/test_java_client.py. One scenario per JVM:
//
//   java -cp <clients jars>:<classes> KavkaClientProbe <scenario> key=value ...
//
// Every result is one JSON object per line on stdout ({"event": ...}); the Python test checks
// them (records read back exactly: keys, values, headers, timestamps, offsets). Bytes are
// base64. An Admin step that fails prints {"event":"step","step":...,"error":...} and the
// scenario goes on, so one run shows every failure. No JSON library: kafka-clients has none.
// Compiled by the test (javac, no build tool) against the 3.9 and the 4.x client alike, so it
// uses only calls both have.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.function.Supplier;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.acl.*;
import org.apache.kafka.common.resource.PatternType;
import org.apache.kafka.common.resource.ResourcePattern;
import org.apache.kafka.common.resource.ResourcePatternFilter;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.kafka.common.serialization.ByteArraySerializer;

public final class KavkaClientProbe {
    static Map<String, String> args = new HashMap<>();
    static final Object OUT = new Object();

    public static void main(String[] argv) throws Exception {
        for (int i = 1; i < argv.length; i++) {
            int eq = argv[i].indexOf('=');
            args.put(argv[i].substring(0, eq), argv[i].substring(eq + 1));
        }
        emit(obj("event", "start", "scenario", argv[0], "client", clientVersion()));
        try {
            switch (argv[0]) {
                case "produce": produce(); break;
                case "group": group(); break;
                case "static": staticMembership(); break;
                case "seek": seek(); break;
                case "admin": adminCalls(); break;
                case "logdirs": logDirs(); break;
                case "txn": txn(); break;
                default: throw new IllegalArgumentException("unknown scenario " + argv[0]);
            }
        } catch (Throwable t) {
            emit(obj("event", "error", "error", t.getClass().getName(), "message", String.valueOf(t.getMessage()),
                    "trace", trace(t)));
            System.out.flush();
            System.exit(1);
        }
        emit(obj("event", "done"));
        System.out.flush();
        System.exit(0);  // client threads must not keep the JVM up
    }

    // ---- scenarios ---------------------------------------------------------------------------

    /** For each codec/acks combination: a producer (idempotent at acks=all) sends sample records to a new
     * one-partition topic; a consumer reads the partition from the beginning. */
    static void produce() throws Exception {
        int count = Integer.parseInt(arg("count"));
        long base = System.currentTimeMillis() - 3_600_000L;
        try (Admin admin = admin()) {
            for (String combo : arg("combos").split(",")) {  // codec/acks, e.g. zstd/all,none/0
                {
                    String codec = combo.split("/")[0], acks = combo.split("/")[1];
                    String topic = arg("topic") + "-" + codec + "-" + acks;
                    createTopic(admin, topic, 1, (short) 3, Map.of());
                    Properties p = producerProps();
                    p.put("compression.type", codec);
                    p.put("acks", acks);
                    p.put("enable.idempotence", String.valueOf(acks.equals("all")));
                    p.put("linger.ms", "20");
                    List<ProducerRecord<byte[], byte[]>> records = sampleRecords(topic, 0, count, base);
                    List<Future<RecordMetadata>> futures = new ArrayList<>();
                    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
                        for (ProducerRecord<byte[], byte[]> r : records) futures.add(producer.send(r));
                        producer.flush();
                        for (int i = 0; i < records.size(); i++) {
                            RecordMetadata md = futures.get(i).get(30, TimeUnit.SECONDS);
                            Map<String, Object> e = recordJson(records.get(i));
                            e.put("event", "sent");
                            e.put("topic", topic);
                            e.put("codec", codec);
                            e.put("acks", acks);
                            e.put("offset", md.hasOffset() ? md.offset() : -1L);
                            e.put("partition", md.partition());
                            emit(e);
                        }
                    }
                    TopicPartition tp = new TopicPartition(topic, 0);
                    for (ConsumerRecord<byte[], byte[]> r : readAll(List.of(tp), count, "read_uncommitted")) {
                        Map<String, Object> e = consumed(r);
                        e.put("event", "read");
                        e.put("codec", codec);
                        e.put("acks", acks);
                        emit(e);
                    }
                }
            }
        }
    }

    /** Two members of one group (classic with an assignor, or group.protocol=consumer): the first
     * reads half the records alone, the second joins (a rebalance), both read the rest; offsets
     * are committed after each poll and before partitions are revoked. */
    static void group() throws Exception {
        String topic = arg("topic"), groupId = arg("group");
        int count = Integer.parseInt(arg("count")), parts = Integer.parseInt(arg("partitions"));
        long base = System.currentTimeMillis() - 600_000L;
        try (Admin admin = admin()) {
            createTopic(admin, topic, parts, (short) 3, Map.of());
            produceSent(topic, parts, 0, count / 2, base);
            Member a = new Member("a", groupId, topic, null);
            a.start();
            waitFor(() -> a.assigned.size() == parts && a.readCount() == count / 2, 60, "member a alone to read the first half");
            Member b = new Member("b", groupId, topic, null);
            b.start();
            waitFor(() -> !a.assigned.isEmpty() && !b.assigned.isEmpty()
                    && a.assigned.size() + b.assigned.size() == parts
                    && Collections.disjoint(a.assigned, b.assigned), 60, "the two members to share the partitions");
            emit(obj("event", "shared", "a", tps(a.assigned), "b", tps(b.assigned)));
            produceSent(topic, parts, count / 2, count, base);
            waitFor(() -> a.readCount() + b.readCount() >= count && a.committedAll && b.committedAll, 60,
                    "the two members to read every record");
            ConsumerGroupDescription d = admin.describeConsumerGroups(List.of(groupId)).all().get().get(groupId);
            emit(groupJson(d));
            a.stop();
            b.stop();
            Map<TopicPartition, OffsetAndMetadata> committed =
                    admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata().get();
            emit(obj("event", "committed", "offsets", offsetsJson(committed)));
        }
    }

    /** Static membership (group.instance.id): two static members share the partitions; one is
     * closed and a new consumer with its instance id takes its place with the same assignment,
     * without a rebalance of the other. */
    static void staticMembership() throws Exception {
        String topic = arg("topic"), groupId = arg("group");
        int parts = Integer.parseInt(arg("partitions"));
        try (Admin admin = admin()) {
            createTopic(admin, topic, parts, (short) 3, Map.of());
            Member a = new Member("a", groupId, topic, "instance-a");
            Member b = new Member("b", groupId, topic, "instance-b");
            a.start();
            b.start();
            waitFor(() -> a.assigned.size() + b.assigned.size() == parts && !a.assigned.isEmpty() && !b.assigned.isEmpty()
                    && Collections.disjoint(a.assigned, b.assigned), 60, "the static members to share the partitions");
            waitFor(() -> stableGroup(admin, groupId), 30, "the group to be stable");
            emit(groupJson(admin.describeConsumerGroups(List.of(groupId)).all().get().get(groupId)));
            Set<TopicPartition> bBefore = new HashSet<>(b.assigned);
            int aCallbacks = a.callbacks.get();
            emit(obj("event", "before", "a", tps(a.assigned), "b", tps(bBefore), "a_callbacks", aCallbacks));
            b.stop();
            Member b2 = new Member("b2", groupId, topic, "instance-b");
            b2.start();
            waitFor(() -> !b2.assigned.isEmpty(), 60, "the new instance-b to get its assignment");
            waitFor(() -> stableGroup(admin, groupId), 30, "the group to be stable again");
            emit(obj("event", "after", "a", tps(a.assigned), "b2", tps(b2.assigned), "a_callbacks", a.callbacks.get()));
            emit(groupJson(admin.describeConsumerGroups(List.of(groupId)).all().get().get(groupId)));
            a.stop();
            b2.stop();
        }
    }

    /** beginningOffsets/endOffsets, offsetsForTimes, seek, seekToEnd, position, deleteRecords, and
     * Admin listOffsets (earliest, latest, max timestamp, by timestamp). */
    static void seek() throws Exception {
        String topic = arg("topic");
        int count = Integer.parseInt(arg("count"));
        long base = System.currentTimeMillis() - 3_600_000L;
        TopicPartition tp = new TopicPartition(topic, 0);
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1, (short) 3, Map.of());
            produceSent(topic, 1, 0, count, base);
            try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(null))) {
                c.assign(List.of(tp));
                emit(obj("event", "offsets", "beginning", c.beginningOffsets(List.of(tp)).get(tp),
                        "end", c.endOffsets(List.of(tp)).get(tp)));
                Map<TopicPartition, Long> q = new HashMap<>();
                for (long ts : new long[] {base - 1, base + 7500, base + 7000, base + (count - 1) * 1000L, base + count * 1000L}) {
                    q.put(tp, ts);
                    OffsetAndTimestamp ot = c.offsetsForTimes(q).get(tp);
                    emit(obj("event", "for_time", "ts", ts, "offset", ot == null ? null : ot.offset(),
                            "timestamp", ot == null ? null : ot.timestamp()));
                }
                long at = Long.parseLong(arg("seek"));
                c.seek(tp, at);
                emit(obj("event", "position", "after", "seek", "position", c.position(tp)));
                for (ConsumerRecord<byte[], byte[]> r : pollUntil(c, count - (int) at)) {
                    Map<String, Object> e = consumed(r);
                    e.put("event", "read");
                    emit(e);
                }
                c.seekToEnd(List.of(tp));
                emit(obj("event", "position", "after", "seekToEnd", "position", c.position(tp)));
                c.seekToBeginning(List.of(tp));
                emit(obj("event", "position", "after", "seekToBeginning", "position", c.position(tp)));
                long cut = Long.parseLong(arg("delete_before"));
                DeletedRecords dr = admin.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(cut))).lowWatermarks().get(tp).get();
                emit(obj("event", "deleted", "low_watermark", dr.lowWatermark(),
                        "beginning", c.beginningOffsets(List.of(tp)).get(tp)));
                Map<String, OffsetSpec> specs = new LinkedHashMap<>();
                specs.put("earliest", OffsetSpec.earliest());
                specs.put("latest", OffsetSpec.latest());
                specs.put("max_timestamp", OffsetSpec.maxTimestamp());
                specs.put("for_timestamp", OffsetSpec.forTimestamp(base + 10_500));
                for (Map.Entry<String, OffsetSpec> s : specs.entrySet()) {
                    ListOffsetsResult.ListOffsetsResultInfo info = admin.listOffsets(Map.of(tp, s.getValue())).all().get().get(tp);
                    emit(obj("event", "list_offsets", "spec", s.getKey(), "offset", info.offset(), "timestamp", info.timestamp()));
                }
            }
        }
    }

    /** The Admin client's calls for topics, configs, partitions, groups and offsets, elections,
     * reassignments, the quorum, the cluster and features. */
    static void adminCalls() throws Exception {
        String prefix = arg("topic");
        String a = prefix + "-a", b = prefix + "-b", c = prefix + "-c", r = prefix + "-r", g = prefix + "-group";
        try (Admin admin = admin()) {
            step("describeCluster", () -> {
                DescribeClusterResult d = admin.describeCluster();
                List<Object> nodes = new ArrayList<>();
                for (Node n : d.nodes().get()) nodes.add(obj("id", n.id(), "host", n.host(), "port", n.port(), "rack", n.rack()));
                return obj("cluster_id", d.clusterId().get(), "controller", d.controller().get().id(), "nodes", nodes);
            });
            step("describeFeatures", () -> {
                FeatureMetadata f = admin.describeFeatures().featureMetadata().get();
                Map<String, Object> fin = new TreeMap<>(), sup = new TreeMap<>();
                f.finalizedFeatures().forEach((k, v) -> fin.put(k, List.of(v.minVersionLevel(), v.maxVersionLevel())));
                f.supportedFeatures().forEach((k, v) -> sup.put(k, List.of(v.minVersion(), v.maxVersion())));
                return obj("finalized", fin, "supported", sup, "epoch", f.finalizedFeaturesEpoch().orElse(-1L));
            });
            step("describeMetadataQuorum", () -> {
                QuorumInfo q = admin.describeMetadataQuorum().quorumInfo().get();
                List<Object> voters = new ArrayList<>();
                for (QuorumInfo.ReplicaState v : q.voters()) voters.add(obj("id", v.replicaId(), "log_end_offset", v.logEndOffset()));
                return obj("leader", q.leaderId(), "epoch", q.leaderEpoch(), "high_watermark", q.highWatermark(), "voters", voters,
                        "observers", q.observers().size());
            });
            step("createTopics", () -> {
                NewTopic ta = new NewTopic(a, 3, (short) 3).configs(Map.of("retention.ms", "123456", "cleanup.policy", "compact"));
                NewTopic tb = new NewTopic(b, Map.of(0, List.of(1, 2), 1, List.of(2, 3)));
                admin.createTopics(List.of(ta, tb)).all().get();
                admin.createTopics(List.of(new NewTopic(c, 1, (short) 1)), new CreateTopicsOptions().validateOnly(true)).all().get();
                CreateTopicsResult dup = admin.createTopics(List.of(new NewTopic(a, 1, (short) 1)));
                String dupError = null;
                try { dup.all().get(); } catch (ExecutionException e) { dupError = e.getCause().getClass().getSimpleName(); }
                return obj("duplicate_error", dupError);
            });
            step("listTopics", () -> {
                Set<String> names = admin.listTopics().names().get();
                return obj("a", names.contains(a), "b", names.contains(b), "c", names.contains(c));
            });
            step("describeTopics", () -> describeTopics(admin, List.of(a, b)));
            step("describeConfigs.topic", () -> configJson(admin, new ConfigResource(ConfigResource.Type.TOPIC, a),
                    "retention.ms", "cleanup.policy", "segment.bytes"));
            step("incrementalAlterConfigs.topic", () -> {
                ConfigResource res = new ConfigResource(ConfigResource.Type.TOPIC, a);
                admin.incrementalAlterConfigs(Map.of(res, List.of(
                        new AlterConfigOp(new ConfigEntry("retention.ms", "654321"), AlterConfigOp.OpType.SET),
                        new AlterConfigOp(new ConfigEntry("cleanup.policy", ""), AlterConfigOp.OpType.DELETE)))).all().get();
                awaitConfig(admin, res, "retention.ms", "654321");
                awaitConfig(admin, res, "cleanup.policy", "delete");
                return configJson(admin, res, "retention.ms", "cleanup.policy");
            });
            step("describeConfigs.broker", () -> configJson(admin, new ConfigResource(ConfigResource.Type.BROKER, "1"),
                    "log.retention.check.interval.ms", "producer.id.expiration.ms", "num.partitions"));
            step("incrementalAlterConfigs.broker", () -> {
                ConfigResource res = new ConfigResource(ConfigResource.Type.BROKER, "1");
                admin.incrementalAlterConfigs(Map.of(res, List.of(
                        new AlterConfigOp(new ConfigEntry("producer.id.expiration.ms", "7654321"), AlterConfigOp.OpType.SET)))).all().get();
                awaitConfig(admin, res, "producer.id.expiration.ms", "7654321");
                Map<String, Object> set = configJson(admin, res, "producer.id.expiration.ms");
                admin.incrementalAlterConfigs(Map.of(res, List.of(
                        new AlterConfigOp(new ConfigEntry("producer.id.expiration.ms", ""), AlterConfigOp.OpType.DELETE)))).all().get();
                awaitConfig(admin, res, "producer.id.expiration.ms", "86400000");
                return obj("set", set, "deleted", configJson(admin, res, "producer.id.expiration.ms"));
            });
            step("createPartitions", () -> {
                admin.createPartitions(Map.of(a, NewPartitions.increaseTo(5))).all().get();
                return obj("partitions", admin.describeTopics(List.of(a)).allTopicNames().get().get(a).partitions().size());
            });
            step("deleteTopics", () -> {
                admin.deleteTopics(List.of(b)).all().get();
                // Each listTopics asks the least-loaded broker, and brokers apply the deletion a
                // moment apart (as Kafka's do), so a second listing may reach one that has not yet:
                // the answer is the listing that ended the wait (a topic never leaving times out).
                boolean[] listed = {true};
                waitFor(() -> !(listed[0] = admin.listTopics().names().get().contains(b)), 30,
                        "the deleted topic to leave listTopics");
                return obj("listed", listed[0]);
            });
            step("electLeaders", () -> {
                Set<TopicPartition> tps = Set.of(new TopicPartition(a, 0), new TopicPartition(a, 1));
                Map<TopicPartition, Optional<Throwable>> res = admin.electLeaders(ElectionType.PREFERRED, tps).partitions().get();
                Map<String, Object> out = new TreeMap<>();
                res.forEach((tp, err) -> out.put(tp.toString(), err.map(e -> e.getClass().getSimpleName()).orElse(null)));
                return obj("results", out);
            });
            step("alterPartitionReassignments", () -> {
                admin.createTopics(List.of(new NewTopic(r, Map.of(0, List.of(1, 2))))).all().get();
                TopicPartition tp = new TopicPartition(r, 0);
                produceSent(r, 1, 0, 20, System.currentTimeMillis());
                admin.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(List.of(2, 3))))).all().get();
                Map<TopicPartition, PartitionReassignment> listed = admin.listPartitionReassignments().reassignments().get();
                waitFor(() -> admin.listPartitionReassignments().reassignments().get().isEmpty()
                        && replicaIds(admin.describeTopics(List.of(r)).allTopicNames().get().get(r).partitions().get(0)).equals(List.of(2, 3)),
                        60, "the reassignment to finish");
                TopicPartitionInfo info = admin.describeTopics(List.of(r)).allTopicNames().get().get(r).partitions().get(0);
                PartitionReassignment pr = listed.get(tp);
                return obj("listed", pr == null ? null : obj("replicas", pr.replicas(), "adding", pr.addingReplicas(), "removing", pr.removingReplicas()),
                        "replicas", replicaIds(info), "end_offset", admin.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get().get(tp).offset());
            });
            step("groupOffsets", () -> groupOffsets(admin, a, g));
            step("acls", () -> {
                String user = "User:" + prefix;
                ResourcePattern topicPattern = new ResourcePattern(org.apache.kafka.common.resource.ResourceType.TOPIC, a, PatternType.LITERAL);
                ResourcePattern groupPattern = new ResourcePattern(org.apache.kafka.common.resource.ResourceType.GROUP, prefix, PatternType.PREFIXED);
                admin.createAcls(List.of(
                        new AclBinding(topicPattern, new AccessControlEntry(user, "*", AclOperation.READ, AclPermissionType.ALLOW)),
                        new AclBinding(groupPattern, new AccessControlEntry(user, "*", AclOperation.READ, AclPermissionType.ALLOW)),
                        new AclBinding(topicPattern, new AccessControlEntry(user, "10.0.0.1", AclOperation.WRITE, AclPermissionType.DENY))))
                        .all().get();
                AclBindingFilter byUser = new AclBindingFilter(ResourcePatternFilter.ANY,
                        new AccessControlEntryFilter(user, null, AclOperation.ANY, AclPermissionType.ANY));
                waitFor(() -> admin.describeAcls(byUser).values().get().size() == 3, 20, "the three ACLs to be described");
                List<String> described = aclStrings(admin.describeAcls(byUser).values().get());
                Collection<AclBinding> deleted = admin.deleteAcls(List.of(new AclBindingFilter(topicPattern.toFilter(),
                        AccessControlEntryFilter.ANY))).all().get();
                waitFor(() -> admin.describeAcls(byUser).values().get().size() == 1, 20, "one ACL to be left");
                return obj("described", described, "deleted", aclStrings(deleted),
                        "left", aclStrings(admin.describeAcls(byUser).values().get()));
            });
        }
    }

    static Map<String, Object> groupOffsets(Admin admin, String topic, String groupId) throws Exception {
        TopicPartition p0 = new TopicPartition(topic, 0), p1 = new TopicPartition(topic, 1);
        produceSent(topic, 2, 0, 10, System.currentTimeMillis());
        Map<String, Object> out = new LinkedHashMap<>();
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(consumerProps(groupId))) {
            c.subscribe(List.of(topic));
            waitFor(() -> { c.poll(Duration.ofMillis(100)); return !c.assignment().isEmpty(); }, 30, "the consumer to join");
            c.commitSync(Map.of(p0, new OffsetAndMetadata(3, "meta-3"), p1, new OffsetAndMetadata(2)));
            List<Object> listed = new ArrayList<>();
            for (ConsumerGroupListing l : admin.listConsumerGroups().all().get())
                if (l.groupId().equals(groupId)) listed.add(obj("group", l.groupId(), "simple", l.isSimpleConsumerGroup()));
            out.put("listed", listed);
            out.put("described", groupJson(admin.describeConsumerGroups(List.of(groupId)).all().get().get(groupId)));
            out.put("offsets", offsetsJson(admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata().get()));
            String alterActive = null;
            try {
                admin.alterConsumerGroupOffsets(groupId, Map.of(p0, new OffsetAndMetadata(1))).all().get();
            } catch (ExecutionException e) { alterActive = e.getCause().getClass().getSimpleName(); }
            out.put("alter_while_active", alterActive);
            String deleteActive = null;
            try {
                admin.deleteConsumerGroupOffsets(groupId, Set.of(p1)).all().get();
            } catch (ExecutionException e) { deleteActive = e.getCause().getClass().getSimpleName(); }
            out.put("delete_offsets_while_subscribed", deleteActive);
        }
        waitFor(() -> admin.describeConsumerGroups(List.of(groupId)).all().get().get(groupId).members().isEmpty(), 30,
                "the group to be empty");
        admin.alterConsumerGroupOffsets(groupId, Map.of(p0, new OffsetAndMetadata(5, "five"))).all().get();
        out.put("after_alter", offsetsJson(admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata().get()));
        admin.deleteConsumerGroupOffsets(groupId, Set.of(p1)).all().get();
        out.put("after_delete_offsets", offsetsJson(admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata().get()));
        admin.deleteConsumerGroups(List.of(groupId)).all().get();
        boolean stillListed = false;
        for (ConsumerGroupListing l : admin.listConsumerGroups().all().get()) stillListed |= l.groupId().equals(groupId);
        out.put("listed_after_delete", stillListed);
        return out;
    }

    /** describeLogDirs, alterReplicaLogDirs (a real move to the broker's other dir),
     * describeReplicaLogDirs. */
    static void logDirs() throws Exception {
        String topic = arg("topic");
        int broker = Integer.parseInt(arg("broker"));
        TopicPartition tp = new TopicPartition(topic, 0);
        TopicPartitionReplica replica = new TopicPartitionReplica(topic, 0, broker);
        try (Admin admin = admin()) {
            createTopic(admin, topic, 1, (short) 3, Map.of());
            produceSent(topic, 1, 0, Integer.parseInt(arg("count")), System.currentTimeMillis() - 60_000);
            Map<String, LogDirDescription> dirs = admin.describeLogDirs(List.of(broker)).allDescriptions().get().get(broker);
            List<Object> dj = new ArrayList<>();
            String current = null, other = null;
            for (Map.Entry<String, LogDirDescription> e : dirs.entrySet()) {
                ReplicaInfo ri = e.getValue().replicaInfos().get(tp);
                dj.add(obj("path", e.getKey(), "error", e.getValue().error() == null ? null : e.getValue().error().getClass().getSimpleName(),
                        "total_bytes", e.getValue().totalBytes().orElse(-1), "usable_bytes", e.getValue().usableBytes().orElse(-1),
                        "replica", ri == null ? null : obj("size", ri.size(), "offset_lag", ri.offsetLag(), "future", ri.isFuture())));
                if (ri != null) current = e.getKey(); else other = e.getKey();
            }
            emit(obj("event", "log_dirs", "dirs", dj));
            DescribeReplicaLogDirsResult.ReplicaLogDirInfo before = admin.describeReplicaLogDirs(List.of(replica)).all().get().get(replica);
            emit(obj("event", "replica_dir", "when", "before", "current", before.getCurrentReplicaLogDir(), "future", before.getFutureReplicaLogDir()));
            final String target = other;
            admin.alterReplicaLogDirs(Map.of(replica, target)).all().get();
            waitFor(() -> target.equals(admin.describeReplicaLogDirs(List.of(replica)).all().get().get(replica).getCurrentReplicaLogDir()),
                    60, "the replica to move to " + target);
            DescribeReplicaLogDirsResult.ReplicaLogDirInfo after = admin.describeReplicaLogDirs(List.of(replica)).all().get().get(replica);
            emit(obj("event", "replica_dir", "when", "after", "from", current, "current", after.getCurrentReplicaLogDir(),
                    "future", after.getFutureReplicaLogDir()));
            ReplicaInfo moved = admin.describeLogDirs(List.of(broker)).allDescriptions().get().get(broker).get(target).replicaInfos().get(tp);
            emit(obj("event", "moved", "size", moved == null ? null : moved.size()));
        }
    }

    /** A transactional producer: commit (with sendOffsetsToTransaction), abort, commit; a
     * read_committed consumer sees only the committed records; then the transaction Admin calls.
     * Every send must succeed (a failed one ends the run with its exception). With linger_ms=0 and
     * pause_ms=N the records leave one batch each, N ms apart, so a partition has several batches
     * of the producer in flight while its first is still being verified or added. */
    static void txn() throws Exception {
        String topic = arg("topic"), txnId = arg("txn_id"), groupId = arg("group");
        int pauseMs = Integer.parseInt(args.getOrDefault("pause_ms", "0"));
        long base = System.currentTimeMillis() - 60_000L;
        List<TopicPartition> tps = List.of(new TopicPartition(topic, 0), new TopicPartition(topic, 1));
        try (Admin admin = admin()) {
            createTopic(admin, topic, 2, (short) 3, Map.of());
            Properties p = producerProps();
            p.put("transactional.id", txnId);
            p.put("acks", "all");
            if (args.containsKey("linger_ms")) p.put("linger.ms", arg("linger_ms"));
            try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
                 KafkaConsumer<byte[], byte[]> groupConsumer = new KafkaConsumer<>(consumerProps(groupId))) {
                producer.initTransactions();
                String[] plan = arg("plan").split(",");  // e.g. commit:10,abort:5,commit:3
                int n = 0;
                for (String s : plan) {
                    String[] kv = s.split(":");
                    int k = Integer.parseInt(kv[1]);
                    producer.beginTransaction();
                    List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
                    for (int i = n; i < n + k; i++) recs.add(sampleRecord(topic, i % 2, i, base));
                    List<Future<RecordMetadata>> sends = new ArrayList<>();
                    for (ProducerRecord<byte[], byte[]> rec : recs) {
                        sends.add(producer.send(rec));
                        if (pauseMs > 0) Thread.sleep(pauseMs);
                    }
                    producer.flush();
                    for (int i = 0; i < sends.size(); i++) {
                        try {
                            sends.get(i).get();
                        } catch (ExecutionException e) {
                            throw new RuntimeException("send of record " + (n + i) + " to partition " + recs.get(i).partition()
                                    + " (" + kv[0] + " transaction) failed", e.getCause());
                        }
                    }
                    producer.sendOffsetsToTransaction(Map.of(tps.get(0), new OffsetAndMetadata(n + k)), groupConsumer.groupMetadata());
                    if (kv[0].equals("commit")) producer.commitTransaction(); else producer.abortTransaction();
                    for (ProducerRecord<byte[], byte[]> rec : recs) {
                        Map<String, Object> e = recordJson(rec);
                        e.put("event", "sent");
                        e.put("outcome", kv[0]);
                        e.put("partition", rec.partition());
                        emit(e);
                    }
                    n += k;
                }
                // commitTransaction returns once the coordinator has logged PrepareCommit (transactions
                // v1, as in Kafka); the markers and CompleteCommit follow. Wait for that end state
                // (bounded) before the steps that read it.
                step("settled", () -> {
                    long deadline = System.currentTimeMillis() + 15_000;
                    while (true) {
                        String state = admin.describeTransactions(List.of(txnId)).all().get().get(txnId).state().toString();
                        if (!state.startsWith("Prepare") || System.currentTimeMillis() > deadline) return obj("state", state);
                        Thread.sleep(20);
                    }
                });
                step("describeProducers", () -> {
                    DescribeProducersResult.PartitionProducerState st = admin.describeProducers(List.of(tps.get(0))).all().get().get(tps.get(0));
                    List<Object> out = new ArrayList<>();
                    for (ProducerState ps : st.activeProducers())
                        out.add(obj("producer_id", ps.producerId(), "epoch", ps.producerEpoch(), "last_sequence", ps.lastSequence(),
                                "txn_start", ps.currentTransactionStartOffset().orElse(-1)));
                    return obj("producers", out);
                });
                step("listTransactions", () -> {
                    List<Object> out = new ArrayList<>();
                    for (TransactionListing l : admin.listTransactions().all().get())
                        if (l.transactionalId().equals(txnId)) out.add(obj("id", l.transactionalId(), "state", l.state().toString()));
                    return obj("listed", out);
                });
                step("describeTransactions", () -> {
                    TransactionDescription d = admin.describeTransactions(List.of(txnId)).all().get().get(txnId);
                    return obj("state", d.state().toString(), "producer_id", d.producerId(), "timeout_ms", d.transactionTimeoutMs(),
                            "partitions", d.topicPartitions().size());
                });
            }
            for (String iso : new String[] {"read_committed", "read_uncommitted"}) {
                for (ConsumerRecord<byte[], byte[]> r : readAll(tps, -1, iso)) {
                    Map<String, Object> e = consumed(r);
                    e.put("event", "read");
                    e.put("isolation", iso);
                    emit(e);
                }
            }
            emit(obj("event", "group_offsets", "offsets",
                    offsetsJson(admin.listConsumerGroupOffsets(groupId).partitionsToOffsetAndMetadata().get())));
        }
    }

    // ---- a group member on its own thread ----------------------------------------------------

    static final class Member implements Runnable, ConsumerRebalanceListener {
        final String name, groupId, topic, instanceId;
        final Set<TopicPartition> assigned = ConcurrentHashMap.newKeySet();
        final Set<String> seen = ConcurrentHashMap.newKeySet();
        final java.util.concurrent.atomic.AtomicInteger callbacks = new java.util.concurrent.atomic.AtomicInteger();
        final AtomicBoolean stop = new AtomicBoolean();
        volatile boolean committedAll;
        volatile Throwable failed;
        KafkaConsumer<byte[], byte[]> consumer;
        Thread thread;

        Member(String name, String groupId, String topic, String instanceId) {
            this.name = name; this.groupId = groupId; this.topic = topic; this.instanceId = instanceId;
        }

        int readCount() {
            if (failed != null) throw new RuntimeException("member " + name + " failed", failed);
            return seen.size();
        }

        void start() { thread = new Thread(this, "member-" + name); thread.start(); }

        void stop() throws InterruptedException {
            stop.set(true);
            thread.join(60_000);
            if (failed != null) throw new RuntimeException("member " + name + " failed", failed);
        }

        public void run() {
            Properties p = consumerProps(groupId);
            String protocol = args.getOrDefault("protocol", "classic");
            p.put("group.protocol", protocol);
            if (protocol.equals("classic")) {
                p.put("partition.assignment.strategy", arg("assignor").equals("range")
                        ? RangeAssignor.class.getName() : CooperativeStickyAssignor.class.getName());
                p.put("session.timeout.ms", "30000");
                p.put("heartbeat.interval.ms", "500");
            }
            if (instanceId != null) p.put("group.instance.id", instanceId);
            try {
                consumer = new KafkaConsumer<>(p);
                consumer.subscribe(List.of(topic), this);
                while (!stop.get()) {
                    ConsumerRecords<byte[], byte[]> recs = consumer.poll(Duration.ofMillis(100));
                    for (ConsumerRecord<byte[], byte[]> r : recs) {
                        Map<String, Object> e = consumed(r);
                        e.put("event", "read");
                        e.put("member", name);
                        emit(e);
                        seen.add(r.partition() + ":" + r.offset());
                    }
                    if (!recs.isEmpty()) consumer.commitSync();
                    committedAll = recs.isEmpty();
                }
                consumer.close(Duration.ofSeconds(20));
            } catch (Throwable t) {
                failed = t;
                emit(obj("event", "member_error", "member", name, "error", t.getClass().getName(), "message", String.valueOf(t.getMessage()),
                        "trace", trace(t)));
            }
        }

        public void onPartitionsRevoked(Collection<TopicPartition> parts) {
            callbacks.incrementAndGet();
            if (!parts.isEmpty()) consumer.commitSync();  // nothing read is read again by another member
            assigned.removeAll(parts);
            emit(obj("event", "revoked", "member", name, "partitions", tps(parts)));
        }

        public void onPartitionsAssigned(Collection<TopicPartition> parts) {
            callbacks.incrementAndGet();
            assigned.addAll(parts);
            emit(obj("event", "assigned", "member", name, "partitions", tps(parts)));
        }

        public void onPartitionsLost(Collection<TopicPartition> parts) {
            assigned.removeAll(parts);
            emit(obj("event", "lost", "member", name, "partitions", tps(parts)));
        }
    }

    // ---- helpers -----------------------------------------------------------------------------

    static String clientVersion() throws java.io.IOException {
        Properties p = new Properties();
        try (java.io.InputStream in = KafkaProducer.class.getResourceAsStream("/kafka/kafka-version.properties")) {
            if (in != null) p.load(in);
        }
        return p.getProperty("version", "unknown");
    }

    static String arg(String k) {
        String v = args.get(k);
        if (v == null) throw new IllegalArgumentException("missing argument " + k);
        return v;
    }

    static Admin admin() {
        Properties p = new Properties();
        p.put("bootstrap.servers", arg("bootstrap"));
        p.put("request.timeout.ms", "20000");
        p.put("default.api.timeout.ms", "60000");
        return Admin.create(p);
    }

    static Properties producerProps() {
        Properties p = new Properties();
        p.put("bootstrap.servers", arg("bootstrap"));
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.put("delivery.timeout.ms", "60000");
        p.put("request.timeout.ms", "20000");
        return p;
    }

    static Properties consumerProps(String groupId) {
        Properties p = new Properties();
        p.put("bootstrap.servers", arg("bootstrap"));
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        if (groupId != null) p.put("group.id", groupId);
        return p;
    }

    static void createTopic(Admin admin, String topic, int partitions, short rf, Map<String, String> configs) throws Exception {
        admin.createTopics(List.of(new NewTopic(topic, partitions, rf).configs(configs))).all().get();
        waitFor(() -> {
            TopicDescription d = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic);
            for (TopicPartitionInfo pi : d.partitions()) if (pi.leader() == null) return false;
            return d.partitions().size() == partitions;
        }, 30, "topic " + topic + " to have leaders");
    }

    /** Deterministic sample records: null and empty keys and values, binary bytes, headers (a
     * repeated key, a null value), timestamps one second apart from `base`. */
    static ProducerRecord<byte[], byte[]> sampleRecord(String topic, Integer partition, int i, long base) {
        Random rnd = new Random(i * 7919L);
        byte[] key = i % 7 == 3 ? null : i % 13 == 5 ? new byte[0] : ("key-" + i).getBytes(StandardCharsets.UTF_8);
        byte[] value;
        if (i % 11 == 4) value = null;
        else if (i % 17 == 8) value = new byte[0];
        else { value = new byte[rnd.nextInt(300)]; rnd.nextBytes(value); }
        List<Header> headers = new ArrayList<>();
        if (i % 3 != 0) {
            headers.add(new RecordHeader("trace", ("t-" + i).getBytes(StandardCharsets.UTF_8)));
            headers.add(new RecordHeader("nullable", null));
            headers.add(new RecordHeader("trace", new byte[] {0, (byte) 255, (byte) i}));
        }
        return new ProducerRecord<>(topic, partition, base + i * 1000L, key, value, headers);
    }

    static List<ProducerRecord<byte[], byte[]>> sampleRecords(String topic, int partition, int count, long base) {
        List<ProducerRecord<byte[], byte[]>> out = new ArrayList<>();
        for (int i = 0; i < count; i++) out.add(sampleRecord(topic, partition, i, base));
        return out;
    }

    /** Sends records from..to-1 (record i to partition i % parts) with an idempotent producer and
     * prints each with its offset. */
    static void produceSent(String topic, int parts, int from, int to, long base) throws Exception {
        Properties p = producerProps();
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p)) {
            List<ProducerRecord<byte[], byte[]>> recs = new ArrayList<>();
            List<Future<RecordMetadata>> futures = new ArrayList<>();
            for (int i = from; i < to; i++) {
                recs.add(sampleRecord(topic, i % parts, i, base));
                futures.add(producer.send(recs.get(recs.size() - 1)));
            }
            producer.flush();
            for (int i = 0; i < recs.size(); i++) {
                RecordMetadata md = futures.get(i).get(30, TimeUnit.SECONDS);
                Map<String, Object> e = recordJson(recs.get(i));
                e.put("event", "sent");
                e.put("topic", topic);
                e.put("partition", md.partition());
                e.put("offset", md.offset());
                emit(e);
            }
        }
    }

    /** Reads the partitions from the beginning up to their end offsets (`want` records, or up
     * to the end offsets at the start when want < 0). */
    static List<ConsumerRecord<byte[], byte[]>> readAll(List<TopicPartition> tps, int want, String isolation) throws Exception {
        Properties p = consumerProps(null);
        p.put("isolation.level", isolation);
        try (KafkaConsumer<byte[], byte[]> c = new KafkaConsumer<>(p)) {
            c.assign(tps);
            c.seekToBeginning(tps);
            Map<TopicPartition, Long> end = c.endOffsets(tps);
            List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
            long deadline = System.currentTimeMillis() + 60_000;
            while (System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) out.add(r);
                if (want >= 0 && out.size() >= want) break;
                if (want < 0) {
                    boolean doneAll = true;
                    for (TopicPartition tp : tps) doneAll &= c.position(tp) >= end.get(tp);
                    if (doneAll) break;
                }
            }
            return out;
        }
    }

    static List<ConsumerRecord<byte[], byte[]>> pollUntil(KafkaConsumer<byte[], byte[]> c, int want) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 60_000;
        while (out.size() < want && System.currentTimeMillis() < deadline)
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) out.add(r);
        return out;
    }

    interface Check { boolean get() throws Exception; }

    static void waitFor(Check check, int seconds, String what) throws Exception {
        long deadline = System.currentTimeMillis() + seconds * 1000L;
        Exception last = null;
        while (System.currentTimeMillis() < deadline) {
            try {
                if (check.get()) return;
            } catch (RuntimeException e) {
                if (e.getMessage() != null && e.getMessage().startsWith("member ")) throw e;
                last = e;
            } catch (Exception e) { last = e; }
            Thread.sleep(100);
        }
        throw new TimeoutException("timed out after " + seconds + " s waiting for " + what + (last == null ? "" : ": " + last));
    }

    static boolean stableGroup(Admin admin, String groupId) throws Exception {
        return admin.describeConsumerGroups(List.of(groupId)).all().get().get(groupId).toString().contains("Stable");
    }

    interface Step { Map<String, Object> run() throws Exception; }

    static void step(String name, Step s) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("event", "step");
        e.put("step", name);
        try {
            e.put("result", s.run());
        } catch (Throwable t) {
            Throwable c = t instanceof ExecutionException && t.getCause() != null ? t.getCause() : t;
            e.put("error", c.getClass().getName());
            e.put("message", String.valueOf(c.getMessage()));
            e.put("trace", trace(c));
        }
        emit(e);
    }

    static Map<String, Object> describeTopics(Admin admin, List<String> names) throws Exception {
        Map<String, Object> out = new TreeMap<>();
        for (Map.Entry<String, TopicDescription> e : admin.describeTopics(names).allTopicNames().get().entrySet()) {
            List<Object> parts = new ArrayList<>();
            for (TopicPartitionInfo pi : e.getValue().partitions())
                parts.add(obj("partition", pi.partition(), "leader", pi.leader() == null ? null : pi.leader().id(),
                        "replicas", replicaIds(pi), "isr", nodeIds(pi.isr())));
            out.put(e.getKey(), obj("topic_id", e.getValue().topicId().toString(), "internal", e.getValue().isInternal(), "partitions", parts));
        }
        return out;
    }

    /** An ACL as "RESOURCE:PATTERN:name principal host OPERATION PERMISSION", sorted. */
    static List<String> aclStrings(Collection<AclBinding> acls) {
        List<String> out = new ArrayList<>();
        for (AclBinding b : acls)
            out.add(b.pattern().resourceType() + ":" + b.pattern().patternType() + ":" + b.pattern().name() + " "
                    + b.entry().principal() + " " + b.entry().host() + " " + b.entry().operation() + " " + b.entry().permissionType());
        Collections.sort(out);
        return out;
    }

    static List<Integer> replicaIds(TopicPartitionInfo pi) { return nodeIds(pi.replicas()); }

    static List<Integer> nodeIds(List<Node> nodes) {
        List<Integer> out = new ArrayList<>();
        for (Node n : nodes) out.add(n.id());
        return out;
    }

    /** A config altered through the controller reaches each broker's metadata image a moment
     * after the answer (as in Kafka): wait for the broker that describes it to show it. */
    static void awaitConfig(Admin admin, ConfigResource res, String name, String value) throws Exception {
        waitFor(() -> {
            ConfigEntry e = admin.describeConfigs(List.of(res)).all().get().get(res).get(name);
            return e != null && value.equals(e.value());
        }, 20, res + " " + name + "=" + value);
    }

    static Map<String, Object> configJson(Admin admin, ConfigResource res, String... names) throws Exception {
        Config cfg = admin.describeConfigs(List.of(res)).all().get().get(res);
        Map<String, Object> out = new TreeMap<>();
        for (String n : names) {
            ConfigEntry e = cfg.get(n);
            out.put(n, e == null ? null : obj("value", e.value(), "source", e.source().toString(), "read_only", e.isReadOnly()));
        }
        out.put("count", cfg.entries().size());
        return out;
    }

    static Map<String, Object> groupJson(ConsumerGroupDescription d) {
        List<Object> members = new ArrayList<>();
        for (MemberDescription m : d.members())
            members.add(obj("member_id", m.consumerId(), "instance_id", m.groupInstanceId().orElse(null), "client_id", m.clientId(),
                    "partitions", tps(m.assignment().topicPartitions())));
        return obj("event", "group", "group", d.groupId(), "assignor", d.partitionAssignor(), "type", String.valueOf(d.type()),
                "described", d.toString().contains("Stable") ? "Stable" : d.toString(), "coordinator", d.coordinator() == null ? null : d.coordinator().id(),
                "members", members);
    }

    static Map<String, Object> offsetsJson(Map<TopicPartition, OffsetAndMetadata> m) {
        Map<String, Object> out = new TreeMap<>();
        m.forEach((tp, om) -> out.put(tp.toString(), om == null ? null : obj("offset", om.offset(), "metadata", om.metadata())));
        return out;
    }

    static List<String> tps(Collection<TopicPartition> parts) {
        List<String> out = new ArrayList<>();
        for (TopicPartition tp : parts) out.add(tp.toString());
        Collections.sort(out);
        return out;
    }

    static Map<String, Object> recordJson(ProducerRecord<byte[], byte[]> r) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("key", r.key());
        e.put("value", r.value());
        e.put("timestamp", r.timestamp());
        e.put("headers", headersJson(r.headers()));
        return e;
    }

    static Map<String, Object> consumed(ConsumerRecord<byte[], byte[]> r) {
        Map<String, Object> e = new LinkedHashMap<>();
        e.put("topic", r.topic());
        e.put("partition", r.partition());
        e.put("offset", r.offset());
        e.put("key", r.key());
        e.put("value", r.value());
        e.put("timestamp", r.timestamp());
        e.put("timestamp_type", r.timestampType().toString());
        e.put("headers", headersJson(r.headers()));
        e.put("leader_epoch", r.leaderEpoch().orElse(-1));
        return e;
    }

    static List<Object> headersJson(Iterable<Header> headers) {
        List<Object> out = new ArrayList<>();
        for (Header h : headers) out.add(Arrays.asList(h.key(), h.value()));
        return out;
    }

    static String trace(Throwable t) {
        StringBuilder sb = new StringBuilder();
        for (Throwable c = t; c != null; c = c.getCause()) {
            sb.append(c).append('\n');
            StackTraceElement[] st = c.getStackTrace();
            for (int i = 0; i < Math.min(8, st.length); i++) sb.append("  at ").append(st[i]).append('\n');
        }
        return sb.toString();
    }

    // ---- JSON out ----------------------------------------------------------------------------

    static Map<String, Object> obj(Object... kv) {
        Map<String, Object> m = new LinkedHashMap<>();
        for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
        return m;
    }

    static void emit(Map<String, Object> m) {
        StringBuilder sb = new StringBuilder();
        json(sb, m);
        synchronized (OUT) {
            System.out.println(sb);
            System.out.flush();
        }
    }

    @SuppressWarnings("unchecked")
    static void json(StringBuilder sb, Object v) {
        if (v == null) sb.append("null");
        else if (v instanceof String) str(sb, (String) v);
        else if (v instanceof Number || v instanceof Boolean) sb.append(v);
        else if (v instanceof byte[]) str(sb, Base64.getEncoder().encodeToString((byte[]) v));
        else if (v instanceof Map) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<String, Object> e : ((Map<String, Object>) v).entrySet()) {
                if (!first) sb.append(',');
                first = false;
                str(sb, e.getKey());
                sb.append(':');
                json(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Iterable) {
            sb.append('[');
            boolean first = true;
            for (Object o : (Iterable<Object>) v) {
                if (!first) sb.append(',');
                first = false;
                json(sb, o);
            }
            sb.append(']');
        } else str(sb, v.toString());
    }

    static void str(StringBuilder sb, String s) {
        sb.append('"');
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\') sb.append('\\').append(ch);
            else if (ch < 0x20) sb.append(String.format("\\u%04x", (int) ch));
            else sb.append(ch);
        }
        sb.append('"');
    }
}
