package codec

// These tests prove the JSON bridge: numbers map to int64, uint64 or float64
// by their literal; anything but one JSON object is an error; output has
// sorted names, writes strings, floats and []byte exactly as encoding/json
// does (except integral floats, which keep a ".0" so they read back as
// floats); and rows of JSON-representable values survive a round trip.

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"
)

func TestRowFromJSON(t *testing.T) {
	tests := []struct {
		in   string
		want map[string]any
	}{
		{`{}`, map[string]any{}},
		{"  {\"a\":1}\n", map[string]any{"a": int64(1)}},
		{`{"n":null,"t":true,"f":false,"s":"x\u00e9\n"}`, map[string]any{"n": nil, "t": true, "f": false, "s": "xé\n"}},
		{`{"i":-9223372036854775808,"j":9223372036854775807,"z":-0}`, map[string]any{"i": int64(math.MinInt64), "j": int64(math.MaxInt64), "z": int64(0)}},
		{`{"u":9223372036854775808,"m":18446744073709551615}`, map[string]any{"u": uint64(1 << 63), "m": uint64(math.MaxUint64)}},
		{`{"big":18446744073709551616.0,"neg":-9223372036854775809e0}`, map[string]any{"big": 18446744073709551616.0, "neg": -9223372036854775809.0}},
		{`{"p53":9007199254740993,"s":"\ud83d\ude00 \u00e9"}`, map[string]any{"p53": int64(1<<53 + 1), "s": "\U0001F600 é"}},
		{`{"f":1.0,"e":1e3,"E":2E-2,"x":-0.5}`, map[string]any{"f": 1.0, "e": 1000.0, "E": 0.02, "x": -0.5}},
		{`{"l":[1,"a",[2.5],{"k":3}],"m":{"n":{"o":18446744073709551615}}}`, map[string]any{
			"l": []any{int64(1), "a", []any{2.5}, map[string]any{"k": int64(3)}},
			"m": map[string]any{"n": map[string]any{"o": uint64(math.MaxUint64)}},
		}},
	}
	for _, tt := range tests {
		got, err := RowFromJSON([]byte(tt.in))
		if err != nil {
			t.Errorf("RowFromJSON(%s): %v", tt.in, err)
			continue
		}
		if !equalValue(tt.want, got) {
			t.Errorf("RowFromJSON(%s)\n got %#v\nwant %#v", tt.in, got, tt.want)
		}
	}
}

func TestRowFromJSONErrors(t *testing.T) {
	deep := `{"d":` + strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1) + `}`
	tests := []struct {
		in string
		is error
	}{
		{``, ErrCorrupt},
		{`   `, ErrCorrupt},
		{`null`, ErrCorrupt},
		{`[]`, ErrCorrupt},
		{`"s"`, ErrCorrupt},
		{`1`, ErrCorrupt},
		{`{"a":1`, ErrCorrupt},
		{`{"a":1}{"b":2}`, ErrCorrupt},
		{`{"a":1} x`, ErrCorrupt},
		{`{"a":1}]`, ErrCorrupt},
		{`{a:1}`, ErrCorrupt},
		{`{"a":1e400}`, ErrCorrupt},
		{deep, ErrTooDeep},
		{`{"d":1,"d":2}`, ErrCorrupt},
		{`{"m":{"d":1,"d":2}}`, ErrCorrupt},
		{`{"big":18446744073709551616}`, ErrCorrupt},
		{`{"neg":-9223372036854775809}`, ErrCorrupt},
		{"{\"s\":\"a\xffb\"}", ErrCorrupt},
		{"{\"s\xc3\":1}", ErrCorrupt},
		{`{"s":"\ud800"}`, ErrCorrupt},
		{`{"s":"\udc00\ud800"}`, ErrCorrupt},
		{`{"s":"\ud800\u0041"}`, ErrCorrupt},
	}
	for _, tt := range tests {
		got, err := RowFromJSON([]byte(tt.in))
		if !errors.Is(err, tt.is) || got != nil {
			t.Errorf("RowFromJSON(%q) = %#v, %v; want error %v", tt.in, got, err, tt.is)
		}
	}
	ok := `{"d":` + strings.Repeat("[", MaxDepth) + strings.Repeat("]", MaxDepth) + `}`
	if _, err := RowFromJSON([]byte(ok)); err != nil {
		t.Errorf("MaxDepth nesting: %v", err)
	}
}

