package servicelog

import (
	"errors"
	"fmt"
	"time"

	"github.com/weir-stream/weir/spec"
)

// Params are ServiceLogSource's parameters.
type Params struct {
	// Table names the external state table to cycle over (required; a
	// table under the spec's external_states whose first key column is a
	// uint64).
	Table string `yson:"table,required"`
	// PartitionCount splits the table by its first key column into this
	// many equal ranges, one source partition each. Default 1.
	PartitionCount int `yson:"partition_count"`
	// Finite: each partition ends after one cycle, so the pipeline
	// completes (for tests). Otherwise the source cycles forever. The
	// position persists: a later run of the pipeline finds the cycle done
	// and completes at once.
	Finite bool `yson:"finite"`
	// MinCycleDuration: a partition starts a cycle no earlier than this
	// after it started the previous one (so a small table is not rescanned
	// in a tight loop). Default 1s; 0 starts the next cycle at once.
	MinCycleDuration spec.Duration `yson:"min_cycle_duration"`
	// CycleEndMarker: at the end of each cycle, each partition emits one
	// row {$cycle, $cycle_end: true, $rows, $partition}, so that the
	// reading computation knows the cycle is complete (a digest). Default
	// false.
	CycleEndMarker bool `yson:"cycle_end_marker"`
}

// DefaultMinCycleDuration is min_cycle_duration's default.
const DefaultMinCycleDuration = spec.Duration(time.Second)

// maxPartitions bounds partition_count.
const maxPartitions = 4096

// SetDefaults sets the defaults (spec.Defaulter).
func (p *Params) SetDefaults() {
	p.PartitionCount = 1
	p.MinCycleDuration = DefaultMinCycleDuration
}

// ParseParams decodes and checks the parameters; path is their location
// in the spec, and every error names the field.
func ParseParams(path string, raw map[string]any) (*Params, error) {
	var p Params
	if err := spec.DecodeParameters(path, raw, &p); err != nil {
		return nil, err
	}
	var errs []error
	if p.Table == "" {
		errs = append(errs, fmt.Errorf("%s.table: must name an external state table", path))
	}
	if p.PartitionCount < 1 || p.PartitionCount > maxPartitions {
		errs = append(errs, fmt.Errorf("%s.partition_count: must be between 1 and %d, got %d", path, maxPartitions, p.PartitionCount))
	}
	if p.MinCycleDuration < 0 {
		errs = append(errs, fmt.Errorf("%s.min_cycle_duration: must not be negative, got %s", path, p.MinCycleDuration))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return &p, nil
}
