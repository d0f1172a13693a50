// Command kafkafetch fetches the Apache Kafka broker's jars (Version of
// package kafkabroker) with Maven into kafkabroker.LibDir, unless they are
// there already, and prints that directory. The real-broker tests and
// 'weir bench --kafka-broker real' start brokers from it. Run it from the
// repository's root:
//
//	go run ./internal/kafkabroker/cmd/kafkafetch
package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"github.com/weir-stream/weir/internal/kafkabroker"
)

func main() {
	dir := kafkabroker.LibDir()
	if kafkabroker.Fetched() {
		fmt.Println(dir)
		return
	}
	pom := filepath.Join("internal", "kafkabroker", "pom.xml")
	if _, err := os.Stat(pom); err != nil {
		fmt.Fprintf(os.Stderr, "kafkafetch: %v (run it from the repository's root)\n", err)
		os.Exit(1)
	}
	cmd := exec.Command("mvn", "-q", "-B", "-f", pom, "dependency:copy-dependencies", "-DoutputDirectory="+dir)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "kafkafetch: mvn: %v\n", err)
		os.Exit(1)
	}
	if !kafkabroker.Fetched() {
		fmt.Fprintf(os.Stderr, "kafkafetch: mvn ran, but %s has no Kafka %s server jar\n", dir, kafkabroker.Version)
		os.Exit(1)
	}
	fmt.Println(dir)
}
