// Package externalstate holds weir's external state tables: Flow's
// External state (IExternalStateManager), mapped to user-declared tables in
// the pipeline's own store whose writes commit in the epoch transaction.
//
// # The mapping from YTsaurus
//
//	Flow (YTsaurus)                              weir
//	external state table (a sorted dynamic      a declared table (spec external_states: key columns,
//	table the manager owns)                      value columns or free-form rows), stored in the
//	                                             store table external_states, one key range per table
//	external_state_managers (writers)            the computation's external_state_managers
//	external_state_joiners (readers)             the computation's external_state_joiners
//	IExternalStateManager::Sync(transaction)     the job adds the epoch's buffered writes to the epoch
//	                                             transaction (job/extstate.go)
//	List(filter{LowerKey, UpperKey})             Scan over a key range (weir.ExternalState.Scan)
//
// # The guarantee: exactly-once
//
// A computation reads and writes a table through weir.ExternalState with
// the Context weir passed to it. Writes (Put, Delete) are buffered for the
// epoch; reads (Get, Scan) see the committed rows overlaid by the epoch's
// own buffered writes. The buffered writes go into the epoch transaction —
// the one that also records the inputs' dedup ids, the outbox, the state
// and the source position — which names the job's lease and is guarded by
// the partition's partition_transactions row. So a write is applied
// exactly when its epoch is: an epoch that crashes before its commit
// applied none of them and is redone from the same inputs; one that
// committed is never redone (its inputs are deduplicated, its source
// position moved); a zombie job's commit is refused by the store with all
// its writes. In at_least_once_consistent mode the writes stay atomic
// with the epoch, but an input re-sent after a restart is processed, and
// its writes applied, again.
//
// Concurrent writers. Several computations (and every partition of one)
// may write one table. A row the epoch read from the store and then
// writes is written on condition that it is unchanged (the commit checks
// its value, or its absence): a read-modify-write that raced another
// partition's commit fails the epoch with a conflict, and the job is
// restarted to redo it, so no update is lost. A write of a row the epoch
// did not read is blind: the later commit wins. Writers that keep to
// disjoint key ranges (each partition its own keys, each computation its
// own key prefix) never conflict. Range reads check no phantoms: a row
// added by another commit inside a range the epoch scanned is not noticed.
//
// Declaration. The spec declares each table (external_states: key
// columns, optional value columns) and, per computation, the tables it
// writes (external_state_managers) and only reads
// (external_state_joiners). A class may declare in code the tables it
// writes (weir.Computation.ExternalStateWrites): loading a spec whose
// computation does not list one of them under external_state_managers is
// an error. At run time a write to an unlisted table, a row whose key
// columns are missing or of the wrong type, or a value column outside
// value_columns fails the call with an error naming the table and column.
// Swift computations may not write (refused at load and at run time).
//
// Layout. Rows live in the store table external_states under
// "<table name> 0x00 <order-preserving key encoding>" (internal/codec's key
// encoding, so rows sort by their key columns in order); the value is the
// whole row (key columns included) in the canonical row encoding. The
// declarations are recorded in flow_state when the engine starts
// (Declare), so `weir table read` and the admin API can list them without
// the spec; a declaration whose key columns changed while the table holds
// rows is refused (the rows were keyed by the old columns).
package externalstate
