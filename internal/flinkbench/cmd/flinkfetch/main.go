// Command flinkfetch fetches Apache Flink's jars (Version of package
// flinkbench) with Maven into flinkbench.Jars.Dir, unless they are there
// already, and prints that directory. The Flink row of 'weir bench' runs
// from it. Run it from the repository's root:
//
//	go run ./internal/flinkbench/cmd/flinkfetch
package main

import "github.com/weir-stream/weir/internal/flinkbench"

func main() { flinkbench.Jars.FetchMain("flinkfetch") }
