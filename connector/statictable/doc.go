// Package statictable holds Flow's Static Table connectors, mapped to files
// in a directory: StaticTableSource (exactly-once by read ranges) and
// ArrivalOrderTableSink (exactly-once: each table and its progress are
// published in one atomic step). Register adds them to a connector
// registry; the engine's DefaultConnectors does.
//
// # The mapping from YTsaurus
//
//	Flow (YTsaurus)                             weir
//	static table (Cypress node, immutable)      an immutable file in a directory: Parquet (.parquet)
//	                                            or JSON Lines (.jsonl, .ndjson), by extension
//	table timestamp locator (ISO 8601 names)    table_name_pattern: the ISO 8601 time in the file name
//	controller's table order                    the source's catalog in the pipeline's store, appended
//	                                            by Source.Partitions, which the controller calls
//	read ranges                                 offsets (table ordinal, row index), committed with the epoch
//	output_directory + @progress attribute      output_directory + _weir_manifest.json
//	master transaction (table + @progress)      temporary file, rename, then one atomic manifest replace
//	                                            under the directory's lock
//	expiration_time attribute                   expires in the manifest; the sink removes expired tables
//
// Directories are local paths. Both connectors reach files through small
// seams (the source through os calls in source.go, the sink through Dir)
// so that an object store can be added: it needs list, read, put of a
// finished object, and a conditional put of the manifest.
//
// # StaticTableSource: exactly-once by read ranges
//
// Parameters: directory (required), table_name_pattern, finite,
// partition_count, columns (see SourceParams).
//
// Tables. Every regular file of directory whose extension is a table
// format's and whose name does not start with '.' or '_' is a table if
// table_name_pattern finds an ISO 8601 time in its name; other files are
// logged once and ignored. Tables must appear whole: write them under a
// hidden name and rename. If the directory holds an ArrivalOrderTableSink
// progress manifest, only the tables it lists are tables, so a pipeline
// can read another's output exactly-once.
//
// Order. The controller calls Partitions when it lays out the pipeline and
// every re-list period (10 s) after. Partitions appends the tables that
// appeared to the catalog, a dense list in the pipeline's store: new tables
// get the next ordinals in the order of their timestamps (ties by name).
// An ordinal never changes. A table whose timestamp is earlier than an
// already cataloged one arrived late: it is read after the tables before
// it in the catalog (arrival order; logged). Catalog writes are
// conditional (CheckAbsent), so two writers cannot give an ordinal two
// meanings.
//
// Partitions and offsets. The source has partition_count partitions, keyed
// "<directory>#<i>"; partition i reads the tables whose ordinal is i mod
// partition_count, in ordinal order, so tables are spread over partitions
// and each partition reads its tables one after the other. A partition's
// offset is (ordinal, row): ordinal in the high 24 bits, row index in the
// low 40 (offset.go). Offsets are stable across runs because ordinals are;
// the runtime commits the position with the epoch, so the committed read
// range of each table advances only with the epoch commit, and a restart
// resumes at the committed row. partition_count is fixed once the catalog
// exists (changing it is an error naming it).
//
// Timestamps. Row r of a table gets WriteTimestamp (the message's
// SystemTimestamp) base + r, where base = max(the table's own timestamp,
// the end of the partition's previous table): strictly increasing within
// a partition, the same on every replay, and the table's name time as
// Flow's locator gives it.
//
// Identity. The catalog records each table's size and modification time
// when it is cataloged; the partition that first opens it adds the SHA-256
// of its contents, its row count and its base. Content decides: a table
// whose modification time changed but whose size and SHA-256 are the
// recorded ones (a touch, a copy of the same bytes) is the same table —
// the re-list records its new mtime, and a partition opening it reads on.
// Any other difference — in size, checksum or rows — is an error naming
// the table, never a silent re-read: the partition that still has rows
// to read in it stops at its committed position until the table is
// restored (a table read to the end may also be removed; a removed table
// that is not fully read is an error). The change never fails the
// listing (it is logged once and counted): new tables are cataloged and
// the other partitions read on, while order holds back only the changed
// table's partition. A table that changed before any partition opened
// it is simply cataloged anew. A truncated or corrupt
// Parquet file, a malformed JSON Lines line and an unreadable file
// (permissions) are errors naming the file (and the line); the partition's
// job fails and restarts at its committed position, so nothing is lost
// and fixing the file lets it continue.
//
// Skipping a table. When a table cannot be fixed — malformed, unreadable,
// refused (a nested column, a type weir cannot represent, see Parquet
// values), or changed after it was read — stop the pipeline and run
// 'weir statictable skip --data DIR FILE' (SkipTable): it marks the table
// skipped in the source's catalog in the pipeline's store, with one
// conditional write, so every later life agrees. The next run's partition
// reads none of the table's rows from its committed position on (they
// are never emitted; the rows before it were processed already), no
// longer checks the file's identity, and goes on with its next table. A
// skipped catalog entry is written in a newer encoding, which an older
// weir refuses rather than read the table.
//
// Schemas. With columns declared, every row of every table must fit them
// (only those columns, each value of its type by the rule the sink's
// columns follow); a row that does not stops its partition with an error
// naming the table, the row and the column, before the table's rows are
// processed — fix the table or skip it. Without them, a value a sink's
// columns cannot hold is found only by the sink, when the row is already
// an output in its computation's outbox, no longer tied to its input
// file: the sink's error names the message, the column and the output
// directory, and the way out is to change the sink's columns (skipping
// the input table does not remove the output).
//
// finite = %true ends each partition after the last cataloged table of
// the partition, so the pipeline completes; otherwise the partitions wait
// for new tables.
//
// What a later source over another segmented input can reuse: the
// position type (segment ordinal, row) and its packing into offsets, the
// conditional append-only catalog of segments, and the walk of a
// partition's segments in Read (sourcePartition), which only needs "open
// segment g at row r".
//
// # ArrivalOrderTableSink: exactly-once
//
// Parameters: output_directory and table_ttl (required), table_period,
// max_row_count, max_data_weight, format, columns, compression,
// close_delay (see SinkParams).
//
// The grid. Each partition of the writing computation writes its own
// tables, one after the other, in message id order (the order the engine
// hands outputs to a sink). A row belongs to the table_period slot that
// holds its SystemTimestamp. The open table closes when a row of a later
// slot arrives (the slot's time boundary: no earlier row can follow in id
// order), when it holds max_row_count rows or max_data_weight, or when the
// wall clock has passed the slot's end and no row arrived for close_delay.
// It is also published at once, whatever its slot, when no input will
// reach the computation again (a finite pipeline completes only once its
// outputs are in published tables), when the pipeline drains (a stop
// waits for the same) and when the computation's outbox is full (the
// computation takes no input until outputs leave it).
// A late row (of an earlier slot) goes into the open table: tables are
// written in arrival order. Tables are named
// "<slot start, ISO 8601>_<table number>.<ext>", numbered by a sequence
// shared by all partitions, so a StaticTableSource reads them in slot
// order. An empty slot T gets an empty table only as Flow creates one:
// when T ≤ wall clock and the input system watermark is beyond
// T + table_period — here, when a row of a later slot arrives after a gap
// (rows arrive in id order with non-decreasing system timestamps, so that
// row bounds the watermark) and no partition has a table for T; slots
// that expire at creation are skipped.
//
// The publish step (Flow: table + @progress in one master transaction).
// The manifest lists the published tables and, per partition, the
// frontier (system_timestamp, message_id) of the last message its tables
// hold. To publish, the sink writes the rows above the frontier to a
// temporary file and syncs it; takes the directory lock; checks the owner
// and that the partition's frontier is still the one it started from;
// renames the file to its table name; and replaces the manifest — listing
// the table, advancing the frontier, dropping expired tables — by
// writing a temporary manifest and renaming it over the old one. That
// rename is the one atomic step: a crash before it leaves only unlisted
// files (readers ignore them; the next Init removes them), a crash after
// it leaves the table and its progress. Readers must go by the manifest
// (StaticTableSource does).
//
// The spool. The open table's rows wait in the pipeline's store, not in
// memory: each epoch's Sync writes the rows added since the last one to
// the partition's spool (spool.go) in the epoch transaction, so they are
// durable, and fenced by the job's lease, exactly when the epoch commits;
// publishing reads them back, and the next Sync deletes the published
// ones. A message that joins the open table without closing it is added
// when the engine hands it over, so the Sync of the epoch that emitted it
// spools it. The rows of a table of max_row_count rows (1,000,000 by
// default) are therefore never all in memory, nor in the computation's
// outbox (see Delivery). The spool above the frontier holds the open
// table's rows and nothing else: a message that would close the open
// table (a later slot, a full table) is added only after its epoch
// committed, when the table it closes is published first.
//
// Replay. After a restart, the sink rebuilds the open table from the
// spool, and the engine re-hands the partition's unacknowledged outputs
// from the outbox in id order; those at or below the manifest's frontier,
// or in the spool, are not written again. If another instance of
// the partition (a replaced job's zombie) advanced the frontier meanwhile,
// the publish sees it under the lock, drops the rows the new frontier
// covers and writes only the uncovered tail, without restarting the job.
//
// Delivery. A message is acknowledged once it is durable on the sink's
// side: a message that joins the open table when it is handed over is
// acknowledged at once, like a sync sink's output — the acknowledgement
// counts only if the epoch that spools it commits, so the computation's
// outbox never writes it (the outbox's write and delete were about a
// quarter of the Parquet pipeline's CPU; docs/performance.md). A message that closes
// the open table, and every later one of its epoch, waits in the outbox:
// it is acknowledged after the next epoch spooled it and committed, or —
// added and published between two epochs — after its table was published
// and the next epoch committed. The open table's
// rows count as queued (connector.Queueing): a finite pipeline completes,
// and a drain ends, only once they are in a published table. The epoch
// after a publish records its frontier in the sink's partition state
// (version 2: a weir without the spool refuses it rather than lose the
// spooled rows). That record also guards
// the manifest: if the manifest is missing or its frontier is behind the
// recorded one (deleted, restored from a copy), the sink stops with
// ErrProgressLost rather than write duplicates or skip rows. A directory
// belongs to one sink of one pipeline (owner id in the manifest;
// ErrNotOwner otherwise).
//
// Expiry. table_ttl is required, with table_ttl / table_period ≤ 40000. A
// table expires at max(slot start, creation) + table_ttl; the sink drops
// expired tables from the manifest at each publish (and when one is due)
// and then deletes their files.
//
// Errors while publishing (a full disk, a lost manifest) fail the epoch:
// the job restarts from its committed state and publishes again.
//
// # Parquet values
//
// StaticTableSource reads flat Parquet tables: every top-level column a
// non-repeated primitive (what the sink writes). A column's values become
// weir values by its physical type and its annotation — the logical type,
// else the legacy converted type, else none. A null is nil (the column's
// key is present in the row).
//
//	physical                    annotation (logical; converted)             Go value
//	BOOLEAN                     none                                        bool
//	INT32                       none; INT(8|16|32, signed); INT_8|16|32     int64, sign-extended
//	INT32                       INT(8|16|32, unsigned); UINT_8|16|32        uint64, zero-extended
//	INT32                       DATE; DATE                                  int64: days since 1970-01-01
//	INT32                       TIME(MILLIS); TIME_MILLIS                   int64: milliseconds since midnight
//	INT64                       none; INT(64, signed); INT_64               int64
//	INT64                       INT(64, unsigned); UINT_64                  uint64
//	INT64                       TIME(MICROS|NANOS); TIME_MICROS             int64: units since midnight
//	INT64                       TIMESTAMP(MILLIS|MICROS|NANOS);             int64: units since 1970-01-01T00:00
//	                            TIMESTAMP_MILLIS|MICROS                     (UTC if isAdjustedToUTC), as stored
//	INT96                       none (the deprecated timestamp)             int64: nanoseconds since 1970 (UTC)
//	INT32, INT64, BYTE_ARRAY,   DECIMAL(p, s); DECIMAL                      string: the exact decimal, s digits
//	FIXED_LEN_BYTE_ARRAY                                                    after the point ("-12.30")
//	FLOAT                       none                                        float64 (exact; NaN, ±Inf, -0 kept)
//	DOUBLE                      none                                        float64
//	FIXED_LEN_BYTE_ARRAY(2)     FLOAT16                                     float64 (exact)
//	FIXED_LEN_BYTE_ARRAY(16)    UUID                                        string "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"
//	BYTE_ARRAY                  STRING, ENUM, JSON; UTF8, ENUM, JSON        string (JSON: its text)
//	BYTE_ARRAY                  none; BSON, GEOMETRY, GEOGRAPHY; BSON       []byte
//	FIXED_LEN_BYTE_ARRAY(n)     none; INTERVAL (n = 12)                     []byte
//	any                         NULL                                        nil
//
// Timestamps, times and dates keep their stored integer (weir rows have
// no time type); the unit is the column's. The mapping is tested against
// two foreign writers, with pyarrow reading the values back as the oracle
// (pyarrow_test.go): tables pyarrow writes of every row above but BSON,
// ENUM, INTERVAL, GEOMETRY and GEOGRAPHY, with every codec it offers,
// dictionary encoding on and off, data pages v1 and v2 and several row
// groups; tables DuckDB writes of every type it has (signed and unsigned
// integers of every width, BOOLEAN, FLOAT, DOUBLE, HUGEINT as DOUBLE,
// DECIMAL on INT32, INT64 and FIXED_LEN_BYTE_ARRAY(16), VARCHAR, BLOB,
// ENUM, JSON, UUID, DATE, TIME, TIMESTAMP in ms, µs and ns, TIMESTAMPTZ,
// INTERVAL), with every codec it offers and its format versions V1 and V2
// (the DELTA encodings); and tables parquet-go writes with converted types
// only or no annotation (INT32, INT64, INT96, FIXED_LEN_BYTE_ARRAY), with
// BSON, ENUM, INTERVAL and DECIMAL on BYTE_ARRAY. DuckDB always annotates
// its integers, so the annotation-less INT32 and INT64 come from pyarrow
// and parquet-go. GEOMETRY and GEOGRAPHY are untested.
//
// Two parquet-go (v0.32.0) decoding bugs found with DuckDB's tables are
// fixed in parquetgo.go, which replaces the
// entries in parquet-go's codec and encoding tables: its LZ4_RAW codec
// read a page that compresses less than 3:1 as stale bytes (every LZ4
// table DuckDB writes failed; another page's values could be read), and
// its DELTA_BINARY_PACKED decoder read INT32 deltas wider than 32 bits —
// which DuckDB's format V2 writes — wrongly (UINT_32 4294967295 read as
// 0). If the tables could not be patched (a parquet-go whose layout
// changed), such pages and columns are refused instead.
//
// Refused, with an error naming the table and the column (the partition
// stops at its committed position, as for a malformed table): a nested column (a
// struct, LIST, MAP, VARIANT, or a repeated field: flatten it or store it
// as JSON text); an annotation its physical type cannot carry (DATE on
// INT64, UUID on FIXED_LEN_BYTE_ARRAY(8), ...); a codec parquet-go cannot
// decode — it reads UNCOMPRESSED, SNAPPY, GZIP, BROTLI, ZSTD and LZ4_RAW
// (what pyarrow's "lz4" writes), not the deprecated Hadoop-framed LZ4
// (codec 5) nor LZO; and, when its row is read, an INT96 time before
// 1677-09-21 or after 2262-04-11, which int64 nanoseconds cannot hold.
//
// # Metrics
//
// See metricVecs: rows, tables and errors of the source; rows, replayed
// rows, tables, bytes, expired tables, frontier conflicts and publish time
// of the sink.
package statictable
