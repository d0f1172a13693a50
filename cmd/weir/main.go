// Command weir runs exactly-once stream-processing pipelines on an embedded
// store. 'weir demo' shows it working; 'weir --help' lists the commands.
package main

import (
	"os"

	"github.com/weir-stream/weir/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], cli.Options{}))
}
