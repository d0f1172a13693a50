// Package cli is the weir command as a library: cmd/weir calls Main with
// the built-in classes, and a user's own binary calls it with a registry
// that also holds the user's computation classes:
//
//	func main() {
//		classes := engine.DefaultClasses()
//		classes.MustRegister("Enrich", weir.Transform(enrich))
//		os.Exit(cli.Main(os.Args[1:], cli.Options{Classes: classes}))
//	}
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"sort"

	"github.com/weir-stream/weir"
	"github.com/weir-stream/weir/connector"
	"github.com/weir-stream/weir/connector/kafka"
	"github.com/weir-stream/weir/engine"
)

// Options customize the command.
type Options struct {
	// Classes are the computation classes specs may name (default: the
	// built-in ones).
	Classes *weir.Registry
	// Connectors are the source and sink classes (default: all of weir's).
	Connectors *connector.Registry
	Stdin      io.Reader
	Stdout     io.Writer
	// Stderr receives the log lines and errors; the command escapes the
	// control characters in them (safeWriter).
	Stderr io.Writer

	// rawStderr is Stderr unescaped, for the text weir itself composes
	// whole (usage texts, the demo's redrawn progress line).
	rawStderr io.Writer

	// fatal receives the errors of connectors that stopped for good (a
	// Kafka sink whose progress marker is lost), when the default
	// connectors are used: 'weir run' then stops the pipeline.
	fatal chan error
}

func (o *Options) defaults() {
	if o.Classes == nil {
		o.Classes = engine.DefaultClasses()
	}
	if o.Connectors == nil {
		fatal := make(chan error, 1)
		o.fatal = fatal
		o.Connectors = engine.DefaultConnectorsWith(kafka.Options{Fatal: func(err error) {
			select {
			case fatal <- err:
			default: // one is enough to stop
			}
		}})
	}
	if o.Stdin == nil {
		o.Stdin = os.Stdin
	}
	if o.Stdout == nil {
		o.Stdout = os.Stdout
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
		// The embedded store's and libraries' logs go to the standard
		// logger: escaped like the command's own lines.
		log.SetOutput(safeWriter{os.Stderr})
	}
	if _, ok := o.Stderr.(safeWriter); !ok {
		o.rawStderr = o.Stderr
		o.Stderr = safeWriter{o.Stderr}
	}
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(o *Options, args []string) error
}

func commands() []command {
	return []command{
		{"demo", "run a self-checking exactly-once demo on generated events", runDemo},
		{"run", "run a pipeline spec on the embedded store", runRun},
		{"controller", "run a controller of the distributed mode (PostgreSQL store)", runController},
		{"worker", "run a worker of the distributed mode (PostgreSQL store)", runWorker},
		{"queue", "create, write, read and list queues", runQueue},
		{"table", "read and list external state tables", runTable},
		{"statictable", "skip an input table a StaticTableSource cannot read", runStaticTable},
		{"pipeline", "status, stop, pause, start or rescale a running pipeline", runPipeline},
		{"store", "check a store for damage; create a PostgreSQL store's schema", runStore},
		{"bench", "measure throughput and latency by processing mode", runBench},
		{"chaos", "run the fault-injection simulation and print its figures", runChaos},
		{"version", "print the version, its control protocol and store schema versions", func(o *Options, _ []string) error {
			printVersion(o.Stdout)
			return nil
		}},
	}
}

// errUsage marks an error already explained by a usage message.
var errUsage = errors.New("usage")

// Main runs the command with args (without the program name) and returns
// the process exit code: 0 success, 1 failure, 2 usage error, or a
// command's own code (weir run: 3 when a drain timed out).
func Main(args []string, o Options) int {
	o.defaults()
	tuneGC(os.Getenv)
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		usage(o.Stdout)
		if len(args) == 0 {
			return 2
		}
		return 0
	}
	for _, c := range commands() {
		if c.name == args[0] {
			err := c.run(&o, args[1:])
			switch {
			case err == nil:
				return 0
			case errors.Is(err, flag.ErrHelp):
				return 0
			case errors.Is(err, errUsage):
				return 2
			default:
				var xe *exitError
				if errors.As(err, &xe) {
					fmt.Fprintln(o.Stderr, "weir "+c.name+":", err)
					return xe.code
				}
				fmt.Fprintln(o.Stderr, "weir "+c.name+":", err)
				return 1
			}
		}
	}
	fmt.Fprintf(o.Stderr, "weir: unknown command %q\n\n", args[0])
	usage(o.rawStderr)
	return 2
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "weir — an exactly-once stream-processing engine")
	fmt.Fprintln(w, "\nUsage: weir <command> [flags]\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w, "\nRun 'weir <command> --help' for a command's flags.")
}

// newFlags returns a flag set that prints a usage text with an example:
// on stdout when asked for (--help), on stderr after a usage error.
func newFlags(o *Options, name, args, about string) *flag.FlagSet {
	fs := flag.NewFlagSet("weir "+name, flag.ContinueOnError)
	fs.SetOutput(&usageOutput{help: o.Stdout, err: o.rawStderr})
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: weir %s %s\n\n%s\n\nFlags:\n", name, args, about)
		fs.PrintDefaults()
	}
	return fs
}

// usageOutput is a flag set's output: stderr, or stdout once parse saw a
// request for help.
type usageOutput struct {
	help, err io.Writer
	helping   bool
}

func (u *usageOutput) Write(p []byte) (int, error) {
	if u.helping {
		return u.help.Write(p)
	}
	return u.err.Write(p)
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	switch arg {
	case "-h", "--h", "-help", "--help", "help":
		return true
	}
	return false
}

// topUsage prints the overview of command name: on stdout with exit 0
// when args ask for help, else on stderr as a usage error, after saying
// what was wrong (no subcommand, or an unknown one).
func topUsage(o *Options, name string, args []string, text string) error {
	if len(args) > 0 && isHelp(args[0]) {
		fmt.Fprintln(o.Stdout, text)
		return nil
	}
	if len(args) == 0 {
		fmt.Fprintf(o.Stderr, "weir %s: missing subcommand\n\n", name)
	} else {
		fmt.Fprintf(o.Stderr, "weir %s: unknown subcommand %s\n\n", name, echo(args[0]))
	}
	fmt.Fprintln(o.rawStderr, text)
	return errUsage
}

// parse parses flags that may appear before or after positional
// arguments, and returns the positional ones.
func parse(fs *flag.FlagSet, args []string) ([]string, error) {
	if u, ok := fs.Output().(*usageOutput); ok {
		for _, a := range args {
			if a == "--" {
				break
			}
			u.helping = u.helping || isHelp(a) && a != "help"
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// parseNoArgs parses a command's flags; a positional argument — a typo,
// or a flag's value detached from it — is a usage error, not ignored.
func parseNoArgs(fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr(fs, "unexpected argument %s (the command takes flags only)", echoArgs(pos))
	}
	return nil
}

// usageErr prints msg and the flag usage, and returns errUsage.
func usageErr(fs *flag.FlagSet, format string, a ...any) error {
	fmt.Fprintf(fs.Output(), "%s: %s\n\n", fs.Name(), fmt.Sprintf(format, a...))
	fs.Usage()
	return errUsage
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func plural(n int, one, many string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, one)
	}
	return fmt.Sprintf("%d %s", n, many)
}
