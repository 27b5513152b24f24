// A KRaft __cluster_metadata segment written with Kafka's own classes (4.1.1), for
// benchmarks/readers/bench_import_kraft.py and the bad-input tests: records serialized by
// MetadataRecordSerde, batches built by MemoryRecords, as the controller's log holds them.
//
//   java -cp '.kafka/libs/*' benchmarks/readers/KraftLogGenerator.java DIR RECORDS [PARTITIONS] [MAGIC]
//
// DIR/00000000000000000000.log gets: three broker registrations (unfenced), topics of 100
// partitions each (TopicRecord + PartitionRecords, replicas on the three brokers), then
// PartitionChangeRecords until RECORDS records: each partition in turn loses its last
// replica from the ISR and gets it back (a follower falling behind and catching up), eight
// records a batch. MAGIC 1 writes the topic records in the old record format v1, which no
// KRaft log holds (the importer must refuse it).
import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.compress.Compression;
import org.apache.kafka.common.metadata.PartitionChangeRecord;
import org.apache.kafka.common.metadata.PartitionRecord;
import org.apache.kafka.common.metadata.RegisterBrokerRecord;
import org.apache.kafka.common.metadata.TopicRecord;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.protocol.ObjectSerializationCache;
import org.apache.kafka.common.record.MemoryRecords;
import org.apache.kafka.common.record.SimpleRecord;
import org.apache.kafka.common.record.TimestampType;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.server.common.ApiMessageAndVersion;

public class KraftLogGenerator {
    private static final int EPOCH = 1;
    private static final int PER_TOPIC = 100;
    private static final int PER_BATCH = 8;

    private final FileChannel out;
    private final byte magic;
    private final List<SimpleRecord> batch = new ArrayList<>();
    private long offset = 0;
    private long written = 0;
    private long time = 1_700_000_000_000L;

    KraftLogGenerator(FileChannel out, byte magic) {
        this.out = out;
        this.magic = magic;
    }

    void add(ApiMessage message, short version) throws IOException {
        ApiMessageAndVersion record = new ApiMessageAndVersion(message, version);
        ObjectSerializationCache cache = new ObjectSerializationCache();
        int size = MetadataRecordSerde.INSTANCE.recordSize(record, cache);
        ByteBufferAccessor buffer = new ByteBufferAccessor(java.nio.ByteBuffer.allocate(size));
        MetadataRecordSerde.INSTANCE.write(record, cache, buffer);
        batch.add(new SimpleRecord(time, null, buffer.buffer().array()));
        written++;
    }

    void flush() throws IOException {
        if (batch.isEmpty()) return;
        SimpleRecord[] records = batch.toArray(new SimpleRecord[0]);
        MemoryRecords built = magic == 2
            ? MemoryRecords.withRecords(magic, offset, Compression.NONE, TimestampType.CREATE_TIME,
                -1L, (short) -1, -1, EPOCH, false, records)
            : MemoryRecords.withRecords(magic, offset, Compression.NONE, TimestampType.CREATE_TIME,
                records);
        java.nio.ByteBuffer bytes = built.buffer(); // a duplicate: take it once
        while (bytes.hasRemaining()) out.write(bytes);
        offset += records.length;
        batch.clear();
        time += 10;
    }

    public static void main(String[] args) throws IOException {
        Path dir = Path.of(args[0]);
        long total = Long.parseLong(args[1]);
        int partitions = args.length > 2 ? Integer.parseInt(args[2]) : 10_000;
        byte magic = args.length > 3 ? Byte.parseByte(args[3]) : 2;
        dir.toFile().mkdirs();
        try (FileChannel out = FileChannel.open(dir.resolve("00000000000000000000.log"),
                StandardOpenOption.CREATE, StandardOpenOption.WRITE,
                StandardOpenOption.TRUNCATE_EXISTING)) {
            KraftLogGenerator log = new KraftLogGenerator(out, (byte) 2);
            for (int broker = 1; broker <= 3; broker++) {
                log.add(new RegisterBrokerRecord().setBrokerId(broker).setBrokerEpoch(broker)
                    .setIncarnationId(Uuid.randomUuid()).setFenced(false).setRack(null),
                    (short) 3);
            }
            log.flush();
            log = new KraftLogGenerator(out, magic);
            log.offset = 3;
            List<Uuid> ids = new ArrayList<>();
            for (int topic = 0; topic * PER_TOPIC < partitions; topic++) {
                Uuid id = Uuid.randomUuid();
                ids.add(id);
                log.add(new TopicRecord().setName("t" + topic).setTopicId(id), (short) 0);
                for (int p = 0; p < PER_TOPIC; p++) {
                    log.add(partition(id, p), (short) 2);
                }
                log.flush();
            }
            log = rebased(log, out);
            long round = 0;
            while (log.offset < total) {
                for (int i = 0; i < PER_BATCH; i++) {
                    int n = (int) ((round * PER_BATCH + i) % partitions);
                    boolean shrink = ((round * PER_BATCH + i) / partitions) % 2 == 0;
                    List<Integer> replicas = replicas(n % PER_TOPIC);
                    List<Integer> isr = shrink ? replicas.subList(0, 2) : replicas;
                    log.add(new PartitionChangeRecord().setTopicId(ids.get(n / PER_TOPIC))
                        .setPartitionId(n % PER_TOPIC).setIsr(new ArrayList<>(isr)), (short) 2);
                }
                log.flush();
                round++;
            }
            System.out.println(log.offset + " records");
        }
    }

    private static KraftLogGenerator rebased(KraftLogGenerator log, FileChannel out) {
        KraftLogGenerator next = new KraftLogGenerator(out, (byte) 2);
        next.offset = log.offset;
        next.time = log.time;
        return next;
    }

    private static List<Integer> replicas(int p) {
        return List.of(1 + p % 3, 1 + (p + 1) % 3, 1 + (p + 2) % 3);
    }

    private static PartitionRecord partition(Uuid topic, int p) {
        List<Integer> replicas = new ArrayList<>(replicas(p));
        return new PartitionRecord().setTopicId(topic).setPartitionId(p).setReplicas(replicas)
            .setIsr(replicas).setLeader(replicas.get(0)).setLeaderEpoch(0).setPartitionEpoch(0);
    }
}
