package cli

import "testing"

// TestAppendSafe: control characters become Go escapes, a record's
// continuation lines are indented unless they already are, and printable
// text — non-ASCII included — and invalid bytes pass unchanged.
func TestAppendSafe(t *testing.T) {
	for in, want := range map[string]string{
		"plain text, ünïcödé 日本\n":            "plain text, ünïcödé 日本\n",
		"a\x1b[2Jb\n":                         `a\x1b[2Jb` + "\n",
		"over\rwrite\x00\x7f\n":               `over\rwrite\x00\x7f` + "\n",
		"c1 \u0085 \u009b bidi \u202e \u2066": `c1 \u0085 \u009b bidi \u202e \u2066`,
		"line\nweir: forged\n":                "line\n  weir: forged\n",
		"error:\n\n  indented\n\tlist\n":      "error:\n\n  indented\n\tlist\n",
		"tab\there":                           "tab\there",
		"split rune \xe6\x97":                 "split rune \xe6\x97",
	} {
		if got := string(appendSafe(nil, []byte(in))); got != want {
			t.Errorf("appendSafe(%q) = %q, want %q", in, got, want)
		}
	}
}
