package statictable

import (
	"fmt"
	"strings"
	"time"
)

// iso8601Layouts are the forms a table timestamp may take (Flow's table
// timestamp locator reads ISO 8601 names). A time without a zone is UTC.
var iso8601Layouts = []string{
	time.RFC3339Nano,
	"2006-01-02T15:04:05.999999999Z0700",
	"2006-01-02T15:04:05.999999999",
	"2006-01-02T15:04Z07:00",
	"2006-01-02T15:04Z0700",
	"2006-01-02T15:04",
	"2006-01-02",
}

// parseISO8601 parses s in one of iso8601Layouts.
func parseISO8601(s string) (time.Time, error) {
	for _, l := range iso8601Layouts {
		if t, err := time.Parse(l, s); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("%q is not an ISO 8601 time", s)
}

// tableTime locates the timestamp of the table named name: ok is false if
// name does not match the pattern (the file is not a table); an error
// means it matched but the match is not a time.
func (p *SourceParams) tableTime(name string) (t time.Time, ok bool, err error) {
	m := p.pattern.FindStringSubmatch(name)
	if m == nil || m[p.tsGroup] == "" {
		return time.Time{}, false, nil
	}
	t, err = parseISO8601(m[p.tsGroup])
	if err != nil {
		return time.Time{}, true, fmt.Errorf("table %s: table_name_pattern matched %w", name, err)
	}
	if t.Unix() < 1 {
		return time.Time{}, true, fmt.Errorf("table %s: timestamp %s is before 1970", name, t.Format(time.RFC3339))
	}
	return t, true, nil
}

// hiddenName reports whether a directory entry is never a table: names
// starting with '.' or '_' (temporary files, the sink's manifest and lock).
func hiddenName(name string) bool {
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}
