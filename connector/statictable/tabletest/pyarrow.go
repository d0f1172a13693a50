package tabletest

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/weir-stream/weir/internal/testproc"
)

// The pyarrow tests run real Parquet writers and a reader nobody on this
// project wrote: pyarrow and DuckDB, pinned in PyarrowRequirements, installed in a
// Python venv outside the repository (WEIR_PYTHON_VENV, default
// DefaultPythonVenv) by .ci/run. Their Python scripts live in
// PyarrowScripts.

// DefaultPythonVenv is the venv the pyarrow tests use when
// WEIR_PYTHON_VENV is not set.
const DefaultPythonVenv = "/opt/weir-venv"

// PyarrowScripts is the directory of the pyarrow tests' Python scripts
// (connector/statictable/testdata/pyarrow), found from this file's path.
var PyarrowScripts = func() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "testdata", "pyarrow")
}()

// PyarrowRequirements is the pip requirements file that pins pyarrow and
// duckdb.
var PyarrowRequirements = filepath.Join(PyarrowScripts, "requirements.txt")

// PythonVenv is the venv of the pyarrow tests: $WEIR_PYTHON_VENV, or
// DefaultPythonVenv.
func PythonVenv() string {
	if v := os.Getenv("WEIR_PYTHON_VENV"); v != "" {
		return v
	}
	return DefaultPythonVenv
}

// venvCheck is the outcome of checking that the venv's Python imports a
// pinned module.
type venvCheck struct {
	once    sync.Once
	python  string
	missing string // why the module cannot be used, or ""
}

var venvChecks sync.Map // module name → *venvCheck

// Pyarrow returns the venv's Python interpreter once it has checked that
// it imports pyarrow of the pinned version. When it does not,
// Pyarrow reports it with testproc.Missing (a skip; a failure under
// CI=true) and a message giving the command that installs it.
func Pyarrow(t testing.TB) string {
	t.Helper()
	return venvModule(t, "pyarrow")
}

// DuckDB is Pyarrow for the duckdb module (and pyarrow, which its scripts
// read back with): the second foreign Parquet writer of the tests.
func DuckDB(t testing.TB) string {
	t.Helper()
	Pyarrow(t)
	return venvModule(t, "duckdb")
}

// venvModule returns the venv's Python interpreter once it has checked
// that it imports module at the version PyarrowRequirements pins
// ("module==VERSION"); otherwise it reports testproc.Missing.
func venvModule(t testing.TB, module string) string {
	t.Helper()
	v, _ := venvChecks.LoadOrStore(module, &venvCheck{})
	c := v.(*venvCheck)
	c.once.Do(func() {
		venv := PythonVenv()
		c.python = filepath.Join(venv, "bin", "python")
		want, err := pinned(module)
		if err != nil {
			c.missing = err.Error()
			return
		}
		install := fmt.Sprintf("python3 -m venv %s && %s/bin/pip install -r %s (it pins %s==%s), or set WEIR_PYTHON_VENV to a venv that has it",
			venv, venv, PyarrowRequirements, module, want)
		out, err := exec.Command(c.python, "-c", "import "+module+"; print("+module+".__version__)").CombinedOutput()
		if err != nil {
			why := err.Error()
			if l := lastLine(out); l != "" {
				why += ": " + l
			}
			c.missing = fmt.Sprintf("%s is not importable by %s (%s); install it: %s", module, c.python, why, install)
			return
		}
		if got := strings.TrimSpace(string(out)); got != want {
			c.missing = fmt.Sprintf("%s has %s %s, the tests pin %s; install it: %s", c.python, module, got, want, install)
		}
	})
	if c.missing != "" {
		testproc.Missing(t, c.missing)
	}
	return c.python
}

