package engine

import (
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Collector exposes an engine's counters as Prometheus metrics:
// weir_inputs_total, weir_duplicates_total, weir_outputs_total,
// weir_epochs_total, weir_commits_total and weir_sink_dropped_total per
// computation, the
// controller's job and lease counters, the pipeline state, the partitions
// whose jobs keep failing (weir_job_consecutive_failures,
// weir_job_last_error), the sinks whose delivery stopped and the sources
// that cannot be listed (weir_source_listing_failures), rescales done
// (weir_rescales_total, weir_rescale_pause_seconds of the last) and under
// way (weir_rescale_in_progress).
func (e *Engine) Collector() prometheus.Collector { return (*collector)(e) }

type collector Engine

var (
	descInputs     = prometheus.NewDesc("weir_inputs_total", "Inputs processed (fresh, after dedup), per computation.", []string{"computation"}, nil)
	descDuplicates = prometheus.NewDesc("weir_duplicates_total", "Inputs found already processed and dropped by dedup.", []string{"computation"}, nil)
	descOutputs    = prometheus.NewDesc("weir_outputs_total", "Outputs emitted by committed epochs.", []string{"computation"}, nil)
	descEpochs     = prometheus.NewDesc("weir_epochs_total", "Epochs that did work.", []string{"computation"}, nil)
	descCommits    = prometheus.NewDesc("weir_commits_total", "Epoch commits.", []string{"computation"}, nil)
	descDeadLetter = prometheus.NewDesc("weir_dead_lettered_total", "Inputs whose processing failed and that went to the computation's dead-letter stream (dead_letter_stream), per computation.", []string{"computation"}, nil)
	descDropped    = prometheus.NewDesc("weir_sink_dropped_total", "Outputs at-most-once sinks gave up (queue full, a failed write, abandoned when the sink stopped), per computation.", []string{"computation"}, nil)
	descJobs       = prometheus.NewDesc("weir_jobs_total", "Jobs by event (started, adopted from an earlier controller, failed, lost).", []string{"event"}, nil)
	descLeases     = prometheus.NewDesc("weir_leases_total", "Leases by event (aborted, expired).", []string{"event"}, nil)
	descState      = prometheus.NewDesc("weir_pipeline_state", "1 for the pipeline's current state.", []string{"state"}, nil)
	descSinkFailed = prometheus.NewDesc("weir_sink_delivery_stopped", "1 for each (partition, sink) whose delivery stopped after its retries ran out (the partition's job is restarted with backoff).", []string{"partition", "sink"}, nil)
	descFailures   = prometheus.NewDesc("weir_job_consecutive_failures", "Consecutive job failures of a partition since its last healthy run (series only while > 0); the controller restarts it with exponential backoff.", []string{"partition"}, nil)
	descSourceFail = prometheus.NewDesc("weir_source_listing_failures", "Consecutive failed listings of a source computation's source partitions (series only while > 0); retried with backoff, and a source never listed cannot run or complete.", []string{"computation"}, nil)
	descRescales   = prometheus.NewDesc("weir_rescales_total", "Rescales of a computation's partition count done by this controller (controller.Rescale).", []string{"computation"}, nil)
	descPause      = prometheus.NewDesc("weir_rescale_pause_seconds", "How long the computation's last rescale took no input (from its quiesce to its new jobs' first reports).", []string{"computation"}, nil)
	descRescaling  = prometheus.NewDesc("weir_rescale_in_progress", "1 while a computation is being rescaled (quiesced or switching), labelled with its count and the target.", []string{"computation", "from", "to"}, nil)
	descLastError  = prometheus.NewDesc("weir_job_last_error", "1 for a failing partition, labelled with its last job error (truncated to 200 bytes).", []string{"partition", "error"}, nil)
)

// maxErrorLabel bounds the error text of weir_job_last_error.
const maxErrorLabel = 200

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descInputs, descDuplicates, descOutputs, descEpochs, descCommits, descDropped, descDeadLetter, descJobs, descLeases, descState, descSinkFailed, descFailures, descLastError, descSourceFail, descRescales, descPause, descRescaling} {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	e := (*Engine)(c)
	for comp, v := range e.board.Counters() {
		ch <- prometheus.MustNewConstMetric(descInputs, prometheus.CounterValue, float64(v.Inputs), comp)
		ch <- prometheus.MustNewConstMetric(descDuplicates, prometheus.CounterValue, float64(v.Duplicates), comp)
		ch <- prometheus.MustNewConstMetric(descOutputs, prometheus.CounterValue, float64(v.Outputs), comp)
		ch <- prometheus.MustNewConstMetric(descEpochs, prometheus.CounterValue, float64(v.Epochs), comp)
		ch <- prometheus.MustNewConstMetric(descCommits, prometheus.CounterValue, float64(v.Commits), comp)
		ch <- prometheus.MustNewConstMetric(descDropped, prometheus.CounterValue, float64(v.SinkDropped), comp)
		ch <- prometheus.MustNewConstMetric(descDeadLetter, prometheus.CounterValue, float64(v.DeadLettered), comp)
	}
	s := e.ctl.Stats()
	ch <- prometheus.MustNewConstMetric(descJobs, prometheus.CounterValue, float64(s.JobsStarted), "started")
	ch <- prometheus.MustNewConstMetric(descJobs, prometheus.CounterValue, float64(s.JobsAdopted), "adopted")
	ch <- prometheus.MustNewConstMetric(descJobs, prometheus.CounterValue, float64(s.JobsFailed), "failed")
	ch <- prometheus.MustNewConstMetric(descJobs, prometheus.CounterValue, float64(s.JobsLost), "lost")
	ch <- prometheus.MustNewConstMetric(descLeases, prometheus.CounterValue, float64(s.LeasesAborted), "aborted")
	ch <- prometheus.MustNewConstMetric(descLeases, prometheus.CounterValue, float64(s.LeasesExpired), "expired")
	ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, 1, string(e.ctl.State()))
	done, current := e.ctl.Rescales()
	count, last := map[string]int{}, map[string]float64{}
	for _, r := range done {
		count[r.Computation]++
		last[r.Computation] = r.Pause().Seconds()
	}
	for comp, n := range count {
		ch <- prometheus.MustNewConstMetric(descRescales, prometheus.CounterValue, float64(n), comp)
		ch <- prometheus.MustNewConstMetric(descPause, prometheus.GaugeValue, last[comp], comp)
	}
	if current != nil {
		ch <- prometheus.MustNewConstMetric(descRescaling, prometheus.GaugeValue, 1, current.Computation, strconv.Itoa(current.From), strconv.Itoa(current.To))
	}
	parts := e.ctl.Partitions()
	for _, f := range e.sinkFailures(parts) {
		ch <- prometheus.MustNewConstMetric(descSinkFailed, prometheus.GaugeValue, 1, f.Partition, f.Sink)
	}
	for _, f := range e.sourceErrors() {
		ch <- prometheus.MustNewConstMetric(descSourceFail, prometheus.GaugeValue, float64(f.ConsecutiveFailures), f.Computation)
	}
	for _, p := range parts {
		if p.ConsecutiveFailures == 0 {
			continue
		}
		msg := p.LastError
		if len(msg) > maxErrorLabel {
			msg = strings.ToValidUTF8(msg[:maxErrorLabel], "")
		}
		ch <- prometheus.MustNewConstMetric(descFailures, prometheus.GaugeValue, float64(p.ConsecutiveFailures), string(p.Partition))
		ch <- prometheus.MustNewConstMetric(descLastError, prometheus.GaugeValue, 1, string(p.Partition), msg)
	}
}
