package spec

import (
	"strings"
	"testing"
)

// TestNumbersAndEchoes: an integer with a leading zero in YAML (octal in
// YAML 1.1: 010 would be 8), an integer out of the 64-bit range in YSON
// and a YSON list separated by commas are refused naming the key or the
// fix; a 100 KB key or value is echoed cut, not whole.
func TestNumbersAndEchoes(t *testing.T) {
	long := strings.Repeat("x", 100000)
	for _, c := range []struct {
		name, file, doc, want string
	}{
		{"yaml leading zero", "s.yaml", "computations:\n  C:\n    partition_count: 010\n",
			"computations.C.partition_count: 010 at line 3 has a leading zero, which YAML reads as an octal number"},
		{"yaml negative leading zero", "s.yaml", "computations:\n  C:\n    group_by: [a, -07]\n",
			"computations.C.group_by[1]: -07 at line 3 has a leading zero"},
		{"yson out of range", "s.yson", `"computations" = {"C" = {"partition_count" = 99999999999999999999999}};`,
			"computations.C.partition_count: 99999999999999999999999 is out of range: a YSON integer is 64-bit"},
		{"yson commas", "s.yson", `"computations" = {"C" = {"group_by" = ["a", "b"]}};`,
			"YSON separates list items and map entries with ';', not ','"},
		{"long key", "s.yson", `"computations" = {"` + long + `" = {"computation_class_name" = "Counter"}};`,
			`computations["` + long[:maxEcho] + `…(100000 bytes)"]`},
		{"long value", "s.yson", `"computations" = {"C" = {"computation_class_name" = "` + long + `"}};`,
			long[:maxEcho] + "…(100000 bytes)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := Parse([]byte(c.doc), c.file)
			if err == nil {
				err = p.Validate(func(string) (Kind, bool) { return 0, false })
			}
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %.600v\nwant %q", err, c.want)
			}
			if len(err.Error()) > 2000 {
				t.Fatalf("a %d-byte error", len(err.Error()))
			}
		})
	}
	if _, err := Parse([]byte("computations:\n  C:\n    partition_count: 0\n    name: \"010\"\n"), "s.yaml"); err != nil && strings.Contains(err.Error(), "leading zero") {
		t.Fatalf("0 and a quoted \"010\" were refused: %v", err)
	}
}