// pinned is the version requirements.txt pins for module ("module==V").
func pinned(module string) (string, error) {
	b, err := os.ReadFile(PyarrowRequirements)
	if err != nil {
		return "", fmt.Errorf("the %s pin: %w", module, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), module+"=="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s pins no %s==VERSION", PyarrowRequirements, module)
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// RunPyarrowScript runs the script name of PyarrowScripts with args under
// the venv's Python (from Pyarrow) and returns its standard output; a
// failure fails t with the script's standard error. Python writes no
// bytecode into the repository.
func RunPyarrowScript(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	return runScript(t, Pyarrow(t), name, args...)
}

// RunDuckDBScript is RunPyarrowScript for a script that also imports
// duckdb.
func RunDuckDBScript(t testing.TB, name string, args ...string) []byte {
	t.Helper()
	return runScript(t, DuckDB(t), name, args...)
}

func runScript(t testing.TB, python, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(python, append([]string{"-B", filepath.Join(PyarrowScripts, name)}, args...)...)
	cmd.Env = append(os.Environ(), "PYTHONDONTWRITEBYTECODE=1", "PYTHONHASHSEED=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// PyColumn is a column as pyarrow sees it in a file (weirmap.describe).
type PyColumn struct {
	Name      string `json:"name"`
	Physical  string `json:"physical"`
	Length    int    `json:"length"`
	Logical   string `json:"logical"`
	Converted string `json:"converted"`
}

// Annotation is the column's annotation as pyarrow reports it: its logical
// type, else its converted type, else "none".
func (c PyColumn) Annotation() string {
	switch {
	case c.Logical != "":
		return c.Logical
	case c.Converted != "":
		return c.Converted
	}
	return "none"
}

// PyTable is a table as the scripts print it: its file (or manifest name),
// the schema pyarrow sees and its rows, each value in the scripts'
// encoding of weir values (decode them with PyValue).
type PyTable struct {
	File         string                       `json:"file"`
	Name         string                       `json:"name"`
	ManifestRows int64                        `json:"manifest_rows"`
	Options      map[string]any               `json:"options"`
	RowGroups    int                          `json:"row_groups"`
	Columns      []PyColumn                   `json:"columns"`
	Rows         []map[string]json.RawMessage `json:"rows"`
}

// PyValue decodes a value of the scripts' encoding of weir values
// (weirmap.py): null, or [type, value] with type bool, int64, uint64,
// float64 (text as Python's repr, or nan, inf, -inf), string or bytes
// (hex).
func PyValue(raw json.RawMessage) (any, error) {
	var pair []json.RawMessage
	if err := json.Unmarshal(raw, &pair); err != nil {
		return nil, fmt.Errorf("value %s: %w", raw, err)
	}
	if pair == nil {
		return nil, nil
	}
	var kind string
	if len(pair) != 2 || json.Unmarshal(pair[0], &kind) != nil {
		return nil, fmt.Errorf("value %s is not [type, value]", raw)
	}
	if kind == "bool" {
		var b bool
		err := json.Unmarshal(pair[1], &b)
		return b, err
	}
	var s string
	if err := json.Unmarshal(pair[1], &s); err != nil {
		return nil, fmt.Errorf("value %s: %w", raw, err)
	}
	switch kind {
	case "int64":
		return strconv.ParseInt(s, 10, 64)
	case "uint64":
		return strconv.ParseUint(s, 10, 64)
	case "float64":
		return strconv.ParseFloat(s, 64) // nan, inf and -inf included
	case "string":
		return s, nil
	case "bytes":
		return hex.DecodeString(s)
	}
	return nil, fmt.Errorf("value %s: unknown type %q", raw, kind)
}

// SameValue reports whether weir values a and b are the same: the same Go
// type and value, floats bit for bit (so NaN is NaN and -0 is not 0).
func SameValue(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && (math.Float64bits(x) == math.Float64bits(y) || math.IsNaN(x) && math.IsNaN(y))
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case nil, bool, int64, uint64, string:
		return a == b
	}
	return false
}

// CheckRow compares a row weir produced with a row of a script's output:
// the same columns, each value the same (SameValue). It returns the
// differences, or nil.
func CheckRow(got map[string]any, want map[string]json.RawMessage) []string {
	var diffs []string
	for col, raw := range want {
		w, err := PyValue(raw)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("column %q: %v", col, err))
			continue
		}
		g, ok := got[col]
		if !ok {
			diffs = append(diffs, fmt.Sprintf("column %q is missing, want %T(%#v)", col, w, w))
		} else if !SameValue(g, w) {
			diffs = append(diffs, fmt.Sprintf("column %q = %T(%#v), want %T(%#v)", col, g, g, w, w))
		}
	}
	for col, g := range got {
		if _, ok := want[col]; !ok {
			diffs = append(diffs, fmt.Sprintf("extra column %q = %T(%#v)", col, g, g))
		}
	}
	sort.Strings(diffs)
	return diffs
}
