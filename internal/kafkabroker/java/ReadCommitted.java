// ReadCommitted prints every record of a topic that a read_committed
// consumer sees, one line each: partition TAB offset TAB key TAB value
// (keys and values as UTF-8 text; "null" for a missing key). It is the
// tests' oracle: Apache Kafka's own Java consumer, no consumer group
// (partitions assigned directly, so no coordinator is waited for), reading
// from the beginning of every partition up to its last stable offset as
// of the start — the end a read_committed consumer may reach — so it ends
// on its own, without an idle timeout.
//
// Usage: java -cp "<kafka libs>/*:<dir>" ReadCommitted BOOTSTRAP TOPIC
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.serialization.StringDeserializer;

public class ReadCommitted {
    public static void main(String[] args) {
        Properties p = new Properties();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, args[0]);
        p.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, "read_committed");
        p.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        try (KafkaConsumer<String, String> c = new KafkaConsumer<>(p)) {
            List<TopicPartition> parts = new ArrayList<>();
            for (PartitionInfo pi : c.partitionsFor(args[1], Duration.ofSeconds(60))) {
                parts.add(new TopicPartition(pi.topic(), pi.partition()));
            }
            c.assign(parts);
            c.seekToBeginning(parts);
            // With read_committed, endOffsets are the last stable offsets.
            Map<TopicPartition, Long> ends = c.endOffsets(parts, Duration.ofSeconds(60));
            StringBuilder out = new StringBuilder();
            long deadline = System.nanoTime() + Duration.ofSeconds(120).toNanos();
            while (!done(c, ends)) {
                if (System.nanoTime() > deadline) {
                    System.err.println("ReadCommitted: not at the end after 120 s: ends " + ends);
                    System.exit(2);
                }
                for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(500))) {
                    out.append(r.partition()).append('\t').append(r.offset()).append('\t')
                       .append(r.key()).append('\t').append(r.value()).append('\n');
                }
            }
            System.out.print(out);
            System.out.flush();
        }
    }

    static boolean done(KafkaConsumer<String, String> c, Map<TopicPartition, Long> ends) {
        for (Map.Entry<TopicPartition, Long> e : ends.entrySet()) {
            if (c.position(e.getKey()) < e.getValue()) {
                return false;
            }
        }
        return true;
    }
}
