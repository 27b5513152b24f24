/*
 * kcsim's differential oracle: CONTRACT §1/§5 events fed to Apache Kafka 4.1.1's own
 * KRaft control managers (ReplicationControlManager, ClusterControlManager with its
 * BrokerHeartbeatManager, ConfigurationControlManager, FeatureControlManager), wired and
 * replayed as QuorumController wires and replays them, in one JVM.
 *
 * Test code only: it lives in Kafka's package because the managers' entry points are
 * package-private, as Kafka's own tests do. It never runs in a user's path.
 *
 * Input (stdin), JSON lines: a header {"sequence": ID, "settings": {...}} starts a sequence
 * (a fresh cluster); every following line until the next header is one event. Output
 * (stdout): the header echoed, then one line per event:
 *   {"i": n, "records": [...], "results": [...], "partitions": [...], "brokers": [...]}
 * or {"i": n, "error": "..."} when the harness itself failed on the event.
 * A line {"end": ID} closes each sequence's output.
 */
package org.apache.kafka.controller;

import org.apache.kafka.clients.admin.AlterConfigOp.OpType;
import org.apache.kafka.clients.admin.FeatureUpdate;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigDef;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.InvalidConfigurationException;
import org.apache.kafka.common.errors.StaleBrokerEpochException;
import org.apache.kafka.common.message.AlterPartitionReassignmentsRequestData;
import org.apache.kafka.common.message.AlterPartitionReassignmentsResponseData;
import org.apache.kafka.common.message.AlterPartitionRequestData;
import org.apache.kafka.common.message.AlterPartitionResponseData;
import org.apache.kafka.common.message.BrokerHeartbeatRequestData;
import org.apache.kafka.common.message.BrokerRegistrationRequestData;
import org.apache.kafka.common.message.CreatePartitionsRequestData.CreatePartitionsAssignment;
import org.apache.kafka.common.message.CreatePartitionsRequestData.CreatePartitionsTopic;
import org.apache.kafka.common.message.CreatePartitionsResponseData.CreatePartitionsTopicResult;
import org.apache.kafka.common.message.CreateTopicsRequestData;
import org.apache.kafka.common.message.CreateTopicsRequestData.CreatableReplicaAssignment;
import org.apache.kafka.common.message.CreateTopicsRequestData.CreatableTopic;
import org.apache.kafka.common.message.CreateTopicsRequestData.CreatableTopicConfig;
import org.apache.kafka.common.message.CreateTopicsResponseData;
import org.apache.kafka.common.message.ElectLeadersRequestData;
import org.apache.kafka.common.message.ElectLeadersResponseData;
import org.apache.kafka.common.message.RequestHeaderData;
import org.apache.kafka.common.metadata.BrokerRegistrationChangeRecord;
import org.apache.kafka.common.metadata.ClearElrRecord;
import org.apache.kafka.common.metadata.ConfigRecord;
import org.apache.kafka.common.metadata.FeatureLevelRecord;
import org.apache.kafka.common.metadata.PartitionChangeRecord;
import org.apache.kafka.common.metadata.PartitionRecord;
import org.apache.kafka.common.metadata.RegisterBrokerRecord;
import org.apache.kafka.common.metadata.RemoveTopicRecord;
import org.apache.kafka.common.metadata.TopicRecord;
import org.apache.kafka.common.metadata.UnregisterBrokerRecord;
import org.apache.kafka.common.protocol.ApiKeys;
import org.apache.kafka.common.protocol.ApiMessage;
import org.apache.kafka.common.protocol.Errors;
import org.apache.kafka.common.requests.ApiError;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.utils.LogContext;
import org.apache.kafka.common.utils.Time;
import org.apache.kafka.image.writer.ImageWriterOptions;
import org.apache.kafka.metadata.BrokerHeartbeatReply;
import org.apache.kafka.metadata.BrokerRegistration;
import org.apache.kafka.metadata.BrokerRegistrationReply;
import org.apache.kafka.metadata.FinalizedControllerFeatures;
import org.apache.kafka.metadata.KafkaConfigSchema;
import org.apache.kafka.metadata.LeaderRecoveryState;
import org.apache.kafka.metadata.PartitionRegistration;
import org.apache.kafka.metadata.placement.PartitionAssignment;
import org.apache.kafka.metadata.placement.StripedReplicaPlacer;
import org.apache.kafka.server.common.ApiMessageAndVersion;
import org.apache.kafka.server.common.EligibleLeaderReplicasVersion;
import org.apache.kafka.server.common.KRaftVersion;
import org.apache.kafka.server.common.MetadataVersion;
import org.apache.kafka.server.common.TopicIdPartition;
import org.apache.kafka.server.config.ServerTopicConfigSynonyms;
import org.apache.kafka.timeline.SnapshotRegistry;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Map.Entry;
import java.util.Optional;
import java.util.OptionalInt;
import java.util.OptionalLong;
import java.util.Random;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;

