package statictable

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"time"

	"github.com/weir-stream/weir/msgid"
	"github.com/weir-stream/weir/store"
)

// manifest is the progress manifest of an output directory
// (_weir_manifest.json; Flow's @progress attribute of output_directory):
// the published tables and, per partition of the writing computation, the
// frontier of what its tables hold. It is the directory's commit record:
// a table exists for readers only once the manifest lists it, and the
// manifest is replaced in one atomic step (Dir.WriteManifest), so a table
// and the frontier that covers it become visible together or not at all.
type manifest struct {
	Version int `json:"version"`
	// Owner is the writing pipeline's owner id (see sinkOwner) and Sink the
	// spec path of the sink; a directory belongs to one sink of one
	// pipeline.
	Owner string `json:"owner"`
	Sink  string `json:"sink"`
	// NextTable numbers tables across partitions (the shared table
	// sequence): table names end in it.
	NextTable uint64          `json:"next_table"`
	Tables    []manifestTable `json:"tables"`
	// Frontiers: per partition, the last message its published tables
	// hold.
	Frontiers map[string]frontier `json:"frontiers"`
}

// manifestTable is one published table.
type manifestTable struct {
	Name      string    `json:"name"`
	Slot      time.Time `json:"slot"`
	Partition string    `json:"partition"`
	Rows      int64     `json:"rows"`
	Bytes     int64     `json:"bytes"`
	Created   time.Time `json:"created"`
	// Expires = max(slot, created) + table_ttl; the table is removed then.
	Expires time.Time `json:"expires"`
	// FirstID and LastID bound the message ids it holds (empty for an
	// empty slot's table).
	FirstID msgid.ID `json:"first_message_id,omitempty"`
	LastID  msgid.ID `json:"last_message_id,omitempty"`
}

// frontier is a partition's progress in the directory: every message of
// the partition with an id at or below MessageID is in a published table
// (Flow's per-partition frontier (system_timestamp, message_id)).
// LastSlot is the slot of its last published table, the start of the
// empty-slot rule's search.
type frontier struct {
	SystemTimestamp store.Timestamp `json:"system_timestamp"`
	MessageID       msgid.ID        `json:"message_id"`
	LastSlot        time.Time       `json:"last_slot"`
}

const manifestVersion = 1

func decodeManifest(path string, b []byte) (*manifest, error) {
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("progress manifest %s: %w", path, err)
	}
	if m.Version != manifestVersion {
		return nil, fmt.Errorf("progress manifest %s: version %d, this weir reads %d", path, m.Version, manifestVersion)
	}
	if m.Frontiers == nil {
		m.Frontiers = map[string]frontier{}
	}
	return &m, nil
}

func (m *manifest) encode() []byte {
	b, err := json.MarshalIndent(m, "", " ")
	if err != nil {
		panic(err) // plain data: cannot fail
	}
	return append(b, '\n')
}

// tableNameRE matches the names the sink gives tables; a matching file
// that the manifest does not list is an orphan of a crashed publish.
var tableNameRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z_\d{8,}\.(parquet|jsonl)$`)

// tableName is the name of table number seq of slot: its ISO 8601 slot
// start first, so that a StaticTableSource orders tables by slot.
func tableName(slot time.Time, seq uint64, f Format) string {
	return fmt.Sprintf("%s_%08d%s", slot.UTC().Format("2006-01-02T15:04:05Z"), seq, f.Ext())
}

// hasSlot reports whether a table of slot is listed.
func (m *manifest) hasSlot(slot time.Time) bool {
	for _, t := range m.Tables {
		if t.Slot.Equal(slot) {
			return true
		}
	}
	return false
}

// expire removes the tables expired at now and returns their names.
func (m *manifest) expire(now time.Time) []string {
	var gone []string
	kept := m.Tables[:0]
	for _, t := range m.Tables {
		if !now.Before(t.Expires) {
			gone = append(gone, t.Name)
			continue
		}
		kept = append(kept, t)
	}
	m.Tables = kept
	return gone
}

// nextExpiry is the earliest expiry of a listed table (zero if none).
func (m *manifest) nextExpiry() time.Time {
	var e time.Time
	for _, t := range m.Tables {
		if e.IsZero() || t.Expires.Before(e) {
			e = t.Expires
		}
	}
	return e
}

// listed returns the set of listed table names.
func (m *manifest) listed() map[string]bool {
	out := make(map[string]bool, len(m.Tables))
	for _, t := range m.Tables {
		out[t.Name] = true
	}
	return out
}

// readManifestFile reads the manifest of a local directory, for the
// source; ok is false if there is none.
func readManifestFile(dir string) (*manifest, bool, error) {
	p := filepath.Join(dir, manifestName)
	b, err := os.ReadFile(p)
	if os.IsNotExist(err) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("progress manifest %s: %w", p, err)
	}
	m, err := decodeManifest(p, b)
	if err != nil {
		return nil, false, err
	}
	return m, true, nil
}

// sortedTables returns the listed tables in name order.
func (m *manifest) sortedTables() []manifestTable {
	out := append([]manifestTable(nil), m.Tables...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
