// Package clickhouse holds the ClickHouse sinks (Flow's ClickHouse
// extension): ClickHouseBatchingSink, ShardedClickHouseBatchingSink,
// AtLeastOnceClickHouseSink and AtMostOnceClickHouseSink. Register adds
// them to a connector registry; the engine's DefaultConnectors does.
// docs/clickhouse.md is the user guide; this comment is the reference.
//
// # Protocol
//
// Every class speaks ClickHouse's HTTP interface with net/http: POST
// /?query=INSERT INTO `db`.`table` (`c1`, …) FORMAT TabSeparated, settings
// as URL parameters, the rows as the body, basic authentication. It works
// from 18.16 (Debian's server) to current servers; the native Go drivers
// fail on 18.16. The statement builder is shared: the tests run the same
// Request (query, settings, rows) through chDB as one SQL text
// (Request.InlineSQL).
//
// Rows: format = tab_separated (default) or json_each_row. Both encode a
// batch to the same bytes every time (column order from the table, values
// by the column's type), which a replay needs. TabSeparated is the default:
// it carries any bytes in String columns (JSON needs UTF-8 care) and is the
// smaller body; the measured rows/s of both are in docs/clickhouse.md.
// RowBinary is not offered: chDB takes SQL text, so the tests could not run
// the exact statements.
//
// Values: Int*/UInt* from integers (and integral floats, bools), range
// checked; Float* from numbers; String/FixedString(N) from strings or
// bytes; Date from "YYYY-MM-DD" or days; DateTime from "YYYY-MM-DD
// hh:mm:ss" or unix seconds; DateTime64, UUID, Enum*, IPv4/6 from strings;
// Decimal from numbers or numeric strings; Bool; Nullable(T) (null);
// LowCardinality(T); Array(T) from lists. Other column types (Map, Tuple,
// AggregateFunction, …) are rejected when the session starts. A row that
// does not fit (a column the table lacks, a missing value of a non-Nullable
// column, a wrong type, an out-of-range number) is a permanent error naming
// the message id and the column.
//
// # ClickHouseBatchingSink and ShardedClickHouseBatchingSink: exactly-once
//
// Transactional outbox with deterministic batches (see BatchingSink). In
// the epoch that produced them, the new outputs are cut, in message id
// order, into batches of at most max_batch_rows rows and max_batch_bytes
// (estimated) bytes; the plan — each batch's last message id and row count
// — is written to the sink's partition state in the same transaction as
// the outputs. Batches are INSERTed only after that commit, one at a time,
// with insert_deduplicate = 1 and insert_deduplication_token =
// deduplication_token_prefix + the batch's maximum message id (+
// ":<shard>" per shard of a sharded sink). A batch whose INSERT succeeded
// is recorded as acked by the next epoch, and only then are its messages
// acknowledged and erased from the outbox.
//
// A crash anywhere — before the INSERT, after it, before the epoch that
// records it — leaves the plan and the outbox in the committed state: the
// next life cuts the reloaded outputs by the persisted plan into the same
// batches, byte-identical, with the same tokens, and ClickHouse drops the
// ones it has. The token depends on the batch alone, so a batch replayed by
// another partition's sink (after repartitioning) with the same messages is
// dropped too. A zombie instance can only send batches of plans that were
// committed, which the next life sends identically.
//
// On a server without insert_deduplication_token (18.x) the sink relies
// on the block deduplication of Replicated tables, which drops a block
// whose data is identical (same rows, same split into blocks); it warns
// once. Two different batches with identical rows would then also be
// dropped: give rows something unique, such as message_id_column.
//
// The target must deduplicate blocks: Replicated*MergeTree (among them
// ReplicatedMergeTree, ReplicatedReplacingMergeTree,
// ReplicatedSummingMergeTree, ReplicatedAggregatingMergeTree),
// Shared*MergeTree, or a MergeTree with non_replicated_deduplication_window
// > 0 (servers from 21.x; by token). A single-host MergeTree without it is
// accepted with a warning: exactly-once degrades to at-least-once.
// Deduplication windows are finite: a replay later than the window (in
// blocks or seconds) is inserted again (see replay_horizon).
//
// ShardedClickHouseBatchingSink takes shard_hosts and routes each row by
// rendezvous hashing of (shard name, sharding_key_columns' values, or the
// message id when empty) to one shard; each shard's part of a batch is one
// INSERT with the batch token + ":<shard>". Its state records a topology
// fingerprint (shard names and sharding key) with the plan: an instance
// whose state holds undelivered batches planned for another topology
// refuses to start (Init fails, naming both) until the old topology
// delivers them.
//
// A batch the writer gives up on (a permanent error, or max_insert_attempts
// attempts of unclassified errors) stops the instance ("giving up insert
// into ClickHouse"): its Sync fails the epoch, the job restarts, and the
// new instance tries the same batch again. Until the cause is fixed the
// partition stops, visibly (Status.sink_failures); nothing is skipped.
//
// A server that cannot be reached (every host of the shard refused, reset
// or timed out in a row) is reported at once, while the writer retries:
// the sink's Failure returns the *connector.ReachError ("cannot reach
// http://host:port: …, retrying (attempt N)") until an INSERT gets an
// answer, so the job's status carries it and the controller stops the job,
// shows the error and restarts the partition with backoff — the same batch,
// the same token. The at-least-once sink, whose INSERT blocks Sync, fails
// the epoch with it after syncReachPatience (1 s) instead.
//
// # AtLeastOnceClickHouseSink
//
// A connector.SyncSink: the epoch's outputs are INSERTed during Sync, in
// batches of max_batch_rows, before the epoch commits, without the outbox
// and without a token (insert_deduplicate = 0, so that a legitimately
// repeated batch is not dropped by block deduplication). A failed write
// fails the epoch: nothing is lost; a write that succeeded in an epoch that
// then failed to commit is written again by the next life (duplicates).
//
// # AtMostOnceClickHouseSink
//
// One INSERT per message (aggregate upstream to avoid many small parts),
// insert_deduplicate = 0. Once an INSERT has started (its request was
// written to a connection), a failure is acknowledged and counted, never
// retried; a failure before that (connection refused, the writer session
// cannot start) is retried.
//
//   - at_most_once_strategy absent or enabled = %false (ordered mode): the
//     messages stay in the outbox and are sent in id order after the epoch
//     commit. The sink's state holds a write-ahead "started" bound: no
//     INSERT above the committed bound starts; the delivery goroutine asks
//     for it to cover the next 16 queued messages, and the next epoch
//     commits it. After a restart, reloaded messages at or below the bound
//     may have started in the earlier life and are dropped (counted as
//     uncertain_after_restart); later ones are sent. A crash therefore drops
//     at most 16 messages whose INSERT had not started.
//   - enabled = %true (queue mode): each message is acknowledged at once
//     and queued in memory after the commit while the queue stays within
//     total_queue_bytes_limit (dynamic); the rest is dropped with a warning.
//     A crash loses the queue; a clean stop does not: while messages are
//     queued the partition is neither quiet nor drained
//     (connector.Queueing), so a drain and the completion of a finite
//     pipeline wait until every queued INSERT was sent. Close (a job moved,
//     failed or stopped hard) waits up to suspend_destruction_duration and
//     reports what it abandons. Outputs reloaded from the outbox after a
//     restart are not handed to it again (connector.AtMostOnce).
//
// Loss is allowed on a crash or on a reported give-up, never silently:
// every message either mode drops is counted in
// weir_clickhouse_sink_dropped_total, logged (a WARNING with the count and
// reason, and a structured warning) and added to the computation's dropped
// outputs (weir run's summary "… N DROPPED by at-most-once sinks",
// 'weir pipeline status', weir_sink_dropped_total).
//
// # Writer session and validation
//
// Each instance starts its writer session lazily, on its first write, per
// host (a host of hosts is validated when failover first reaches it):
// version(), token support (system.settings), engine and engine_full
// (system.tables), columns (system.columns), the MergeTree deduplication
// settings with the table's own overrides (system.merge_tree_settings),
// and the replication identity (system.replicas.zookeeper_path; the uuid
// for Shared tables). Rejected, permanently: Distributed tables, engines
// outside the MergeTree family, and hosts of one target (or shard) that
// cannot be proven to hold the same logical table (a non-replicated table
// on several hosts, or different zookeeper paths). The INSERT's columns are
// the columns parameter or every plain column (no DEFAULT, MATERIALIZED or
// ALIAS expression), plus message_id_column.
//
// If a known deduplication window is shorter than the replay horizon the
// sink logs the structured warning DedupWindowWarning with the attributes
// Database, Table, DedupWindowSetting, ReplayHorizon and DedupWindow:
// seconds windows (replicated_deduplication_window_seconds) against
// replay_horizon, block-count windows (replicated_deduplication_window,
// non_replicated_deduplication_window) against replay_horizon_inserts when
// it is set.
//
// Dynamic reconfiguration (Reconfigure on an instance: weir does not yet
// deliver dynamic sink parameters from the spec) recreates the transports
// when write_timeout changes and re-runs the deduplication-window checks,
// but does not validate engine, schema or replication identity again:
// after changing the target table, pause and start the pipeline so that new
// instances validate it.
//
// # Retries and the classification of errors
//
// Each INSERT attempt is bounded by write_timeout. A failed attempt is
// classified: transient errors are retried without limit, unclassified
// ones until max_insert_attempts attempts in total, permanent ones fail at
// once. Between attempts the writer waits retry_initial_delay × 2^(n-1)
// (at most retry_maximum_delay, ±20% jitter) and moves to the next host of
// hosts. Transient: transport failures (refused, reset, EOF, timeouts: the
// outcome of a sent request is unknown, and an exactly-once retry sends
// the same bytes and token), HTTP 408, 429, 502, 503, 504 without a
// ClickHouse code, and these codes:
//
//	32 ATTEMPT_TO_READ_AFTER_EOF          252 TOO_MANY_PARTS
//	33 CANNOT_READ_ALL_DATA               279 ALL_CONNECTION_TRIES_FAILED
//	159 TIMEOUT_EXCEEDED                  285 TOO_FEW_LIVE_REPLICAS
//	202 TOO_MANY_SIMULTANEOUS_QUERIES     286 UNSATISFIED_QUORUM_FOR_PREVIOUS_WRITE
//	203 NO_FREE_CONNECTION                319 UNKNOWN_STATUS_OF_INSERT
//	209 SOCKET_TIMEOUT                    373 SESSION_IS_LOCKED
//	210 NETWORK_ERROR                     394 QUERY_WAS_CANCELLED
//	225 NO_ZOOKEEPER                      425 SYSTEM_ERROR
//	236 ABORTED                           439 CANNOT_SCHEDULE_TASK
//	241 MEMORY_LIMIT_EXCEEDED             999 KEEPER_EXCEPTION
//	242 TABLE_IS_READ_ONLY
//
// Permanent: rows the sink cannot encode, a rejected target, and
//
//	6 CANNOT_PARSE_TEXT                   72 CANNOT_PARSE_NUMBER
//	8 THERE_IS_NO_COLUMN                  81 UNKNOWN_DATABASE
//	10 NOT_FOUND_COLUMN_IN_BLOCK          115 UNKNOWN_SETTING
//	16 NO_SUCH_COLUMN_IN_TABLE            117 INCORRECT_DATA
//	20 NUMBER_OF_COLUMNS_DOESNT_MATCH     131 TOO_LARGE_STRING_SIZE
//	26 CANNOT_PARSE_QUOTED_STRING         164 READONLY
//	27 CANNOT_PARSE_INPUT_ASSERTION_FAILED 192 UNKNOWN_USER
//	38 CANNOT_PARSE_DATE                  193 WRONG_PASSWORD
//	41 CANNOT_PARSE_DATETIME              194 REQUIRED_PASSWORD
//	44 ILLEGAL_COLUMN                     349 CANNOT_INSERT_NULL_IN_ORDINARY_COLUMN
//	47 UNKNOWN_IDENTIFIER                 497 ACCESS_DENIED
//	53 TYPE_MISMATCH                      516 AUTHENTICATION_FAILED
//	60 UNKNOWN_TABLE
//	62 SYNTAX_ERROR
//	69 ARGUMENT_OUT_OF_BOUND
//	70 CANNOT_CONVERT_TYPE
//
// Everything else (other codes, other HTTP statuses) is unclassified.
// ErrorCodes returns the table; a chDB test checks its names against
// ClickHouse 26.7's system.errors.
//
// # Parameters
//
// Decoded strictly (spec.DecodeParameters): an unknown key is an error
// naming it. Durations take integer milliseconds or strings such as "5s".
// Each key is documented on its field of Params (docs/spec.md, "ClickHouse
// sink parameters", is generated from those comments). host or hosts: not
// the sharded class; shard_hosts (required there) and sharding_key_columns:
// the sharded class only. at_most_once_strategy: AtMostOnceClickHouseSink
// only (the others reject it when enabled): enabled (static),
// total_queue_bytes_limit (dynamic), suspend_destruction_duration.
//
// # Metrics
//
// Registered once on prometheus.DefaultRegisterer, labelled by sink id:
//
//   - weir_clickhouse_sink_inserts_total{sink}: INSERTs ClickHouse accepted.
//   - weir_clickhouse_sink_rows_total{sink}: their rows (a deduplicated
//     replay counts again).
//   - weir_clickhouse_sink_batches_total{sink}: exactly-once batches
//     written to every shard.
//   - weir_clickhouse_sink_insert_failures_total{sink, class, code}: failed
//     attempts by class and code (ClickHouse code, http_<status>,
//     transport).
//   - weir_clickhouse_sink_retries_total{sink, class}: attempts retried.
//   - weir_clickhouse_sink_dropped_total{sink, reason}: messages dropped
//     by the at-most-once sink (queue_full, insert_failed,
//     uncertain_after_restart, abandoned_at_close).
package clickhouse
