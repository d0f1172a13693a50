// Package servicelog holds Flow's Service log source (TServiceLogSource),
// mapped to a cyclic ordered scan over an external state table of the
// pipeline's store: ServiceLogSource, exactly-once within each cycle.
// Register adds it to a connector registry; the engine's
// DefaultConnectors does.
//
// # The mapping from YTsaurus
//
//	Flow (YTsaurus)                             weir
//	sorted dynamic table cycled by the source   an external state table (spec external_states), often
//	                                            written by the pipeline itself (external_state_managers)
//	first key column: uint64, uniform           the table's first key column must be declared uint64
//	                                            (checked at spec load); the source partitions by it
//	read ranges                                 the cursor (cycle, last key read, rows this cycle),
//	                                            committed with the epoch as the partition's position
//	finite (tests)                              finite: each partition ends after one cycle
//
// # The guarantee: exactly-once within each cycle
//
// Parameters: table (required), partition_count, finite,
// min_cycle_duration, cycle_end_marker (see Params).
//
// Partitions. Partition i of partition_count owns the rows whose first key
// column lies in the i-th of partition_count equal ranges of the uint64
// space (keys "<table>#<i>/<n>"); with the first column a uniformly
// distributed hash, as Flow requires, the partitions get equal shares.
//
// Cycles. Each partition scans its rows in key order, a batch
// (max_rows_per_batch) per epoch, from its range's start to its end: one
// cycle. It then starts the next cycle from the start again, no earlier
// than min_cycle_duration after the previous cycle started. Each emitted
// row is the table's row (key columns included) plus the column $cycle
// (the cycle number, from 0); with cycle_end_marker, the partition emits at
// the end of each cycle one more row {$cycle, $cycle_end: true, $rows:
// rows emitted in the cycle, $partition: the partition key}.
//
// Exactly-once per cycle. The partition's position is its cursor: the
// cycle, the key of the last row emitted and the rows emitted so far. The
// job (a Transform only: TransformOnly) commits the cursor in the epoch
// transaction that processes the batch (connector.CursorPartition), so a
// crash before the commit rescans from the committed cursor and one after
// it never rescans: within a cycle each key is emitted at most once, and
// every key present for the whole cycle exactly once. A message offset is
// cycle<<32 | row index in the cycle.
//
// What a cycle sees. Reads are read-committed, batch by batch, so a cycle
// is not a snapshot of the table:
//
//   - a row present from the cycle's start to its end is emitted exactly
//     once, with its value as of the batch that read it;
//   - a row added during the cycle is emitted in that cycle if its key is
//     beyond the cursor when it is committed, else first in the next cycle;
//   - a row deleted during the cycle is emitted in that cycle if the scan
//     passed it before the deletion, else not;
//   - a row updated after the scan passed it shows its new value in the
//     next cycle; a row is never emitted twice in one cycle, whatever its
//     updates.
//
// A replay after a crash rescans the uncommitted part of the cycle as it
// is then, under the same rules.
//
// # Metrics
//
//	weir_service_log_rows_total{source,partition}     rows emitted (cycle-end markers not counted):
//	                                                  a partition far above the others has a skewed
//	                                                  share of the first key column
//	weir_service_log_cycles_total{source,partition}   cycles completed
package servicelog
