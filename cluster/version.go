package cluster

import (
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ProtocolVersion is the version of the control plane this build speaks:
// the messages of protocol.go and what a worker does with them. A
// controller and a worker interoperate when their versions are at most one
// apart — one release apart, so that an operator upgrades one process at a
// time (docs/distributed.md, "Upgrade in place") — and refuse each other
// otherwise, with an error naming both versions.
//
// Version 1 is every build before versions were sent: they send none, and
// a missing version reads as 1. Version 2 adds the survey and Keep of a new
// leader's adoption (adopt.go); a version 1 worker answers a survey as a
// heartbeat (it stops the earlier term's jobs, and nothing is adopted from
// it) and a version 1 controller sends no Keep (a version 2 worker stops
// the earlier term's jobs at its first heartbeat): each side then behaves
// as version 1 did. Version 3 adds the layout a job routes by
// (StartRequest.Layout, RunningJob.Layout): a rescale changes it while the
// spec stays. A version 2 worker runs the spec's partition counts, so the
// controller starts a job on one only while its layout is the spec's, and
// adopts a job that reports no layout only then.
const ProtocolVersion = 3

// versionOf reads a version field: 0 (absent) is version 1.
func versionOf(v int) int { return max(v, 1) }

// compatible reports whether two protocol versions interoperate.
func compatible(a, b int) bool {
	d := versionOf(a) - versionOf(b)
	return d >= -1 && d <= 1
}

// errVersion is a worker's refusal of a controller whose protocol version
// is more than one apart from its own. Its code is not the deposed one
// (FailedPrecondition): a controller that hears it must not stand by.
func errVersion(worker string, controllerVersion int) error {
	return status.Errorf(codes.Unimplemented,
		"weir: worker %s speaks control protocol version %d, the controller %d: versions more than one apart do not interoperate (upgrade one release at a time)",
		worker, ProtocolVersion, versionOf(controllerVersion))
}

// incompatibleWorker describes a worker a controller will not use.
func incompatibleWorker(worker string, workerVersion int) string {
	return fmt.Sprintf("worker %s speaks control protocol version %d, this controller %d: versions more than one apart do not interoperate; it gets no job (upgrade one release at a time)",
		worker, versionOf(workerVersion), ProtocolVersion)
}
