// Package engine runs a pipeline embedded in one process: it turns a spec
// into a runtime plan (resolving computation classes and connector classes),
// and wires the store, the in-process transport, the controller and its
// workers.
package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/externalstate"
	"github.com/weir-stream/weir/plan"
	"github.com/weir-stream/weir/spec"
	"github.com/weir-stream/weir/store"
)

// Resolver maps a class name to its spec kind, for spec validation.
func Resolver(classes *weir.Registry) func(string) (spec.Kind, bool) {
	return func(name string) (spec.Kind, bool) {
		c, ok := classes.Lookup(name)
		if !ok {
			return 0, false
		}
		if c.Kind == weir.KindSwiftMap {
			return spec.KindSwiftMap, true
		}
		return spec.KindTransform, true
	}
}

// BuildPlan validates p against the registered classes and connectors and
// builds the runtime plan. Every error names the spec path to fix.
func BuildPlan(ctx context.Context, p *spec.Pipeline, classes *weir.Registry, conns *connector.Registry, st store.Store) (*plan.Plan, error) {
	if err := p.Validate(Resolver(classes)); err != nil {
		return nil, err
	}
	pl := &plan.Plan{Computations: map[string]*plan.CompPlan{}}
	tables := externalstate.Tables(p)
	var errs []error
	names := make([]string, 0, len(p.Computations))
	for n := range p.Computations {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		c := p.Computations[name]
		path := "computations." + name
		code, _ := classes.Lookup(c.ComputationClassName)
		if code.Keyed && len(c.KeyColumns()) == 0 && len(c.SourceStreams) == 0 {
			errs = append(errs, fmt.Errorf("%s.group_by: class %q keeps per-key state and needs a key, but the computation has no group_by: "+
				"every message would share one key; set group_by to the key column(s), e.g. [\"key\"]", path, c.ComputationClassName))
			continue
		}
		cp := &plan.CompPlan{
			Name:             name,
			Code:             code,
			GroupBy:          c.KeyColumns(),
			Partitions:       c.PartitionCount,
			CompactDedup:     c.CompactDedup(),
			AllowBatching:    c.AllowBatchingWithRelaxedGuarantees,
			Inputs:           c.InputStreamIDs,
			Outputs:          c.OutputStreamIDs,
			DeadLetterStream: c.DeadLetterStream,
			Timers:           map[string]plan.TimerPlan{},
			Batch: plan.BatchPlan{
				MaxRows:      c.MaxRowsPerBatch,
				MaxBytes:     int(c.MaxBytesPerBatch),
				Duration:     c.BatchDuration.Std(),
				EmptyBackoff: c.EmptyBatchBackoff.Std(),
			},
			LeaseCheckPeriod:      c.LeaseCheckPeriod.Std(),
			OutputStoreCountLimit: int(c.OutputStoreCountLimit),
			OutputStoreBytesLimit: int(c.OutputStoreByteSizeLimit),
			StateCacheBytes:       int(c.StateCacheByteSizeLimit),
			TimerCountLimit:       int(c.TimerStoreCountLimit),
			TimerBytesLimit:       int(c.TimerStoreByteSizeLimit),
		}
		if len(c.ExternalStateManagers)+len(c.ExternalStateJoiners) > 0 {
			cp.ExternalStates = map[string]plan.ExternalAccess{}
			for _, t := range c.ExternalStateJoiners {
				cp.ExternalStates[t] = plan.ExternalAccess{Table: externalstate.FromSpec(t, p.ExternalStates[t])}
			}
			for _, t := range c.ExternalStateManagers {
				cp.ExternalStates[t] = plan.ExternalAccess{Table: externalstate.FromSpec(t, p.ExternalStates[t]), Write: true}
			}
		}
		var undeclared []string
		for _, t := range code.ExternalStateWrites {
			if !cp.ExternalStates[t].Write {
				undeclared = append(undeclared, t)
			}
		}
		if len(undeclared) > 0 {
			errs = append(errs, fmt.Errorf("%s.external_state_managers: class %q writes external state table(s) %v, which the computation does not list; "+
				"add them to external_state_managers (and declare them under external_states)", path, c.ComputationClassName, undeclared))
			continue
		}
		if cp.LeaseCheckPeriod == 0 {
			cp.LeaseCheckPeriod = p.Dynamic.LeaseCheckPeriod.Std()
		}
		if c.ProcessingMode == spec.AtLeastOnceConsistent {
			cp.Mode = plan.AtLeastOnceConsistent
		}
		for id, ts := range c.TimerStreams {
			cp.Timers[id] = plan.TimerPlan{SystemTime: ts.TimeType == spec.SystemTime}
		}
		if ws := c.WatermarkStrategy; ws != nil {
			cp.Watermark = plan.WatermarkPlan{
				OutOfOrdernessBound: ws.OutOfOrdernessBound.Std(),
				IdleTimeout:         ws.IdlePartitionTimeout.Std(),
				EventColumn:         ws.EventTimestampColumn,
			}
		}
		for id, src := range c.SourceStreams {
			f, ok := conns.Source(src.SourceClassName)
			if !ok {
				errs = append(errs, fmt.Errorf("%s.source_streams.%s.source_class_name: unknown source class %q (known: %v)", path, id, src.SourceClassName, conns.SourceClasses()))
				continue
			}
			s, err := f(connector.SourceParams{SourceID: id, Path: path + ".source_streams." + id, Parameters: src.Parameters, Store: st, ExternalStates: tables})
			if err != nil {
				errs = append(errs, err)
				continue
			}
			cp.Source, cp.SourceStream = s, id
		}
		sinkIDs := make([]string, 0, len(c.Sinks))
		for id := range c.Sinks {
			sinkIDs = append(sinkIDs, id)
		}
		sort.Strings(sinkIDs)
		for _, id := range sinkIDs {
			sk := c.Sinks[id]
			sp := path + ".sinks." + id
			f, ok := conns.Sink(sk.SinkClassName)
			if !ok {
				errs = append(errs, fmt.Errorf("%s.sink_class_name: unknown sink class %q (known: %v)", sp, sk.SinkClassName, conns.SinkClasses()))
				continue
			}
			if len(sk.InputStreamIDs) != 1 {
				errs = append(errs, fmt.Errorf("%s.input_stream_ids: a sink reads exactly one stream, got %d", sp, len(sk.InputStreamIDs)))
				continue
			}
			params := connector.SinkParams{SinkID: id, Path: sp, Parameters: sk.Parameters, Store: st}
			if a := sk.AtMostOnceStrategy; a != nil {
				params.AtMostOnce = &connector.AtMostOnceStrategy{
					Enabled: a.Enabled, TotalQueueBytesLimit: a.TotalQueueBytesLimit,
					SuspendDestructionDuration: a.SuspendDestructionDuration.Std(),
				}
			}
			// Build one instance now so that bad parameters fail at start,
			// not in the first job.
			probe, err := f(params)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			_ = probe.Close()
			cp.Sinks = append(cp.Sinks, plan.SinkPlan{ID: id, InputStream: sk.InputStreamIDs[0],
				New: func() (connector.Sink, error) { return f(params) }})
		}
		pl.Computations[name] = cp
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if err := pl.Validate(); err != nil {
		return nil, err
	}
	return pl, nil
}
