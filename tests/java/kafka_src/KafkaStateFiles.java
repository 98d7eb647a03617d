// Reads a log dir's small state files with Apache Kafka's own readers (the classes its broker
// loads them with at startup), for tests/integration/test_kafka_dump_log.py: the files
// kafka-dump-log.sh does not read. Run from Kafka's jars with Java's source launcher:
//   java -cp '.cache/java/kafka-4.4.0/*' tests/java/kafka_src/KafkaStateFiles.java <kind>=<path>...
// kinds: meta=<log dir> (meta.properties, verified as a KRaft broker does), offsets=<checkpoint>
// (recovery-point-, log-start-offset-, replication-offset-, cleaner-offset-checkpoint),
// epochs=<leader-epoch-checkpoint>, partition=<partition.metadata>, quorum=<quorum-state>.
// Prints one line per entry; a file Kafka refuses throws, and the JVM exits non-zero.

import java.io.File;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.metadata.properties.MetaProperties;
import org.apache.kafka.metadata.properties.MetaPropertiesEnsemble;
import org.apache.kafka.raft.ElectionState;
import org.apache.kafka.raft.FileQuorumStateStore;
import org.apache.kafka.storage.internals.checkpoint.LeaderEpochCheckpointFile;
import org.apache.kafka.storage.internals.checkpoint.OffsetCheckpointFile;
import org.apache.kafka.storage.internals.checkpoint.PartitionMetadata;
import org.apache.kafka.storage.internals.checkpoint.PartitionMetadataFile;
import org.apache.kafka.storage.internals.log.EpochEntry;
import org.apache.kafka.storage.internals.log.LogDirFailureChannel;

public class KafkaStateFiles {
    public static void main(String[] args) throws Exception {
        LogDirFailureChannel failures = new LogDirFailureChannel(1);
        for (String arg : args) {
            int eq = arg.indexOf('=');
            String kind = arg.substring(0, eq);
            File file = new File(arg.substring(eq + 1));
            switch (kind) {
                case "meta" -> {
                    MetaPropertiesEnsemble ensemble = new MetaPropertiesEnsemble.Loader()
                        .addLogDirs(List.of(file.getPath())).addMetadataLogDir(file.getPath()).load();
                    ensemble.verify(Optional.empty(), OptionalInt.empty(),
                        EnumSet.of(MetaPropertiesEnsemble.VerificationFlag.REQUIRE_METADATA_LOG_DIR,
                                   MetaPropertiesEnsemble.VerificationFlag.REQUIRE_AT_LEAST_ONE_VALID));
                    MetaProperties props = ensemble.logDirProps().get(file.getPath());
                    System.out.println("meta " + file + " version=" + props.version().number()
                        + " cluster.id=" + props.clusterId().orElse("") + " node.id=" + props.nodeId().orElse(-1)
                        + " directory.id=" + props.directoryId().map(Object::toString).orElse(""));
                }
                case "offsets" -> {
                    Map<TopicPartition, Long> offsets = new OffsetCheckpointFile(file, failures).read();
                    for (Map.Entry<TopicPartition, Long> e : offsets.entrySet())
                        System.out.println("offsets " + file + " " + e.getKey() + " " + e.getValue());
                }
                case "epochs" -> {
                    for (EpochEntry e : new LeaderEpochCheckpointFile(file, failures).read())
                        System.out.println("epochs " + file + " " + e.epoch() + " " + e.startOffset());
                }
                case "partition" -> {
                    PartitionMetadata m = new PartitionMetadataFile(file, failures).read();
                    System.out.println("partition " + file + " version=" + m.version() + " topic_id=" + m.topicId());
                }
                case "quorum" -> {
                    ElectionState s = new FileQuorumStateStore(file).readElectionState().orElseThrow();
                    System.out.println("quorum " + file + " epoch=" + s.epoch() + " leader=" + s.leaderIdOrSentinel());
                }
                default -> throw new IllegalArgumentException("unknown kind " + kind);
            }
        }
    }
}