func TestAppendRowJSON(t *testing.T) {
	tests := []struct {
		row  map[string]any
		want string
	}{
		{nil, `{}`},
		{map[string]any{"b": int64(-2), "a": uint64(math.MaxUint64), "c": nil, "d": true}, `{"a":18446744073709551615,"b":-2,"c":null,"d":true}`},
		{map[string]any{"i": int(1), "j": int32(-1), "u": uint32(7)}, `{"i":1,"j":-1,"u":7}`},
		{map[string]any{"f": 1.0, "g": 0.0, "h": math.Copysign(0, -1), "k": 1.5, "l": 1e21, "m": 1e20, "n": 1e-7, "o": 123456789.0}, `{"f":1.0,"g":0.0,"h":-0.0,"k":1.5,"l":1e+21,"m":100000000000000000000.0,"n":1e-7,"o":123456789.0}`},
		{map[string]any{"f32": float32(0.5)}, `{"f32":0.5}`},
		{map[string]any{"s": "<&>\"\\\n\t\x01\u2028é\xff"}, `{"s":"<&>\"\\\n\t\u0001\u2028é\ufffd"}`},
		{map[string]any{"b": []byte("hi!"), "e": []byte{}}, `{"b":"aGkh","e":""}`},
		{map[string]any{"l": []any{int64(1), []any{}, map[string]any{"z": "y", "a": []any{nil}}}}, `{"l":[1,[],{"a":[null],"z":"y"}]}`},
		{map[string]any{"\n": int64(1)}, `{"\n":1}`},
	}
	for _, tt := range tests {
		got, err := AppendRowJSON([]byte("x"), tt.row)
		if err != nil {
			t.Errorf("AppendRowJSON(%#v): %v", tt.row, err)
			continue
		}
		if string(got[1:]) != tt.want {
			t.Errorf("AppendRowJSON(%#v)\n got %s\nwant %s", tt.row, got[1:], tt.want)
		}
		if !json.Valid(got[1:]) {
			t.Errorf("AppendRowJSON(%#v) = %s is not valid JSON", tt.row, got[1:])
		}
	}
}

func TestAppendRowJSONErrors(t *testing.T) {
	cyclic := map[string]any{}
	cyclic["c"] = cyclic
	tests := []struct {
		row map[string]any
		is  error
		msg string
	}{
		{map[string]any{"n": math.NaN()}, ErrNotFinite, `codec: column "n": NaN: codec: NaN or infinity has no JSON form`},
		{map[string]any{"l": []any{math.Inf(-1)}}, ErrNotFinite, ""},
		{map[string]any{"x": time.Second}, ErrUnsupportedType, `codec: column "x": unsupported type time.Duration`},
		{map[string]any{"m": map[string]any{"k": []any{uint8(1)}}}, ErrUnsupportedType, `codec: column "m"["k"][0]: unsupported type uint8`},
		{map[string]any{"c": cyclic}, ErrTooDeep, ""},
	}
	for _, tt := range tests {
		got, err := AppendRowJSON([]byte("keep"), tt.row)
		if !errors.Is(err, tt.is) || string(got) != "keep" {
			t.Errorf("AppendRowJSON(%v) = %q, %v; want %q, %v", tt.row, got, err, "keep", tt.is)
			continue
		}
		if tt.msg != "" && err.Error() != tt.msg {
			t.Errorf("message %q, want %q", err.Error(), tt.msg)
		}
	}
}

