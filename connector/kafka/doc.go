// Package kafka holds the Kafka connectors (Flow's Kafka extension), built
// on franz-go: KafkaSource, KafkaSink and AtLeastOnceKafkaSink. Register
// adds them to a connector registry; the engine's DefaultConnectors does.
//
// # KafkaSource: exactly-once
//
// One source partition per Kafka partition of topic (within
// partition_filter [begin, end)), keyed "<topic>/<partition>", each read by
// its own client with direct partition assignment (no group membership).
// The pipeline's position is part of its partition state and advances only
// with the epoch commit; it is never read back from Kafka. After the
// commit, the position is committed to group_id (if set) for lag tools.
//
// Offsets are the Kafka offsets. They have gaps: transaction markers (read
// as control records and skipped), aborted records (filtered in
// read_committed, the default isolation_level), compacted keys, records
// deleted by retention and records skipped as malformed. A batch shows a
// gap by its records' offsets and by a Next beyond its last record. (The
// runtime's source reader accepts increasing offsets with gaps; see
// job/source.go.)
//
// Rows: with format = json (default) the record value must be one JSON
// object (codec.RowFromJSON); with format = raw the row is {"key": bytes,
// "value": bytes} (null when absent). Every row also gets "$partition"
// (int64), "$offset" (int64), "$timestamp" (int64, the record time in unix
// milliseconds), "$key" (bytes or null) and, if the record has headers,
// "$headers" (map of name → bytes; of repeated names the last wins). They
// replace value columns of the same names. A value that does not decode is
// malformed: malformed_message_policy = fail (default) stops the partition
// with an error naming topic, partition and offset; skip logs and skips it.
//
// WriteTimestamp (the message's SystemTimestamp) is max(record time, one
// past the previous record's), so it strictly increases within a partition
// as the runtime's watermarks require, and it is the same on every replay:
// the partition stores a small checkpoint (offset, floor) in the pipeline's
// store (table consumers) when it reports a commit, and a reader that
// starts at a position rebuilds the floor by reading from the checkpoint.
// If compaction or retention removes records between two reads of the same
// range, replayed timestamps may differ. The record time itself is the
// EventTimestamp.
//
// Brokers that cannot be reached are an error, never an empty source: a
// listing of the topic's partitions fails (the controller retries it with
// backoff, shows it under source_errors in the status and on stderr, and
// the computation cannot complete until it succeeds), and a partition whose
// polls return nothing asks the brokers for its end offset once the
// brokers have not answered for 10 s, failing its read (the job restarts
// with backoff) when they cannot be reached. Before, the client's silent
// background redials made such a partition look caught up.
//
// finite = %true ends each partition at its high watermark as of the first
// read, so the pipeline completes. The controller lists the partitions when
// it lays out the pipeline and again every 10 seconds: a partition added to
// the topic gets its job, and is read from its start, within about 10
// seconds, without a restart. Every update_partition_count_period (default
// 1m) the first partition's reader also compares the topic's partition
// count with the last list and logs a change.
//
// # KafkaSink: exactly-once by default
//
// An ordered transactional-outbox sink (connector.OrderedAsyncSink):
// outputs are stored with the epoch and written after its commit, each with
// a sequence number (seqNo) of the sink's persisted producer. Each write is
// one Kafka transaction, with transactional id transactional_id_prefix +
// producer id (stable across restarts of the partition), that carries the
// records and a progress marker: an offset commit, inside the transaction,
// of the consumer group named like the transactional id, on partition 0 of
// the topic, with offset = the last seqNo written and metadata
// "weir:1:<producer>:<seqNo>". Records and marker commit atomically.
//
// Start-up (before the instance writes anything) initializes the
// transactional id, which fences every older instance of the partition (a
// zombie's next transactional request fails and its open transaction is
// aborted, so nothing of it becomes visible to read_committed) and reads
// the marker; messages at or below it were written by an earlier life and
// are acknowledged without writing. The sink state also holds a
// write-ahead bound, max_distributed_seq_no: no message is written before
// a committed epoch recorded a bound at or above its seqNo. So the state
// tells which seqNos may be in Kafka beyond max_persisted_seq_no; the
// marker is trusted if it lies between the two. If it is missing while
// messages may be committed (the group was deleted, or its offsets expired
// under offsets.retention.minutes), or does not match, the sink stops with
// an error (ErrMarkerLost) instead of writing possible duplicates;
// allow_missing_progress_marker = %true resumes, writing those again. On a
// fresh start (nothing uncertain) the sink commits an initial marker first.
// Changing transactional_id_prefix has the effect of losing the marker.
//
// A write that fails is retried (after rebuilding the client and
// re-reading the marker, which settles a commit whose answer was lost). An
// instance fenced by a newer one (PRODUCER_FENCED, INVALID_PRODUCER_EPOCH,
// INVALID_TXN_STATE, ...) never re-initializes the id itself: it stops
// (ErrFenced), its epoch fails, and the job restarts with a new instance.
//
// Consumers of the topic must read with isolation.level = read_committed:
// read_uncommitted also sees aborted transactions (for example a zombie's).
//
// delivery_guarantee = at_least_once: an idempotent producer without
// transactions; Kafka drops resends within an instance, but a restart
// writes again what the previous instance wrote and did not record.
//
// Records: key = key_column's value (strings and bytes as they are, other
// scalars as text; none if empty or null), hashed to a partition by
// franz-go's default partitioner (murmur2, as the Java client); value =
// payload_column's string or bytes (null: a tombstone) or, by default, the
// whole row as one JSON object; header message_id_header (default
// "weir-message-id", empty disables) = hex of the weir message id, stable
// across retries and restarts, for consumer-side deduplication. A message
// that cannot be encoded stops the sink with an error naming it.
//
// # AtLeastOnceKafkaSink
//
// A synchronous sink: Sync produces the epoch's records and waits until
// Kafka acknowledged all of them, before the epoch commits; a failure
// fails the epoch. Nothing is lost; if the epoch does not commit after a
// successful write, the records are written again on restart.
//
// # Connection settings and secrets
//
// Every class takes brokers, client_id, tls {enabled, ca_file, cert_file,
// key_file, insecure_skip_verify, server_name} and sasl {mechanism plain |
// scram-sha-256 | scram-sha-512, username | username_env, password |
// password_env}. Empty brokers fall back to WEIR_KAFKA_BROKERS (comma
// separated); a sasl block's empty username and password fall back to
// WEIR_KAFKA_USERNAME and WEIR_KAFKA_PASSWORD. Passwords are never logged
// and never appear in errors (a mistyped password value is reported
// without it); prefer password_env to a password in the spec.
//
// Parameters are decoded strictly (spec.DecodeParameters): an unknown key
// is an error naming its spec path. See SourceParams and SinkParams.
//
// # Tested on Apache Kafka
//
// Beside the fast tests on kfake, the same tests and the pipeline end to
// end run on real Apache Kafka 4.4.0 brokers in the long runs
// (realbroker_test.go, realbroker_engine_test.go, cmd/weir's
// TestRealBrokerKafkaExample; internal/kafkabroker starts the brokers). A
// coordinator that answers "not now" — COORDINATOR_NOT_AVAILABLE,
// NOT_COORDINATOR, COORDINATOR_LOAD_IN_PROGRESS, UNSTABLE_OFFSET_COMMIT,
// CONCURRENT_TRANSACTIONS, UNKNOWN_TOPIC_OR_PARTITION just after a broker
// restart — is retried within the write's or report's deadline.
//
// The group_id offsets are a lag report, committed after the pipeline's
// own commit: a report that fails is made again at the partition's next
// Read, and when the partition closes (retrying "not now" answers for up
// to 10 s). A finite partition read to its end while its group's
// coordinator cannot be reached — a dead broker whose coordinations have
// not yet moved (broker.session.timeout.ms) — closes with its group
// offset behind, and nothing reports it again; the pipeline's position is
// unaffected.
//
// One broker failure weir cannot pass through: a single broker that stops
// while a transaction ends — restarted after a SIGKILL, and also on a
// controlled stop (SIGTERM), when it gives up leading its partitions
// before the markers are sent — may skip the commit or abort markers of
// that transaction (its log says "Couldn't find leader endpoint for
// partitions … these partitions are likely deleted already and hence can
// be skipped"; seen on a single-node Kafka 4.4.0). The transaction then
// hangs on those partitions: their last stable offset stops (read_committed
// consumers see nothing after it), and if the marker group's partition is
// among them the sink's marker answers UNSTABLE_OFFSET_COMMIT (for longer
// than 2 s right after the initialization, which ended every transaction
// of the id, the sink reports ErrHangingTransaction naming the group
// instead of waiting out transaction_timeout). Worse, the
// producer's next transaction's commit marker on such a partition commits
// the hanging records too: an aborted transaction's outputs, which the
// sink writes again, would appear twice. So right after initializing its
// transactional id (at start-up, and before retrying a failed write) the
// sink asks the partitions' leaders for its own producer's open
// transactions (DescribeProducers): none may be open then, since the
// initialization ended them all. One that is hangs, and the sink refuses
// to write (ErrHangingTransaction, naming the partition, the offset and
// the producer epoch), retrying and logging, without writing, losing or
// repeating anything. The operator resolves it with Kafka's own tool:
// kafka-transactions.sh describe-producers, and abort --topic T --partition
// P --start-offset O for an aborted transaction (the coordinator's log
// says which: "txnState=EMPTY" or PREPARE_ABORT after the hanging epoch).
// A cluster of three brokers with replicated topics does not hit this:
// leadership moves and the markers are sent to the new leader.
package kafka