public final class KcsimOracle {
    static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintWriter out = new PrintWriter(new BufferedWriter(
            new OutputStreamWriter(System.out, StandardCharsets.UTF_8), 1 << 16));
        Cluster cluster = null;
        String sequenceId = null;
        int index = 0;
        String line;
        while ((line = in.readLine()) != null) {
            if (line.isBlank()) continue;
            JsonNode node = JSON.readTree(line);
            if (node.has("sequence")) {
                if (sequenceId != null) endSequence(out, sequenceId);
                sequenceId = node.get("sequence").asText();
                cluster = new Cluster(node.path("settings"));
                index = 0;
                ObjectNode header = JSON.createObjectNode();
                header.put("sequence", sequenceId);
                out.println(JSON.writeValueAsString(header));
                continue;
            }
            if (cluster == null) throw new IllegalStateException("an event before any sequence header");
            ObjectNode result;
            try {
                result = cluster.apply(node);
            } catch (Throwable e) {
                StringWriter trace = new StringWriter();
                e.printStackTrace(new PrintWriter(trace));
                result = JSON.createObjectNode();
                result.put("error", trace.toString());
                cluster.dropPending();
            }
            ObjectNode line2 = JSON.createObjectNode();
            line2.put("i", index++);
            line2.setAll(result);
            out.println(JSON.writeValueAsString(line2));
        }
        if (sequenceId != null) endSequence(out, sequenceId);
        out.flush();
    }

    static void endSequence(PrintWriter out, String sequenceId) throws Exception {
        ObjectNode end = JSON.createObjectNode();
        end.put("end", sequenceId);
        out.println(JSON.writeValueAsString(end));
        out.flush();
    }

    /** A settable clock: the harness advances it past every session timeout between events. */
    static final class ManualTime implements Time {
        long nanos = TimeUnit.DAYS.toNanos(1);

        @Override public long milliseconds() { return TimeUnit.NANOSECONDS.toMillis(nanos); }
        @Override public long nanoseconds() { return nanos; }
        @Override public void sleep(long ms) { nanos += TimeUnit.MILLISECONDS.toNanos(ms); }
        @Override public void waitObject(Object o, java.util.function.Supplier<Boolean> c, long t) {
            throw new UnsupportedOperationException();
        }
    }

    /** One simulated cluster: its log, its settings and the active controller's managers. */
    static final class Cluster {
        final int minIsr;
        final boolean unclean;
        final boolean autoRebalance;
        final boolean deleteTopicEnable;
        final short elrLevel;
        final MetadataVersion mv;
        final ManualTime time = new ManualTime();
        final LogContext logContext = new LogContext("[oracle] ");

        /** Every record written, in order: a record's offset is its index (SPEC-KRAFT §22.5). */
        final List<ApiMessage> log = new ArrayList<>();
        final Map<Uuid, String> topicNames = new HashMap<>();
        final Map<String, Uuid> topicIds = new HashMap<>();
        final Map<String, TreeSet<Integer>> partitionIds = new TreeMap<>();
        final Map<Uuid, String> incarnationNames = new HashMap<>();
        final Map<String, Uuid> incarnationIds = new HashMap<>();
        /** [kcsim] a broker whose last fence ended a shutdown it asked for restarts cleanly. */
        final Map<Integer, Boolean> askedShutdown = new HashMap<>();
        final Map<Integer, Boolean> cleanExit = new HashMap<>();
        long incarnationCounter = 0;
        int controllerCount = 1;
        int controllerNodeId = -1;
        /**
         * [kcsim] The log size when each controller node was last deposed: it restarted and
         * loaded a snapshot of that moment (SPEC-KRAFT §2.3, §18), so its broker -> ELR index
         * holds no stale entry from before it.
         */
        final Map<Integer, Integer> depositions = new HashMap<>();

        SnapshotRegistry snapshotRegistry;
        FeatureControlManager featureControl;
        ClusterControlManager clusterControl;
        ConfigurationControlManager configurationControl;
        ReplicationControlManager replicationControl;

        final ArrayNode pendingRecords = JSON.createArrayNode();
        ArrayNode results = JSON.createArrayNode();

        Cluster(JsonNode settings) {
            this.minIsr = Integer.parseInt(settings.path("min.insync.replicas").asText("1"));
            this.unclean = Boolean.parseBoolean(settings.path("unclean.leader.election.enable").asText("false"));
            this.autoRebalance = Boolean.parseBoolean(settings.path("auto.leader.rebalance.enable").asText("true"));
            this.deleteTopicEnable = Boolean.parseBoolean(settings.path("delete.topic.enable").asText("true"));
            this.elrLevel = Short.parseShort(settings.path("eligible.leader.replicas.version").asText("1"));
            this.mv = MetadataVersion.fromVersionString(settings.path("metadata.version").asText("4.1-IV1"));
            buildManagers();
        }

        /**
         * The controller's value check of the two configs it reads (core
         * ControllerConfigurationValidator: LogConfig's ConfigDef types and ranges). kcsim's
         * front door rejects such a value (CONTRACT §1), so Kafka must write nothing for it.
         */
        static final ConfigurationValidator VALUE_VALIDATOR = new ConfigurationValidator() {
            @Override
            public void validate(ConfigResource resource) { }

            @Override
            public void validate(ConfigResource resource, Map<String, String> newConfigs,
                                 Map<String, String> existingConfigs) {
                ConfigDef def = configDef();
                for (Entry<String, String> e : newConfigs.entrySet()) {
                    ConfigDef.ConfigKey key = def.configKeys().get(e.getKey());
                    if (key == null || e.getValue() == null) continue;
                    try {
                        Object value = ConfigDef.parseType(e.getKey(), e.getValue(), key.type);
                        if (key.validator != null) key.validator.ensureValid(e.getKey(), value);
                    } catch (ConfigException error) {
                        throw new InvalidConfigurationException(error.getMessage());
                    }
                }
            }
        };

        static ConfigDef configDef() {
            return new ConfigDef().
                define("min.insync.replicas", ConfigDef.Type.INT, 1, ConfigDef.Range.atLeast(1),
                    ConfigDef.Importance.HIGH, "min ISR").
                define("unclean.leader.election.enable", ConfigDef.Type.BOOLEAN, false,
                    ConfigDef.Importance.HIGH, "unclean");
        }

        static KafkaConfigSchema configSchema() {
            Map<ConfigResource.Type, ConfigDef> defs = new HashMap<>();
            for (ConfigResource.Type type : List.of(ConfigResource.Type.TOPIC, ConfigResource.Type.BROKER)) {
                defs.put(type, configDef());
            }
            return new KafkaConfigSchema(defs, ServerTopicConfigSynonyms.ALL_TOPIC_CONFIG_SYNONYMS);
        }

        /**
         * A new active controller: fresh managers (its own placer, seeded with kcsim's
         * controller count, SPEC-KRAFT §11.3), the bootstrap records (§2.7, not written), then
         * the whole log replayed with its offsets, then activation, as a new quorum leader does.
         * A controller deposed before loaded a snapshot at its deposition when it restarted:
         * its ReplicationControlManager is rebuilt there from the partitions as TopicRecords and
         * PartitionRecords (what QuorumController.handleLoadSnapshot replays after resetting
         * every timeline structure), and the log after it replayed into that.
         */
        void buildManagers() {
            snapshotRegistry = new SnapshotRegistry(logContext);
            Map<String, org.apache.kafka.metadata.VersionRange> supported =
                QuorumFeatures.defaultSupportedFeatureMap(true);
            QuorumFeatures quorumFeatures = new QuorumFeatures(Math.max(controllerNodeId, 0), supported,
                List.of(Math.max(controllerNodeId, 0)));
            featureControl = new FeatureControlManager.Builder().
                setLogContext(logContext).
                setSnapshotRegistry(snapshotRegistry).
                setQuorumFeatures(quorumFeatures).
                build();
            clusterControl = new ClusterControlManager.Builder().
                setLogContext(logContext).
                setClusterId("kcsim-oracle").
                setTime(time).
                setSnapshotRegistry(snapshotRegistry).
                setReplicaPlacer(new StripedReplicaPlacer(new Random(controllerCount))).
                setFeatureControlManager(featureControl).
                setBrokerShutdownHandler((id, clean, records) ->
                    replicationControl.handleBrokerShutdown(id, clean, records)).
                build();
            Map<String, Object> staticConfig = new HashMap<>();
            staticConfig.put("min.insync.replicas", Integer.toString(minIsr));
            staticConfig.put("unclean.leader.election.enable", Boolean.toString(unclean));
            configurationControl = new ConfigurationControlManager.Builder().
                setLogContext(logContext).
                setSnapshotRegistry(snapshotRegistry).
                setKafkaConfigSchema(configSchema()).
                setStaticConfig(staticConfig).
                setValidator(VALUE_VALIDATOR).
                setNodeId(controllerNodeId).
                setFeatureControl(featureControl).
                build();
            replicationControl = newReplicationControl();
            replayOne(new FeatureLevelRecord().setName(MetadataVersion.FEATURE_NAME).
                setFeatureLevel(mv.featureLevel()), -1);
            if (elrLevel > 0) {
                replayOne(new FeatureLevelRecord().setName(EligibleLeaderReplicasVersion.FEATURE_NAME).
                    setFeatureLevel(elrLevel), -1);
                replayOne(new ConfigRecord().setResourceType(ConfigResource.Type.BROKER.id()).
                    setResourceName("").setName("min.insync.replicas").
                    setValue(Integer.toString(minIsr)), -1);
            }
            int loaded = depositions.getOrDefault(controllerNodeId, -1);
            for (int offset = 0; offset < log.size(); offset++) {
                if (offset == loaded) loadReplicationSnapshot(offset);
                replayOne(log.get(offset), offset);
            }
            if (loaded == log.size()) loadReplicationSnapshot(loaded);
            clusterControl.activate();
        }

        ReplicationControlManager newReplicationControl() {
            return new ReplicationControlManager.Builder().
                setSnapshotRegistry(snapshotRegistry).
                setLogContext(logContext).
                setMaxElectionsPerImbalance(ReplicationControlManager.MAX_ELECTIONS_PER_IMBALANCE).
                setConfigurationControl(configurationControl).
                setClusterControl(clusterControl).
                setFeatureControl(featureControl).
                build();
        }

        /** The replication state of the first `end` records, reloaded as a snapshot holds it. */
        void loadReplicationSnapshot(int end) {
            Map<Uuid, String> names = new LinkedHashMap<>();
            Map<Uuid, TreeSet<Integer>> parts = new HashMap<>();
            for (int offset = 0; offset < end; offset++) {
                ApiMessage message = log.get(offset);
                if (message instanceof TopicRecord r) {
                    names.put(r.topicId(), r.name());
                    parts.put(r.topicId(), new TreeSet<>());
                } else if (message instanceof RemoveTopicRecord r) {
                    names.remove(r.topicId());
                    parts.remove(r.topicId());
                } else if (message instanceof PartitionRecord r) {
                    parts.get(r.topicId()).add(r.partitionId());
                }
            }
            // [kcsim] ELR and LKE kept as they are: Kafka's SnapshotEmitter leaves them out of
            // a snapshot written while ELR is off, which kcsim does not model (one partition
            // state for every controller); only the index is rebuilt
            ImageWriterOptions options = new ImageWriterOptions.Builder(mv).
                setEligibleLeaderReplicasEnabled(true).build();
            ReplicationControlManager loaded = newReplicationControl();
            for (Entry<Uuid, String> topic : names.entrySet()) {
                loaded.replay(new TopicRecord().setTopicId(topic.getKey()).setName(topic.getValue()));
                for (int partition : parts.get(topic.getKey())) {
                    PartitionRegistration p = replicationControl.getPartition(topic.getKey(), partition);
                    loaded.replay((PartitionRecord) p.toRecord(topic.getKey(), partition, options).message());
                }
            }
            replicationControl = loaded;
        }

        void replayOne(ApiMessage message, long offset) {
            if (message instanceof RegisterBrokerRecord r) clusterControl.replay(r, offset);
            else if (message instanceof UnregisterBrokerRecord r) clusterControl.replay(r);
            else if (message instanceof BrokerRegistrationChangeRecord r) clusterControl.replay(r);
            else if (message instanceof TopicRecord r) replicationControl.replay(r);
            else if (message instanceof PartitionRecord r) replicationControl.replay(r);
            else if (message instanceof PartitionChangeRecord r) replicationControl.replay(r);
            else if (message instanceof RemoveTopicRecord r) replicationControl.replay(r);
            else if (message instanceof ClearElrRecord r) replicationControl.replay(r);
            else if (message instanceof ConfigRecord r) configurationControl.replay(r);
            else if (message instanceof FeatureLevelRecord r) featureControl.replay(r);
            else throw new IllegalStateException("unexpected record " + message);
        }

        /**
         * Append and replay one operation's records, as QuorumController does after generating
         * them, in the order Kafka generated them.
         */
        long append(List<ApiMessageAndVersion> records) {
            List<ApiMessage> messages = new ArrayList<>();
            for (ApiMessageAndVersion mv : records) messages.add(mv.message());
            return appendMessages(messages);
        }

        /**
         * An operation that walks one of RCM's indexes (B2I, B2I(-1), B2E, the imbalanced set,
         * every topic): SPEC-KRAFT §22.1. Kafka's order of a walk follows Timeline hash tables
         * keyed by random topic ids; kcsim walks by (topic, partition). So each walk's run of
         * PartitionChangeRecords is put in that order, and nothing else moves: a record before
         * or after a walk keeps its place. Each maximal run of PartitionChangeRecords is one walk.
         */
        long appendWalks(List<ApiMessageAndVersion> records) {
            return appendWalks(records, null);
        }

        /**
         * As appendWalks, for an operation whose records start with two adjacent walks, B2I(b)
         * then B2E(b) (RCM.handleBrokerUnregistered :1385, handleBrokerShutdown :1445 unclean
         * under ELR): `firstWalk` is B2I(b)'s own iteration order taken just before the call. The
         * first walk's records are a subsequence of it and the second walk's follow, so the
         * longest leading run that is a subsequence of `firstWalk` is the first walk (both walks
         * build from the same unreplayed registrations with the same arguments, so a partition
         * the first walk skipped the second skips too). The two walks are ordered separately.
         */
        long appendWalks(List<ApiMessageAndVersion> records, List<TopicIdPartition> firstWalk) {
            List<ApiMessage> out = new ArrayList<>();
            List<PartitionChangeRecord> run = new ArrayList<>();
            int start = 0;
            if (firstWalk != null) {
                int at = 0;
                for (ApiMessageAndVersion mv : records) {
                    if (!(mv.message() instanceof PartitionChangeRecord r)) break;
                    while (at < firstWalk.size()
                        && !(firstWalk.get(at).topicId().equals(r.topicId())
                            && firstWalk.get(at).partitionId() == r.partitionId())) {
                        at++;
                    }
                    if (at == firstWalk.size()) break;
                    at++;
                    run.add(r);
                    start++;
                }
                flushRun(run, out);
            }
            for (ApiMessageAndVersion mv : records.subList(start, records.size())) {
                if (mv.message() instanceof PartitionChangeRecord r) {
                    run.add(r);
                    continue;
                }
                flushRun(run, out);
                out.add(mv.message());
            }
            flushRun(run, out);
            return appendMessages(out);
        }

        /**
         * A periodic task capped at 1000 records a run and rerun within the event (SPEC-KRAFT
         * §15.2, §15.3): which partitions the first run takes follows the walk's hash order
         * (§22.1), and a partition's record does not depend on the others', so the whole
         * event's PartitionChangeRecords are one walk, put in (topic, partition) order.
         */
        void sortPendingWalk(int from) {
            List<JsonNode> walk = new ArrayList<>();
            for (int i = from; i < pendingRecords.size(); i++) walk.add(pendingRecords.get(i));
            if (walk.stream().anyMatch(n -> !"PartitionChangeRecord".equals(n.path("type").asText()))) return;
            walk.sort((a, b) -> {
                int c = a.path("record").path("topic").asText().compareTo(b.path("record").path("topic").asText());
                return c != 0 ? c : Integer.compare(a.path("record").path("partitionId").asInt(),
                    b.path("record").path("partitionId").asInt());
            });
            for (int i = 0; i < walk.size(); i++) pendingRecords.set(from + i, walk.get(i));
        }

        static List<TopicIdPartition> walkOrder(Iterator<TopicIdPartition> iterator) {
            List<TopicIdPartition> out = new ArrayList<>();
            iterator.forEachRemaining(out::add);
            return out;
        }

        long appendMessages(List<ApiMessage> messages) {
            for (ApiMessage message : messages) {
                long offset = log.size();
                log.add(message);
                if (message instanceof TopicRecord r) {
                    topicNames.put(r.topicId(), r.name());
                    topicIds.put(r.name(), r.topicId());
                    partitionIds.put(r.name(), new TreeSet<>());
                }
                pendingRecords.add(recordJson(message));
                replayOne(message, offset);
                if (message instanceof PartitionRecord r) {
                    partitionIds.get(topicNames.get(r.topicId())).add(r.partitionId());
                } else if (message instanceof RemoveTopicRecord r) {
                    String name = topicNames.get(r.topicId());
                    partitionIds.remove(name);
                    topicIds.remove(name);
                }
            }
            return log.size() - 1;
        }

        void flushRun(List<PartitionChangeRecord> run, List<ApiMessage> out) {
            run.sort((a, b) -> {
                int c = topicNames.get(a.topicId()).compareTo(topicNames.get(b.topicId()));
                return c != 0 ? c : Integer.compare(a.partitionId(), b.partitionId());
            });
            out.addAll(run);
            run.clear();
        }

        void dropPending() {
            pendingRecords.removeAll();
            results = JSON.createArrayNode();
        }

        ControllerRequestContext context(ApiKeys key, int version) {
            return new ControllerRequestContext(new RequestHeaderData().
                setRequestApiKey(key.id).setRequestApiVersion((short) version),
                KafkaPrincipal.ANONYMOUS, OptionalLong.empty());
        }

        // ------------------------------------------------------------------ events

        ObjectNode apply(JsonNode event) {
            dropPending();
            // Past every session timeout: no registration meets a live session (SPEC-KRAFT §6.2).
            time.nanos += TimeUnit.SECONDS.toNanos(60);
            String type = event.path("type").asText();
            switch (type) {
                case "broker_registration" -> brokerRegistration(event.get("broker").asInt(),
                    textOrNull(event, "rack"), longOrNull(event, "broker_epoch"),
                    longOrNull(event, "previous_broker_epoch"), textOrNull(event, "incarnation"));
                case "broker_startup" -> {
                    for (int b : brokers(event)) {
                        BrokerRegistration reg = clusterControl.brokerRegistrations().get(b);
                        Long previous = reg != null && cleanExit.getOrDefault(b, false) ? reg.epoch() : null;
                        // A registration Kafka fails (UNKNOWN_SERVER_ERROR) is retried by the
                        // broker, which sends no heartbeat before it succeeds.
                        if (brokerRegistration(b, textOrNull(event, "rack"), null, previous, null)) {
                            heartbeat(b, false, false);
                        }
                    }
                }
                case "broker_unfence" -> heartbeat(event.get("broker").asInt(), false, false);
                case "broker_failure" -> {
                    // [kcsim] the front door rejects the whole event when one of its brokers
                    // is not registered (CONTRACT §1): nothing is fenced.
                    List<Integer> lost = brokers(event);
                    if (lost.stream().allMatch(clusterControl.brokerRegistrations()::containsKey)) {
                        for (int b : lost) fence(b);
                    } else {
                        results.add(row(null, null, Errors.BROKER_ID_NOT_REGISTERED, "rejected"));
                    }
                }
                case "controlled_shutdown" -> controlledShutdown(event);
                case "broker_unregistration" -> unregistration(event.get("broker").asInt());
                case "topic_creation" -> topicCreation(event);
                case "partition_creation" -> partitionCreation(event);
                case "topic_deletion" -> topicDeletion(event);
                case "stop_replica_response" -> results.add(row(event.path("topic").asText(null),
                    event.path("partition").isInt() ? event.get("partition").asInt() : null, null,
                    "KRaft sends no StopReplica"));
                case "partition_reassignment" -> reassignment(event);
                case "isr_change" -> isrChange(event);
                case "leader_election" -> leaderElection(event);
                case "auto_rebalance_check" -> {
                    if (!autoRebalance) {
                        results.add(row(null, null, null, "auto.leader.rebalance.enable is false"));
                    } else {
                        int from = pendingRecords.size();
                        boolean again = true;
                        while (again) {
                            ControllerResult<Boolean> r = replicationControl.maybeBalancePartitionLeaders();
                            appendWalks(r.records());
                            again = r.response();
                        }
                        sortPendingWalk(from);
                    }
                }
                case "unclean_election_check" -> {
                    int from = pendingRecords.size();
                    boolean again = true;
                    while (again) {
                        ControllerResult<Boolean> r = replicationControl.maybeElectUncleanLeaders();
                        appendWalks(r.records());
                        again = r.response();
                    }
                    sortPendingWalk(from);
                }
                case "topic_config_change" -> configChange(
                    new ConfigResource(ConfigResource.Type.TOPIC, event.get("topic").asText()), event);
                case "cluster_config_change" -> configChange(new ConfigResource(ConfigResource.Type.BROKER,
                    event.has("broker") && !event.get("broker").isNull()
                        ? Integer.toString(event.get("broker").asInt()) : ""), event);
                case "feature_update" -> featureUpdate(event);
                case "controller_failover" -> {
                    if (event.has("controller") && !event.get("controller").isNull()) {
                        int next = event.get("controller").asInt();
                        if (controllerNodeId >= 0 && next != controllerNodeId) {
                            depositions.put(controllerNodeId, log.size());
                        }
                        controllerNodeId = next;
                    }
                    controllerCount++;
                    askedShutdown.clear();
                    buildManagers();
                    for (JsonNode b : event.path("failed_brokers")) fence(b.asInt());
                }
                default -> throw new IllegalArgumentException("unknown event type " + type);
            }
            ObjectNode out = JSON.createObjectNode();
            out.set("records", pendingRecords.deepCopy());
            out.set("results", results);
            // Only what changed since the previous line: the driver rebuilds the whole state.
            out.set("partitions", changedSince(partitionsJson(), lastPartitions, out, "removed_partitions"));
            out.set("brokers", changedSince(brokersJson(), lastBrokers, out, "removed_brokers"));
            return out;
        }

        final Map<String, String> lastPartitions = new HashMap<>();
        final Map<String, String> lastBrokers = new HashMap<>();

        static ArrayNode changedSince(ArrayNode now, Map<String, String> last, ObjectNode out, String removedKey) {
            ArrayNode changed = JSON.createArrayNode();
            Set<String> seen = new java.util.HashSet<>();
            for (JsonNode n : now) {
                String key = n.has("topic") ? n.get("topic").asText() + "/" + n.get("partition").asInt()
                    : Integer.toString(n.get("broker").asInt());
                seen.add(key);
                String text = n.toString();
                if (!text.equals(last.put(key, text))) changed.add(n);
            }
            ArrayNode removed = JSON.createArrayNode();
            for (Iterator<String> it = last.keySet().iterator(); it.hasNext(); ) {
                String key = it.next();
                if (!seen.contains(key)) {
                    removed.add(key);
                    it.remove();
                }
            }
            if (!removed.isEmpty()) out.set(removedKey, removed);
            return changed;
        }

        static List<Integer> brokers(JsonNode event) {
            List<Integer> out = new ArrayList<>();
            if (event.has("brokers")) for (JsonNode b : event.get("brokers")) out.add(b.asInt());
            else out.add(event.get("broker").asInt());
            return out;
        }

        static String textOrNull(JsonNode event, String key) {
            JsonNode n = event.get(key);
            return n == null || n.isNull() ? null : n.asText();
        }

        static Long longOrNull(JsonNode event, String key) {
            JsonNode n = event.get(key);
            return n == null || n.isNull() ? null : n.asLong();
        }

        Uuid directoryOf(int brokerId) {
            return new Uuid(0x6b6373696d646972L, 1000L + brokerId);
        }

        /** SPEC-KRAFT §6: BrokerRegistration v3+, one log directory, every feature supported. */
        boolean brokerRegistration(int b, String rack, Long brokerEpoch, Long previousEpoch, String incarnation) {
            BrokerRegistration existing = clusterControl.brokerRegistrations().get(b);
            Uuid incarnationId;
            if (incarnation != null) {
                incarnationId = incarnationIds.computeIfAbsent(incarnation,
                    k -> new Uuid(0x696e6361726e0000L, ++incarnationCounter));
                incarnationNames.put(incarnationId, incarnation);
            } else {
                incarnationId = new Uuid(0x696e6361726e0000L, ++incarnationCounter);
            }
            boolean amendment = existing != null && existing.incarnationId().equals(incarnationId);
            if (!amendment && existing != null && !existing.fenced()) {
                // [kcsim] Kafka refuses the new incarnation until the old session expires and
                // fences it (§6.2): that expiry fence first, as its own operation.
                fence(b);
            }
            Map<String, Short> finalized = new HashMap<>(
                featureControl.finalizedFeatures(Long.MAX_VALUE).featureMap());
            finalized.put(KRaftVersion.FEATURE_NAME, KRaftVersion.KRAFT_VERSION_1.featureLevel());
            BrokerRegistrationRequestData.FeatureCollection features =
                new BrokerRegistrationRequestData.FeatureCollection();
            Set<String> names = new TreeSet<>(finalized.keySet());
            names.add(MetadataVersion.FEATURE_NAME);
            names.add(EligibleLeaderReplicasVersion.FEATURE_NAME);
            for (String name : names) {
                features.add(new BrokerRegistrationRequestData.Feature().setName(name).
                    setMinSupportedVersion((short) 0).setMaxSupportedVersion(Short.MAX_VALUE));
            }
            BrokerRegistrationRequestData request = new BrokerRegistrationRequestData().
                setBrokerId(b).
                setClusterId("kcsim-oracle").
                setIncarnationId(incarnationId).
                setRack(rack).
                setFeatures(features).
                setLogDirs(List.of(directoryOf(b))).
                setPreviousBrokerEpoch(previousEpoch == null ? -1 : previousEpoch);
            long epoch = brokerEpoch != null ? brokerEpoch : log.size();
            ControllerResult<BrokerRegistrationReply> r;
            List<TopicIdPartition> cleanupIsrWalk =
                walkOrder(replicationControl.brokersToIsrs().partitionsWithBrokerInIsr(b));
            try {
                r = clusterControl.registerBroker(request, epoch,
                    new FinalizedControllerFeatures(finalized, Long.MAX_VALUE), true);
            } catch (RuntimeException e) {
                if (isStaleElrIndexFailure(e)) {
                    results.add(row(null, null, Errors.UNKNOWN_SERVER_ERROR, e.getMessage()));
                    return false;
                }
                throw e;
            }
            appendWalks(r.records(), cleanupIsrWalk);
            if (!amendment) {
                askedShutdown.remove(b);
                cleanExit.remove(b);
            }
            return true;
        }

        static boolean isStaleElrIndexFailure(Throwable e) {
            return e.getMessage() != null && e.getMessage().contains("but not in the topics map");
        }

        /** Session expiry (SPEC-KRAFT §8): RCM.maybeFenceOneStaleBroker's own two steps. */
        void fence(int b) {
            BrokerRegistration reg = clusterControl.brokerRegistrations().get(b);
            if (reg == null) {
                results.add(row(null, null, Errors.BROKER_ID_NOT_REGISTERED, "broker " + b + " not registered"));
                return;
            }
            boolean wasFenced = reg.fenced();
            boolean clean = reg.inControlledShutdown() || askedShutdown.getOrDefault(b, false);
            List<ApiMessageAndVersion> records = new ArrayList<>();
            replicationControl.handleBrokerFenced(b, records);
            clusterControl.heartbeatManager().fence(b);
            appendWalks(records);
            if (!wasFenced) cleanExit.put(b, clean);
        }

        /**
         * A heartbeat (SPEC-KRAFT §7, §9) through RCM.processBrokerHeartbeat, with the broker
         * caught up and, [kcsim], every active broker caught up too.
         */
        BrokerHeartbeatReply heartbeat(int b, boolean wantShutDown, boolean wantFence) {
            BrokerRegistration reg = clusterControl.brokerRegistrations().get(b);
            if (reg == null) {
                // QuorumController: a heartbeat before registration (kcsim rejects the event).
                results.add(row(null, null, Errors.STALE_BROKER_EPOCH, "rejected: not registered"));
                return new BrokerHeartbeatReply(false, true, false, false);
            }
            BrokerHeartbeatManager hbm = clusterControl.heartbeatManager();
            for (BrokerHeartbeatManager.BrokerHeartbeatState state : new ArrayList<>(hbm.brokers())) {
                if (!state.fenced() && !state.shuttingDown()) {
                    hbm.touch(state.id(), false, Long.MAX_VALUE - 1);
                }
            }
            BrokerHeartbeatRequestData request = new BrokerHeartbeatRequestData().
                setBrokerId(b).
                setBrokerEpoch(reg.epoch()).
                setCurrentMetadataOffset(Long.MAX_VALUE - 1).
                setWantFence(wantFence).
                setWantShutDown(wantShutDown);
            boolean wasFenced = reg.fenced();
            ControllerResult<BrokerHeartbeatReply> r = replicationControl.processBrokerHeartbeat(
                request, clusterControl.registerBrokerRecordOffset(b).getAsLong());
            long end = appendWalks(r.records());
            if (r.response().inControlledShutdown()) {
                hbm.maybeUpdateControlledShutdownOffset(b, end);
            }
            if (r.response().isFenced() && !wasFenced) {
                cleanExit.put(b, askedShutdown.getOrDefault(b, false));
            }
            return r.response();
        }

        void controlledShutdown(JsonNode event) {
            int b = event.get("broker").asInt();
            BrokerRegistration reg = clusterControl.brokerRegistrations().get(b);
            Long given = longOrNull(event, "broker_epoch");
            if (reg == null) {
                results.add(row(null, null, Errors.BROKER_ID_NOT_REGISTERED, "broker " + b + " not registered"));
                return;
            }
            if (given != null && given != reg.epoch()) {
                // The heartbeat's epoch check (CCM.checkBrokerEpoch :757) and its message.
                try {
                    clusterControl.checkBrokerEpoch(b, given);
                } catch (StaleBrokerEpochException e) {
                    results.add(row(null, null, Errors.STALE_BROKER_EPOCH, e.getMessage()));
                }
                return;
            }
            askedShutdown.put(b, true);
            BrokerHeartbeatReply reply = heartbeat(b, true, false);
            String next = reply.shouldShutDown() ? "SHUTDOWN_NOW"
                : reply.inControlledShutdown() ? "CONTROLLED_SHUTDOWN"
                : reply.isFenced() ? "FENCED" : "UNFENCED";
            results.add(row(null, null, null, next));
        }

        void unregistration(int b) {
            ControllerResult<Void> r;
            List<TopicIdPartition> isrWalk =
                walkOrder(replicationControl.brokersToIsrs().partitionsWithBrokerInIsr(b));
            try {
                r = replicationControl.unregisterBroker(b);
            } catch (RuntimeException e) {
                Errors error = isStaleElrIndexFailure(e) ? Errors.UNKNOWN_SERVER_ERROR : Errors.forException(e);
                results.add(row(null, null, error, e.getMessage()));
                return;
            }
            appendWalks(r.records(), isrWalk);
            askedShutdown.remove(b);
            cleanExit.remove(b);
        }

        static Map<String, String> configs(JsonNode event) {
            Map<String, String> out = new LinkedHashMap<>();
            Iterator<Entry<String, JsonNode>> it = event.path("configs").fields();
            while (it.hasNext()) {
                Entry<String, JsonNode> e = it.next();
                out.put(e.getKey(), e.getValue().isNull() ? null : e.getValue().asText());
            }
            return out;
        }

        /** Whether Kafka's CreateTopics/CreatePartitions would accept this assignment as it is. */
        boolean kafkaAcceptsAssignment(TreeMap<Integer, List<Integer>> assignment, int firstId, int rf) {
            int expected = firstId;
            for (Entry<Integer, List<Integer>> e : assignment.entrySet()) {
                if (e.getKey() != expected++) return false;
                if (rf >= 0 && e.getValue().size() != rf) return false;
                if (rf < 0) rf = e.getValue().size();
                if (new TreeSet<>(e.getValue()).size() != e.getValue().size()) return false;
                for (int broker : e.getValue()) {
                    if (!clusterControl.brokerRegistrations().containsKey(broker)) return false;
                }
            }
            return true;
        }

        static TreeMap<Integer, List<Integer>> assignment(JsonNode event) {
            TreeMap<Integer, List<Integer>> out = new TreeMap<>();
            Iterator<Entry<String, JsonNode>> it = event.path("assignment").fields();
            while (it.hasNext()) {
                Entry<String, JsonNode> e = it.next();
                List<Integer> replicas = new ArrayList<>();
                for (JsonNode b : e.getValue()) replicas.add(b.asInt());
                out.put(Integer.parseInt(e.getKey()), replicas);
            }
            return out;
        }

        /** SPEC-KRAFT §11: CreateTopics (explicit assignment, or the striped placer). */
        void topicCreation(JsonNode event) {
            String topic = event.get("topic").asText();
            Map<String, String> configs = configs(event);
            CreatableTopic creatable = new CreatableTopic().setName(topic);
            for (Entry<String, String> c : configs.entrySet()) {
                creatable.configs().add(new CreatableTopicConfig().setName(c.getKey()).setValue(c.getValue()));
            }
            if (event.has("assignment")) {
                TreeMap<Integer, List<Integer>> assignment = assignment(event);
                if (!topicIds.containsKey(topic)
                        && (event.hasNonNull("state") || !kafkaAcceptsAssignment(assignment, 0, -1))) {
                    lenientTopicCreation(topic, assignment, creatable, configs, event.get("state"));
                    return;
                }
                creatable.setNumPartitions(-1).setReplicationFactor((short) -1);
                for (Entry<Integer, List<Integer>> e : assignment.entrySet()) {
                    creatable.assignments().add(new CreatableReplicaAssignment().
                        setPartitionIndex(e.getKey()).setBrokerIds(e.getValue()));
                }
            } else {
                creatable.setNumPartitions(event.get("partitions").asInt()).
                    setReplicationFactor((short) event.get("replication_factor").asInt());
            }
            CreateTopicsRequestData request = new CreateTopicsRequestData();
            request.topics().add(creatable);
            ControllerResult<CreateTopicsResponseData> r = replicationControl.createTopics(
                context(ApiKeys.CREATE_TOPICS, 7), request, Set.of());
            append(r.records());
            for (CreateTopicsResponseData.CreatableTopicResult t : r.response().topics()) {
                if (t.errorCode() != 0) {
                    results.add(row(topic, null, Errors.forCode(t.errorCode()), t.errorMessage()));
                }
            }
        }

        /**
         * [kcsim] CONTRACT §1's lenient explicit assignment (uneven replica counts, gaps,
         * unregistered brokers), which Kafka's CreateTopics refuses but a log or snapshot can
         * hold: the records CreateTopics would write, built by Kafka's own classes, with its
         * ISR and leader rule (SPEC-KRAFT §11.1).
         */
        void lenientTopicCreation(String topic, TreeMap<Integer, List<Integer>> assignment,
                                  CreatableTopic creatable, Map<String, String> configs, JsonNode state) {
            for (Entry<Integer, List<Integer>> e : assignment.entrySet()) {
                if (state == null && e.getValue().stream().noneMatch(clusterControl::isActive)) {
                    results.add(row(topic, null, Errors.INVALID_REPLICA_ASSIGNMENT,
                        "All brokers specified in the manual partition assignment for partition "
                            + e.getKey() + " are fenced or in controlled shutdown."));
                    return;
                }
            }
            List<ApiMessageAndVersion> records = new ArrayList<>();
            Uuid topicId = new Uuid(0x746f706963000000L, log.size() + 1);
            records.add(new ApiMessageAndVersion(new TopicRecord().setName(topic).setTopicId(topicId), (short) 0));
            if (!configs.isEmpty()) {
                // CreateTopics collects a topic's configs in a HashMap (RCM.computeConfigChanges
                // :908): ConfigRecords come out in its key order, not the request's.
                Map<String, Entry<OpType, String>> ops = new HashMap<>();
                for (Entry<String, String> c : configs.entrySet()) {
                    ops.put(c.getKey(), Map.entry(OpType.SET, c.getValue()));
                }
                ControllerResult<ApiError> cr = configurationControl.incrementalAlterConfig(
                    new ConfigResource(ConfigResource.Type.TOPIC, topic), ops, true);
                if (cr.response().isFailure()) {
                    results.add(row(topic, null, cr.response().error(), cr.response().message()));
                    return;
                }
                records.addAll(cr.records());
            }
            records.addAll(lenientPartitionRecords(topicId, assignment, state));
            append(records);
        }

        /**
         * PartitionRecords for an explicit assignment: ISR = the active replicas, leader = the
         * first of them (SPEC-KRAFT §11.1); or, [kcsim] for a partition `state` carries (a
         * snapshot's stored registration, CONTRACT §5: loaded as it is, nothing refused), the
         * stored leader, epochs, ISR, ELR, last known ELR and recovery state.
         */
        List<ApiMessageAndVersion> lenientPartitionRecords(Uuid topicId, TreeMap<Integer, List<Integer>> assignment,
                                                           JsonNode state) {
            List<ApiMessageAndVersion> records = new ArrayList<>();
            ImageWriterOptions options = new ImageWriterOptions.Builder(featureControl.metadataVersionOrThrow()).
                setEligibleLeaderReplicasEnabled(featureControl.isElrFeatureEnabled()).build();
            for (Entry<Integer, List<Integer>> e : assignment.entrySet()) {
                PartitionAssignment pa = new PartitionAssignment(e.getValue(), replicationControl.clusterDescriber);
                List<Integer> isr = e.getValue().stream().filter(clusterControl::isActive).toList();
                JsonNode stored = state == null ? null : state.get(Integer.toString(e.getKey()));
                PartitionRegistration.Builder builder = new PartitionRegistration.Builder().
                    setReplicas(e.getValue().stream().mapToInt(Integer::intValue).toArray()).
                    setDirectories(pa.directories().toArray(new Uuid[0])).
                    setIsr(isr.stream().mapToInt(Integer::intValue).toArray()).
                    setLeader(isr.isEmpty() ? -1 : isr.get(0)).
                    setLeaderRecoveryState(LeaderRecoveryState.RECOVERED).
                    setLeaderEpoch(0).
                    setPartitionEpoch(0);
                if (stored != null) {
                    builder.setIsr(intArray(stored.get("isr"))).
                        setLeader(stored.get("leader").asInt()).
                        setLeaderEpoch(stored.get("leader_epoch").asInt()).
                        setPartitionEpoch(stored.get("partition_epoch").asInt()).
                        setRemovingReplicas(intArray(stored.get("removing_replicas"))).
                        setAddingReplicas(intArray(stored.get("adding_replicas"))).
                        setElr(intArray(stored.get("elr"))).
                        setLastKnownElr(intArray(stored.get("last_known_elr")));
                    if (stored.hasNonNull("leader_recovery_state")) {
                        builder.setLeaderRecoveryState(LeaderRecoveryState.of(lrsValue(stored.get("leader_recovery_state"))));
                    }
                }
                PartitionRegistration reg = builder.build();
                records.add(reg.toRecord(topicId, e.getKey(), options));
            }
            return records;
        }

        /** SPEC-KRAFT §11.4: CreatePartitions with the new partitions' assignments. */
        void partitionCreation(JsonNode event) {
            String topic = event.get("topic").asText();
            TreeMap<Integer, List<Integer>> assignment = assignment(event);
            Uuid topicId = topicIds.get(topic);
            int current = topicId == null ? 0 : partitionIds.get(topic).size();
            int rf = -1;
            if (topicId != null && !partitionIds.get(topic).isEmpty()) {
                // Kafka compares with the first partition of its TimelineHashMap's iteration.
                int first = firstPartitionInHashOrder(topicId);
                PartitionRegistration p = replicationControl.getPartition(topicId, first);
                rf = p.replicas.length;
            }
            boolean namesExisting = topicId != null
                && assignment.keySet().stream().anyMatch(partitionIds.get(topic)::contains);
            if (namesExisting) {
                // [kcsim] an assignment naming an existing partition adds nothing: the nearest
                // CreatePartitions asks for the current count, which Kafka refuses first
                // (RCM.createPartition :1840, INVALID_PARTITIONS).
                assignment = new TreeMap<>();
            }
            JsonNode state = event.get("state");
            boolean stored = state != null && !state.isNull();
            if (topicId != null && !namesExisting && (stored || !kafkaAcceptsAssignment(assignment, current, rf))) {
                for (Entry<Integer, List<Integer>> e : assignment.entrySet()) {
                    if (!stored && e.getValue().stream().noneMatch(clusterControl::isActive)) {
                        results.add(row(topic, null, Errors.INVALID_REPLICA_ASSIGNMENT,
                            "All brokers specified in the manual partition assignment for partition "
                                + e.getKey() + " are fenced or in controlled shutdown."));
                        return;
                    }
                }
                append(lenientPartitionRecords(topicId, assignment, stored ? state : null));
                return;
            }
            CreatePartitionsTopic request = new CreatePartitionsTopic().setName(topic).
                setCount(current + assignment.size()).setAssignments(new ArrayList<>());
            for (List<Integer> replicas : assignment.values()) {
                request.assignments().add(new CreatePartitionsAssignment().setBrokerIds(replicas));
            }
            ControllerResult<List<CreatePartitionsTopicResult>> r = replicationControl.createPartitions(
                context(ApiKeys.CREATE_PARTITIONS, 3), List.of(request));
            append(r.records());
            for (CreatePartitionsTopicResult t : r.response()) {
                if (t.errorCode() != 0) results.add(row(topic, null, Errors.forCode(t.errorCode()), t.errorMessage()));
            }
        }

        /** The first key of the topic's TimelineHashMap of partitions, in its own iteration order. */
        int firstPartitionInHashOrder(Uuid topicId) {
            try {
                ReplicationControlManager.TopicControlInfo info = replicationControl.getTopic(topicId);
                java.lang.reflect.Field parts = ReplicationControlManager.TopicControlInfo.class.getDeclaredField("parts");
                parts.setAccessible(true);
                return ((Map<Integer, ?>) parts.get(info)).keySet().iterator().next();
            } catch (ReflectiveOperationException e) {
                throw new IllegalStateException(e);
            }
        }

        void topicDeletion(JsonNode event) {
            String topic = event.get("topic").asText();
            Uuid id = topicIds.get(topic);
            if (!deleteTopicEnable) {
                results.add(row(topic, null, Errors.TOPIC_DELETION_DISABLED, "rejected"));
                return;
            }
            if (id == null) {
                results.add(row(topic, null, Errors.UNKNOWN_TOPIC_OR_PARTITION, "rejected"));
                return;
            }
            ControllerResult<Map<Uuid, ApiError>> r = replicationControl.deleteTopics(
                context(ApiKeys.DELETE_TOPICS, 6), List.of(id));
            append(r.records());
            ApiError error = r.response().get(id);
            if (error.isFailure()) results.add(row(topic, null, error.error(), error.message()));
        }

        void reassignment(JsonNode event) {
            String topic = event.get("topic").asText();
            int partition = event.get("partition").asInt();
            AlterPartitionReassignmentsRequestData.ReassignablePartition rp =
                new AlterPartitionReassignmentsRequestData.ReassignablePartition().setPartitionIndex(partition);
            JsonNode replicas = event.get("replicas");
            if (replicas == null || replicas.isNull()) {
                rp.setReplicas(null);
            } else {
                List<Integer> target = new ArrayList<>();
                for (JsonNode b : replicas) target.add(b.asInt());
                rp.setReplicas(target);
            }
            AlterPartitionReassignmentsRequestData request = new AlterPartitionReassignmentsRequestData();
            request.topics().add(new AlterPartitionReassignmentsRequestData.ReassignableTopic().
                setName(topic).setPartitions(new ArrayList<>(List.of(rp))));
            ControllerResult<AlterPartitionReassignmentsResponseData> r =
                replicationControl.alterPartitionReassignments(request);
            append(r.records());
            AlterPartitionReassignmentsResponseData.ReassignablePartitionResponse resp =
                r.response().responses().get(0).partitions().get(0);
            Errors error = Errors.forCode(resp.errorCode());
            ObjectNode row = row(topic, partition, error == Errors.NONE ? null : error, resp.errorMessage());
            if (error == Errors.NONE) addState(row, topic, partition);
            results.add(row);
        }

        /** SPEC-KRAFT §14: AlterPartition v3 from the leader (or the event's `leader`). */
        void isrChange(JsonNode event) {
            String topic = event.get("topic").asText();
            int partition = event.get("partition").asInt();
            Uuid topicId = topicIds.get(topic);
            PartitionRegistration p = topicId == null ? null : replicationControl.getPartition(topicId, partition);
            if (p == null) {
                results.add(row(topic, partition, Errors.UNKNOWN_TOPIC_OR_PARTITION, null));
                return;
            }
            int requester = event.has("leader") && !event.get("leader").isNull()
                ? event.get("leader").asInt() : p.leader;
            BrokerRegistration reg = clusterControl.brokerRegistrations().get(requester);
            JsonNode epochs = event.path("broker_epochs");
            // The requester sends one broker epoch, its own, in the request and for itself in
            // the ISR (core Partition.scala): a `broker_epochs` entry for it is both.
            JsonNode own = epochs.get(Integer.toString(requester));
            long requesterEpoch = own != null && !own.isNull() ? own.asLong() : reg == null ? -1 : reg.epoch();
            List<AlterPartitionRequestData.BrokerState> isr = new ArrayList<>();
            for (JsonNode b : event.get("isr")) {
                JsonNode e = epochs.get(Integer.toString(b.asInt()));
                isr.add(new AlterPartitionRequestData.BrokerState().setBrokerId(b.asInt()).
                    setBrokerEpoch(e == null || e.isNull() ? -1 : e.asLong()));
            }
            byte lrs = event.has("leader_recovery_state") && !event.get("leader_recovery_state").isNull()
                ? lrsValue(event.get("leader_recovery_state")) : p.leaderRecoveryState.value();
            AlterPartitionRequestData request = new AlterPartitionRequestData().
                setBrokerId(requester).setBrokerEpoch(requesterEpoch);
            AlterPartitionRequestData.TopicData td = new AlterPartitionRequestData.TopicData().setTopicId(topicId);
            td.partitions().add(new AlterPartitionRequestData.PartitionData().
                setPartitionIndex(partition).
                setLeaderEpoch(event.has("leader_epoch") && !event.get("leader_epoch").isNull()
                    ? event.get("leader_epoch").asInt() : p.leaderEpoch).
                setPartitionEpoch(event.has("partition_epoch") && !event.get("partition_epoch").isNull()
                    ? event.get("partition_epoch").asInt() : p.partitionEpoch).
                setNewIsrWithEpochs(isr).
                setLeaderRecoveryState(lrs));
            request.topics().add(td);
            ControllerResult<AlterPartitionResponseData> r;
            try {
                r = replicationControl.alterPartition(context(ApiKeys.ALTER_PARTITION, 3), request);
            } catch (RuntimeException e) {
                results.add(row(topic, partition, Errors.forException(e), e.getMessage()));
                return;
            }
            append(r.records());
            AlterPartitionResponseData.PartitionData resp = r.response().topics().get(0).partitions().get(0);
            Errors error = Errors.forCode(resp.errorCode());
            ObjectNode row = row(topic, partition, error == Errors.NONE ? null : error, null);
            if (error == Errors.NONE) {
                row.put("leader", resp.leaderId());
                row.put("leader_epoch", resp.leaderEpoch());
                row.set("isr", ints(resp.isr()));
                row.put("partition_epoch", resp.partitionEpoch());
                row.put("leader_recovery_state", resp.leaderRecoveryState());
            }
            results.add(row);
        }

        static int[] intArray(JsonNode n) {
            if (n == null || n.isNull()) return new int[0];
            int[] out = new int[n.size()];
            for (int i = 0; i < out.length; i++) out[i] = n.get(i).asInt();
            return out;
        }

        static byte lrsValue(JsonNode n) {
            if (n.isNumber()) return (byte) n.asInt();
            return switch (n.asText()) {
                case "RECOVERING" -> (byte) 1;
                case "RECOVERED" -> (byte) 0;
                default -> throw new IllegalArgumentException("leader_recovery_state " + n);
            };
        }

        /** SPEC-KRAFT §15.1: ElectLeaders. */
        void leaderElection(JsonNode event) {
            boolean unclean = "unclean".equals(event.path("election").asText());
            ElectLeadersRequestData request = new ElectLeadersRequestData().
                setElectionType((byte) (unclean ? 1 : 0));
            if (event.has("partitions") && !event.get("partitions").isNull()) {
                ElectLeadersRequestData.TopicPartitionsCollection tps =
                    new ElectLeadersRequestData.TopicPartitionsCollection();
                for (JsonNode p : event.get("partitions")) {
                    String t = p.get("topic").asText();
                    ElectLeadersRequestData.TopicPartitions tp = tps.find(t);
                    if (tp == null) {
                        tp = new ElectLeadersRequestData.TopicPartitions().setTopic(t);
                        tps.add(tp);
                    }
                    tp.partitions().add(p.get("partition").asInt());
                }
                request.setTopicPartitions(tps);
            } else {
                request.setTopicPartitions(null);
            }
            ControllerResult<ElectLeadersResponseData> r = replicationControl.electLeaders(request);
            // Every partition: a walk over topicsByName and each topic's partitions (hash
            // tables, SPEC-KRAFT §22.1); named partitions: the request's order, compared as is.
            if (request.topicPartitions() == null) appendWalks(r.records());
            else append(r.records());
            List<ObjectNode> rows = new ArrayList<>();
            for (ElectLeadersResponseData.ReplicaElectionResult t : r.response().replicaElectionResults()) {
                for (ElectLeadersResponseData.PartitionResult pr : t.partitionResult()) {
                    Errors error = Errors.forCode(pr.errorCode());
                    rows.add(row(t.topic(), pr.partitionId(), error == Errors.NONE ? null : error, pr.errorMessage()));
                }
            }
            if (request.topicPartitions() == null) {
                rows.sort((a, b) -> {
                    int c = a.get("topic").asText().compareTo(b.get("topic").asText());
                    return c != 0 ? c : Integer.compare(a.get("partition").asInt(), b.get("partition").asInt());
                });
            }
            rows.forEach(results::add);
        }

        /** SPEC-KRAFT §16: IncrementalAlterConfigs, SET each key. */
        void configChange(ConfigResource resource, JsonNode event) {
            if (resource.type() == ConfigResource.Type.TOPIC && !topicIds.containsKey(resource.name())) {
                // QuorumController's existence checker (kcsim's front door rejects it too).
                results.add(row(resource.name(), null, Errors.UNKNOWN_TOPIC_OR_PARTITION, "rejected"));
                return;
            }
            // ControllerApis.handleIncrementalAlterConfigs (core, ControllerApis.scala :746)
            // collects a resource's alterations in a java.util.HashMap: ConfigRecords come out
            // in its key order (SPEC-KRAFT §22.3), not the request's.
            Map<String, Entry<OpType, String>> ops = new HashMap<>();
            for (Entry<String, String> c : configs(event).entrySet()) {
                ops.put(c.getKey(), Map.entry(c.getValue() == null ? OpType.DELETE : OpType.SET,
                    c.getValue() == null ? "" : c.getValue()));
            }
            Map<ConfigResource, Map<String, Entry<OpType, String>>> changes = new HashMap<>();
            changes.put(resource, ops);
            ControllerResult<Map<ConfigResource, ApiError>> r =
                configurationControl.incrementalAlterConfigs(changes, false);
            append(r.records());
            ApiError error = r.response().get(resource);
            if (error.isFailure()) {
                results.add(row(resource.type() == ConfigResource.Type.TOPIC ? resource.name() : null,
                    null, error.error(), error.message()));
            }
        }

        /** SPEC-KRAFT §17: UpdateFeatures for eligible.leader.replicas.version. */
        void featureUpdate(JsonNode event) {
            Map<String, Short> updates = new LinkedHashMap<>();
            Map<String, FeatureUpdate.UpgradeType> types = new HashMap<>();
            Iterator<Entry<String, JsonNode>> it = event.path("features").fields();
            while (it.hasNext()) {
                Entry<String, JsonNode> e = it.next();
                short level = (short) e.getValue().asInt();
                updates.put(e.getKey(), level);
                short current = featureControl.finalizedFeatures(Long.MAX_VALUE).
                    versionOrDefault(e.getKey(), (short) 0);
                types.put(e.getKey(), level < current
                    ? FeatureUpdate.UpgradeType.SAFE_DOWNGRADE : FeatureUpdate.UpgradeType.UPGRADE);
            }
            ControllerResult<ApiError> r = configurationControl.updateFeatures(updates, types, false, 1);
            append(r.records());
            if (r.response().isFailure()) {
                results.add(row(null, null, r.response().error(), r.response().message()));
            }
        }

        // ------------------------------------------------------------------ output

        ObjectNode row(String topic, Integer partition, Errors error, String message) {
            ObjectNode row = JSON.createObjectNode();
            row.put("topic", topic);
            if (partition == null) row.putNull("partition");
            else row.put("partition", partition);
            row.put("error", error == null || error == Errors.NONE ? null : error.name());
            row.put("message", message);
            return row;
        }

        void addState(ObjectNode row, String topic, int partition) {
            PartitionRegistration p = replicationControl.getPartition(topicIds.get(topic), partition);
            row.put("leader", p.leader);
            row.put("leader_epoch", p.leaderEpoch);
            row.set("isr", ints(p.isr));
            row.put("partition_epoch", p.partitionEpoch);
        }

        ArrayNode partitionsJson() {
            ArrayNode out = JSON.createArrayNode();
            for (Entry<String, TreeSet<Integer>> t : partitionIds.entrySet()) {
                Uuid id = topicIds.get(t.getKey());
                for (int partition : t.getValue()) {
                    PartitionRegistration p = replicationControl.getPartition(id, partition);
                    ObjectNode n = JSON.createObjectNode();
                    n.put("topic", t.getKey());
                    n.put("partition", partition);
                    n.put("leader", p.leader);
                    n.put("leader_epoch", p.leaderEpoch);
                    n.set("isr", ints(p.isr));
                    n.set("elr", ints(p.elr));
                    n.set("last_known_elr", ints(p.lastKnownElr));
                    n.put("partition_epoch", p.partitionEpoch);
                    n.set("replicas", ints(p.replicas));
                    n.set("adding_replicas", ints(p.addingReplicas));
                    n.set("removing_replicas", ints(p.removingReplicas));
                    n.put("leader_recovery_state", p.leaderRecoveryState.value());
                    out.add(n);
                }
            }
            return out;
        }

        ArrayNode brokersJson() {
            ArrayNode out = JSON.createArrayNode();
            TreeMap<Integer, BrokerRegistration> sorted = new TreeMap<>(clusterControl.brokerRegistrations());
            for (BrokerRegistration reg : sorted.values()) {
                ObjectNode n = JSON.createObjectNode();
                n.put("broker", reg.id());
                n.put("status", reg.fenced() ? "fenced" : reg.inControlledShutdown() ? "shutting_down" : "live");
                n.put("broker_epoch", reg.epoch());
                n.put("rack", reg.rack().orElse(null));
                out.add(n);
            }
            return out;
        }

        static ArrayNode ints(int[] values) {
            ArrayNode a = JSON.createArrayNode();
            for (int v : values) a.add(v);
            return a;
        }

        static ArrayNode ints(List<Integer> values) {
            ArrayNode a = JSON.createArrayNode();
            if (values != null) for (int v : values) a.add(v);
            return a;
        }

        static void putInts(ObjectNode n, String key, List<Integer> values) {
            if (values != null) n.set(key, ints(values));
        }

        /** The record as SPEC-KRAFT §3.4 says kcsim writes it. */
        ObjectNode recordJson(ApiMessage message) {
            ObjectNode body = JSON.createObjectNode();
            String type;
            if (message instanceof RegisterBrokerRecord r) {
                type = "RegisterBrokerRecord";
                body.put("brokerId", r.brokerId());
                String incarnation = incarnationNames.get(r.incarnationId());
                if (incarnation != null) body.put("incarnationId", incarnation);
                body.put("brokerEpoch", r.brokerEpoch());
                if (r.rack() != null) body.put("rack", r.rack());
                body.put("fenced", r.fenced());
                body.put("inControlledShutdown", r.inControlledShutdown());
            } else if (message instanceof BrokerRegistrationChangeRecord r) {
                type = "BrokerRegistrationChangeRecord";
                body.put("brokerId", r.brokerId());
                body.put("brokerEpoch", r.brokerEpoch());
                if (r.fenced() != 0) body.put("fenced", r.fenced());
                if (r.inControlledShutdown() != 0) body.put("inControlledShutdown", r.inControlledShutdown());
            } else if (message instanceof UnregisterBrokerRecord r) {
                type = "UnregisterBrokerRecord";
                body.put("brokerId", r.brokerId());
                body.put("brokerEpoch", r.brokerEpoch());
            } else if (message instanceof TopicRecord r) {
                type = "TopicRecord";
                body.put("name", r.name());
                body.put("topic", r.name());
            } else if (message instanceof PartitionRecord r) {
                type = "PartitionRecord";
                body.put("partitionId", r.partitionId());
                body.put("topic", topicNames.get(r.topicId()));
                putInts(body, "replicas", r.replicas());
                putInts(body, "isr", r.isr());
                putInts(body, "removingReplicas", r.removingReplicas());
                putInts(body, "addingReplicas", r.addingReplicas());
                body.put("leader", r.leader());
                if (r.leaderRecoveryState() == 1) body.put("leaderRecoveryState", r.leaderRecoveryState());
                body.put("leaderEpoch", r.leaderEpoch());
                body.put("partitionEpoch", r.partitionEpoch());
                if (r.eligibleLeaderReplicas() != null && !r.eligibleLeaderReplicas().isEmpty()) {
                    putInts(body, "eligibleLeaderReplicas", r.eligibleLeaderReplicas());
                }
                if (r.lastKnownElr() != null && !r.lastKnownElr().isEmpty()) {
                    putInts(body, "lastKnownElr", r.lastKnownElr());
                }
            } else if (message instanceof PartitionChangeRecord r) {
                type = "PartitionChangeRecord";
                body.put("partitionId", r.partitionId());
                body.put("topic", topicNames.get(r.topicId()));
                putInts(body, "isr", r.isr());
                if (r.leader() != -2) body.put("leader", r.leader());
                putInts(body, "replicas", r.replicas());
                putInts(body, "removingReplicas", r.removingReplicas());
                putInts(body, "addingReplicas", r.addingReplicas());
                if (r.leaderRecoveryState() != -1) body.put("leaderRecoveryState", r.leaderRecoveryState());
                putInts(body, "eligibleLeaderReplicas", r.eligibleLeaderReplicas());
                putInts(body, "lastKnownElr", r.lastKnownElr());
            } else if (message instanceof RemoveTopicRecord r) {
                type = "RemoveTopicRecord";
                body.put("topic", topicNames.get(r.topicId()));
            } else if (message instanceof ConfigRecord r) {
                type = "ConfigRecord";
                body.put("resourceType", r.resourceType());
                body.put("resourceName", r.resourceName());
                body.put("name", r.name());
                body.put("value", r.value());
            } else if (message instanceof ClearElrRecord r) {
                type = "ClearElrRecord";
                body.put("topicName", r.topicName());
            } else if (message instanceof FeatureLevelRecord r) {
                type = "FeatureLevelRecord";
                body.put("name", r.name());
                body.put("featureLevel", r.featureLevel());
            } else {
                throw new IllegalStateException("unexpected record " + message);
            }
            ObjectNode out = JSON.createObjectNode();
            out.put("type", type);
            out.set("record", body);
            return out;
        }
    }
}
