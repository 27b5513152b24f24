/*
 * kcsim's reader of a KRaft __cluster_metadata-0 directory, for `kcsim shadow --metadata-log`.
 *
 * One long-lived JVM: the shadow writes one request per line on stdin and reads JSON lines
 * back, so a poll costs a file read and no JVM start. Every byte is read and decoded by
 * Kafka's own classes: FileRecords (opened read only) walks the batches, a batch checks its
 * own CRC, MetadataRecordSerde reads each metadata record and MetadataJsonConverters writes
 * it as JSON (what `kafka-dump-log --cluster-metadata-decoder` prints), ControlRecordUtils
 * reads the LeaderChange control records.
 *
 * Request (tab-separated): READ <file> <byte position> <from offset> <below offset> <max batches>
 *   The whole batches of <file> from <byte position> on: batches that end before
 *   <from offset> are skipped (their header only is read), and reading stops at the first
 *   batch that reaches <below offset> (the quorum's high watermark: not yet committed).
 * Answer: one line per batch
 *   {"batch":{"position","size","base","last","epoch","ts","control"},"records":[...]}
 *   each record {"offset","type","version","data"}, then one line
 *   {"end":{"position":next byte position,"size":file size,"stop":why}}
 *   where why is "limit" (a batch at or past <below offset>), "eof" (the file ends after
 *   the last whole batch), "partial" (the bytes after it are not yet a whole batch),
 *   "corrupt" (the batch at position fails its CRC or cannot be read; "detail" says why),
 *   "missing" (the file does not exist), or "max" (<max batches> were returned).
 */
package kcsim.shadow;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.File;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.nio.charset.StandardCharsets;
import java.nio.file.NoSuchFileException;
import java.util.Iterator;
import org.apache.kafka.common.message.LeaderChangeMessage;
import org.apache.kafka.common.message.LeaderChangeMessageJsonConverter;
import org.apache.kafka.common.metadata.MetadataJsonConverters;
import org.apache.kafka.common.metadata.MetadataRecordType;
import org.apache.kafka.common.protocol.ByteBufferAccessor;
import org.apache.kafka.common.record.ControlRecordType;
import org.apache.kafka.common.record.ControlRecordUtils;
import org.apache.kafka.common.record.FileLogInputStream.FileChannelRecordBatch;
import org.apache.kafka.common.record.FileRecords;
import org.apache.kafka.common.record.Record;
import org.apache.kafka.metadata.MetadataRecordSerde;
import org.apache.kafka.server.common.ApiMessageAndVersion;

public final class MetadataLogTail {
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final MetadataRecordSerde SERDE = new MetadataRecordSerde();

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        BufferedWriter out = new BufferedWriter(
            new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16);
        String line;
        while ((line = in.readLine()) != null) {
            String[] parts = line.split("\t");
            if (parts.length != 6 || !parts[0].equals("READ")) {
                out.write(end(0, 0, "corrupt", "bad request: " + line));
            } else {
                read(out, new File(parts[1]), Integer.parseInt(parts[2]), Long.parseLong(parts[3]),
                    Long.parseLong(parts[4]), Integer.parseInt(parts[5]));
            }
            out.flush();
        }
    }

    private static void read(BufferedWriter out, File file, int position, long from, long below,
                             int maxBatches) throws Exception {
        FileRecords records;
        try {
            records = FileRecords.open(file, false);
        } catch (NoSuchFileException e) {
            out.write(end(position, 0, "missing", file.toString()));
            return;
        }
        try {
            int size = records.sizeInBytes();
            if (position > size) {
                out.write(end(position, size, "corrupt",
                    "the file is shorter (" + size + " bytes) than the position read up to"));
                return;
            }
            int next = position;
            int returned = 0;
            Iterator<FileChannelRecordBatch> batches = records.batchesFrom(position).iterator();
            while (true) {
                FileChannelRecordBatch batch;
                try {
                    if (!batches.hasNext()) break;
                    batch = batches.next();
                } catch (RuntimeException e) {
                    out.write(end(next, size, "corrupt", String.valueOf(e.getMessage())));
                    return;
                }
                if (batch.lastOffset() < from) {
                    next = batch.position() + batch.sizeInBytes();
                    continue;
                }
                if (batch.lastOffset() >= below) {
                    out.write(end(next, size, "limit", ""));
                    return;
                }
                if (returned == maxBatches) {
                    out.write(end(next, size, "max", ""));
                    return;
                }
                if (batch.magic() != 2) {
                    out.write(end(next, size, "corrupt",
                        "record format v" + batch.magic() + ": not a KRaft metadata log (it needs v2)"));
                    return;
                }
                String decoded;
                try {
                    batch.ensureValid();
                    decoded = decode(batch);
                } catch (RuntimeException e) {
                    out.write(end(next, size, "corrupt", "batch at offset " + batch.baseOffset()
                        + ": " + e.getMessage()));
                    return;
                }
                out.write(decoded);
                next = batch.position() + batch.sizeInBytes();
                returned++;
            }
            out.write(end(next, size, next == size ? "eof" : "partial", ""));
        } finally {
            records.closeHandlers();
        }
    }

    private static String decode(FileChannelRecordBatch batch) throws Exception {
        ObjectNode line = JSON.createObjectNode();
        ObjectNode head = line.putObject("batch");
        head.put("position", batch.position());
        head.put("size", batch.sizeInBytes());
        head.put("base", batch.baseOffset());
        head.put("last", batch.lastOffset());
        head.put("epoch", batch.partitionLeaderEpoch());
        head.put("ts", batch.maxTimestamp());
        head.put("control", batch.isControlBatch());
        ArrayNode list = line.putArray("records");
        for (Record record : batch) {
            ObjectNode node = JSON.createObjectNode();
            node.put("offset", record.offset());
            if (batch.isControlBatch()) {
                ControlRecordType type = ControlRecordType.parse(record.key());
                if (type != ControlRecordType.LEADER_CHANGE) {
                    continue;  // snapshot header/footer, KRaft version, voters: nothing kcsim reads
                }
                LeaderChangeMessage message = ControlRecordUtils.deserializeLeaderChangeMessage(record);
                node.put("type", "LeaderChange");
                node.put("version", message.version());
                node.set("data", LeaderChangeMessageJsonConverter.write(message, message.version()));
            } else {
                ApiMessageAndVersion message =
                    SERDE.read(new ByteBufferAccessor(record.value()), record.valueSize());
                node.put("type", MetadataRecordType.fromId(message.message().apiKey()).name());
                node.put("version", message.version());
                node.set("data", MetadataJsonConverters.writeJson(message.message(), message.version()));
            }
            list.add(node);
        }
        return JSON.writeValueAsString(line) + "\n";
    }

    private static String end(int position, int size, String stop, String detail) throws Exception {
        ObjectNode line = JSON.createObjectNode();
        ObjectNode end = line.putObject("end");
        end.put("position", position);
        end.put("size", size);
        end.put("stop", stop);
        end.put("detail", detail);
        return JSON.writeValueAsString(line) + "\n";
    }
}