// TestAppendRowJSONMatchesEncodingJSON compares strings, names, floats and
// []byte with encoding/json (HTML escaping off) on random values.
func TestAppendRowJSONMatchesEncodingJSON(t *testing.T) {
	r := newRand(t, uint64(time.Now().UnixNano()))
	stdlib := func(v any) string {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		return strings.TrimSuffix(buf.String(), "\n")
	}
	for range 20000 {
		var s string
		if r.IntN(2) == 0 {
			s = randString(r)
		} else { // random bytes over the whole range, and some special runes
			b := make([]byte, r.IntN(12))
			for i := range b {
				b[i] = byte(r.IntN(256))
			}
			s = string(b) + []string{"", "\u2028", "\u2029", "\U0001F600", "\t", "<>&"}[r.IntN(6)]
		}
		f := randFloat64(r)
		row := map[string]any{s: s, "f": f, "b": []byte(s)}
		if math.IsInf(f, 0) {
			row["f"] = 0.5
			f = 0.5
		}
		got, err := AppendRowJSON(nil, row)
		if err != nil {
			t.Fatal(err)
		}
		want := stdlib(row)
		if f == math.Trunc(f) && math.Abs(f) < 1e21 { // ours keeps the float-ness
			want = strings.Replace(want, `"f":`+stdlib(f), `"f":`+stdlib(f)+".0", 1)
		}
		if string(got) != want {
			t.Fatalf("row %#v\n got %s\nwant %s", row, got, want)
		}
	}
}

// TestJSONRoundTrip: random rows of JSON-representable values (no []byte,
// no NaN or infinities, no uint64 that fits an int64, valid UTF-8) survive AppendRowJSON then RowFromJSON, and the JSON
// is deterministic.
func TestJSONRoundTrip(t *testing.T) {
	r := newRand(t, uint64(time.Now().UnixNano()))
	var jsonable func(v any) any
	jsonable = func(v any) any {
		switch x := v.(type) {
		case []byte:
			return "bytes"
		case uint64: // JSON does not know it was unsigned
			if x <= math.MaxInt64 {
				return int64(x)
			}
		case float64:
			if math.IsNaN(x) || math.IsInf(x, 0) {
				return 0.25
			}
		case string:
			return strings.ToValidUTF8(x, "\uFFFD")
		case []any:
			for i := range x {
				x[i] = jsonable(x[i])
			}
		case map[string]any:
			out := make(map[string]any, len(x))
			for k, e := range x {
				out[strings.ToValidUTF8(k, "\uFFFD")] = jsonable(e)
			}
			return out
		}
		return v
	}
	for range 2000 {
		row := jsonable(randRow(r, 3)).(map[string]any)
		line, err := AppendRowJSON(nil, row)
		if err != nil {
			t.Fatal(err)
		}
		got, err := RowFromJSON(line)
		if err != nil {
			t.Fatalf("RowFromJSON(%s): %v", line, err)
		}
		if !equalValue(row, got) {
			t.Fatalf("round trip of %s:\n got %#v\nwant %#v", line, got, row)
		}
		again, _ := AppendRowJSON(nil, got)
		if !bytes.Equal(again, line) {
			t.Fatalf("JSON not deterministic:\n%s\n%s", line, again)
		}
	}
}

// TestRowFromJSONErrorsName: each refusal says what is wrong and where, so
// that 'weir queue write' can name the line and the field.
func TestRowFromJSONErrorsName(t *testing.T) {
	for in, want := range map[string]string{
		`{"d":1,"d":2}`:                   `column "d" appears twice`,
		`{"m":{"x":[{"d":1,"d":2}]}}`:     `column "m"["x"][0]: name "d" appears twice`,
		`{"n":18446744073709551616}`:      `column "n": integer 18446744073709551616 is outside the 64-bit range`,
		"{\"ok\":\"\",\"s\":\"ab\xffc\"}": "invalid UTF-8 at byte 17",
		`{"s":"x\ud800y"}`:                `\ud800 at byte 8 is half of a UTF-16 surrogate pair`,
		`{"s":"\\ud800"}`:                 "", // an escaped backslash, then "ud800": fine
		`{"a":[1,2,{"b":1e999}]}`:         `column "a"[2]["b"]: number 1e999`,
	} {
		_, err := RowFromJSON([]byte(in))
		if want == "" {
			if err != nil {
				t.Errorf("RowFromJSON(%s): %v", in, err)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("RowFromJSON(%s) = %v, want an error with %q", in, err, want)
		}
	}
}
