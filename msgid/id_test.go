package msgid

// Tests of the id formats. They prove: the formats match Flow's (its unit-test
// example included); ordered ids of one stream order like (seq, offset[, index])
// and inherited ids like index; ids are injective, so distinct messages never
// share an id; ParseOrdered inverts Ordered exactly and rejects everything
// else without panicking; Merged is a pure, order-independent function of the
// parent set, pinned by golden values computed outside Go; ValidStream names
// the offending character.

import (
	"cmp"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestOrderedFlowExample is the example asserted by Flow's own unit test.
func TestOrderedFlowExample(t *testing.T) {
	const want = "19d8d22a8012d687-hit:17b"
	if got := Ordered(1862469525896877703, "hit", 123); got != want {
		t.Fatalf("Ordered(1862469525896877703, \"hit\", 123) = %q, want %q", got, want)
	}
	if got := string(AppendOrdered(nil, 1862469525896877703, "hit", 123)); got != want {
		t.Fatalf("AppendOrdered = %q, want %q", got, want)
	}
}

func TestOrderedTable(t *testing.T) {
	tests := []struct {
		name          string
		seq           uint64
		stream        string
		offset, index uint64
		indexed       bool
		want          string
	}{
		{"zero", 0, "s", 0, 0, false, "0000000000000000-s:00"},
		{"max", math.MaxUint64, "s", math.MaxUint64, 0, false, "ffffffffffffffff-s:fffffffffffffffff"},
		{"flow", 1862469525896877703, "hit", 123, 0, false, "19d8d22a8012d687-hit:17b"},
		{"indexed", 1862469525896877703, "hit", 123, 0, true, "19d8d22a8012d687-hit:17b:00"},
		{"indexed big", 1, "log.v2", 16, 1 << 32, true, "0000000000000001-log.v2:110:8100000000"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got ID
			var app string
			if tt.indexed {
				got = OrderedIndexed(tt.seq, tt.stream, tt.offset, tt.index)
				app = string(AppendOrderedIndexed([]byte("x"), tt.seq, tt.stream, tt.offset, tt.index))
			} else {
				got = Ordered(tt.seq, tt.stream, tt.offset)
				app = string(AppendOrdered([]byte("x"), tt.seq, tt.stream, tt.offset))
			}
			if got != ID(tt.want) {
				t.Errorf("id = %q, want %q", got, tt.want)
			}
			if app != "x"+tt.want {
				t.Errorf("append form = %q, want %q", app, "x"+tt.want)
			}
			p, err := ParseOrdered(got)
			want := OrderedParts{Seq: tt.seq, Stream: tt.stream, Offset: tt.offset, Index: tt.index, HasIndex: tt.indexed}
			if err != nil || p != want {
				t.Errorf("ParseOrdered(%q) = %+v, %v; want %+v", got, p, err, want)
			}
			if seq, err := got.Seq(); err != nil || seq != tt.seq {
				t.Errorf("Seq() = %d, %v; want %d", seq, err, tt.seq)
			}
		})
	}
}

func TestInherited(t *testing.T) {
	parent := Ordered(1862469525896877703, "hit", 123)
	const want = "19d8d22a8012d687-hit:17b-clicks:00"
	if got := Inherited(parent, "clicks", 0); got != want {
		t.Fatalf("Inherited = %q, want %q", got, want)
	}
	if got := string(AppendInherited([]byte("x"), parent, "clicks", 0)); got != "x"+want {
		t.Fatalf("AppendInherited = %q, want %q", got, "x"+want)
	}
	// A long chain of Swift hops: still exact, and children order like index.
	long := parent
	for range 20 {
		long = Inherited(long, "a_rather_long_stream_name", 7)
	}
	prev := Inherited(long, "out", 0)
	for _, i := range []uint64{1, 9, 15, 16, 255, 256, 1 << 40, math.MaxUint64} {
		id := Inherited(long, "out", i)
		if id <= prev {
			t.Fatalf("Inherited(…, %d) = %q does not sort after %q", i, id, prev)
		}
		if string(id) != string(long)+"-out:"+Lex(i) {
			t.Fatalf("Inherited(…, %d) = %q is not parent-out:Lex", i, id)
		}
		prev = id
	}
}

func TestSeqRejects(t *testing.T) {
	ordered := Ordered(42, "hit", 1)
	merged, err := Merged([]ID{ordered, Ordered(43, "hit", 1)})
	if err != nil {
		t.Fatal(err)
	}
	bad := []ID{
		"",
		"0000000000000001",
		"0000000000000001-",
		"0000000000000001-hit",
		"0000000000000001-hit:",
		"0000000000000001-:00",          // empty stream
		"0000000000000001-h-t:00",       // '-' in stream
		"000000000000001-hit:00",        // 15 seq digits
		"00000000000000001-hit:00",      // 17 seq digits
		"000000000000000A-hit:00",       // uppercase seq
		"0000000000000001-hit:100",      // non-canonical offset
		"0000000000000001-hit:00:",      // empty index
		"0000000000000001-hit:00:00:00", // two indexes
		"0000000000000001-hit:00-x",     // trailing bytes
		"0000000000000001_hit:00",       // wrong separator
		"0000000000000001-h\xffit:00",   // non-ASCII stream
		Inherited(ordered, "clicks", 0), // inherited, though its root is ordered
		merged,                          // merged base
		Inherited(merged, "out", 3),     // child of a merged base
	}
	for _, id := range bad {
		seq, err := id.Seq()
		if err == nil {
			t.Errorf("Seq(%q) = %d, nil; want an error", id, seq)
			continue
		}
		if !errors.Is(err, ErrNotOrdered) {
			t.Errorf("Seq(%q) error %v does not match ErrNotOrdered", id, err)
		}
	}
}

// streamAlphabetBytes is the set ValidStream allows, for mapping fuzz bytes
// onto valid stream names.
const streamAlphabetBytes = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_."

func fuzzStream(raw []byte) string {
	if len(raw) == 0 {
		return "s"
	}
	b := make([]byte, len(raw))
	for i, c := range raw {
		b[i] = streamAlphabetBytes[int(c)%len(streamAlphabetBytes)]
	}
	return string(b)
}

// FuzzOrderedOrder checks that ordered ids of one stream order like
// (seq, offset) and indexed ones like (seq, offset, index), and that
// ParseOrdered inverts both.
func FuzzOrderedOrder(f *testing.F) {
	f.Add(uint64(1), uint64(15), uint64(0), uint64(1), uint64(16), uint64(0), []byte("hit"))
	f.Add(uint64(1), uint64(math.MaxUint64), uint64(9), uint64(2), uint64(0), uint64(0), []byte("x"))
	f.Add(uint64(7), uint64(3), uint64(255), uint64(7), uint64(3), uint64(256), []byte("a.b_c"))
	f.Fuzz(func(t *testing.T, seq1, off1, idx1, seq2, off2, idx2 uint64, raw []byte) {
		stream := fuzzStream(raw)
		a, b := Ordered(seq1, stream, off1), Ordered(seq2, stream, off2)
		want := cmp.Or(cmp.Compare(seq1, seq2), cmp.Compare(off1, off2))
		if got := strings.Compare(string(a), string(b)); got != want {
			t.Fatalf("Compare(%q, %q) = %d, want %d", a, b, got, want)
		}
		ai, bi := OrderedIndexed(seq1, stream, off1, idx1), OrderedIndexed(seq2, stream, off2, idx2)
		want = cmp.Or(want, cmp.Compare(idx1, idx2))
		if got := strings.Compare(string(ai), string(bi)); got != want {
			t.Fatalf("Compare(%q, %q) = %d, want %d", ai, bi, got, want)
		}
		for _, c := range []struct {
			id   ID
			want OrderedParts
		}{
			{a, OrderedParts{Seq: seq1, Stream: stream, Offset: off1}},
			{bi, OrderedParts{Seq: seq2, Stream: stream, Offset: off2, Index: idx2, HasIndex: true}},
		} {
			if p, err := ParseOrdered(c.id); err != nil || p != c.want {
				t.Fatalf("ParseOrdered(%q) = %+v, %v; want %+v", c.id, p, err, c.want)
			}
		}
	})
}

// FuzzParseOrdered feeds arbitrary strings to ParseOrdered: no panic, errors
// match ErrNotOrdered, and whatever is accepted rebuilds to the same bytes.
func FuzzParseOrdered(f *testing.F) {
	for _, s := range []string{
		"19d8d22a8012d687-hit:17b", "19d8d22a8012d687-hit:17b:00", "19d8d22a8012d687-hit:17b-x:00",
		"", "-:", "0000000000000000-:00", "ffffffffffffffff-s:fffffffffffffffff:fffffffffffffffff",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseOrdered(ID(s))
		if err != nil {
			if !errors.Is(err, ErrNotOrdered) {
				t.Fatalf("ParseOrdered(%q): error %v does not match ErrNotOrdered", s, err)
			}
			return
		}
		var rebuilt ID
		if p.HasIndex {
			rebuilt = OrderedIndexed(p.Seq, p.Stream, p.Offset, p.Index)
		} else {
			rebuilt = Ordered(p.Seq, p.Stream, p.Offset)
		}
		if string(rebuilt) != s {
			t.Fatalf("ParseOrdered(%q) = %+v, which rebuilds to %q", s, p, rebuilt)
		}
	})
}

// TestIDsInjective enumerates ids over a small domain chosen to provoke
// collisions (parents that are prefixes of each other, streams that look like
// parts of ids) and checks every construction gives a distinct id.
func TestIDsInjective(t *testing.T) {
	streams := []string{"a", "b", "ab", "a.b", "0", "00", "17b", "s_1"}
	nums := []uint64{0, 1, 15, 16, 123}
	var roots []ID
	seen := map[ID]string{}
	add := func(id ID, how string) {
		t.Helper()
		if prev, dup := seen[id]; dup {
			t.Fatalf("id %q built twice: by %s and by %s", id, prev, how)
		}
		seen[id] = how
	}
	for _, seq := range []uint64{0, 1, 0x17b} {
		for _, s := range streams {
			for _, o := range nums {
				id := Ordered(seq, s, o)
				add(id, "Ordered")
				roots = append(roots, id)
				for _, i := range nums {
					idx := OrderedIndexed(seq, s, o, i)
					add(idx, "OrderedIndexed")
					roots = append(roots, idx)
				}
			}
		}
	}
	var children []ID
	for _, p := range roots[:40] {
		for _, s := range streams {
			for _, i := range nums {
				c := Inherited(p, s, i)
				add(c, "Inherited")
				children = append(children, c)
			}
		}
	}
	for _, p := range children[:50] {
		for _, s := range streams[:3] {
			add(Inherited(p, s, 0), "Inherited²")
		}
	}
	for i := 0; i+2 < len(roots); i += 3 {
		m, err := Merged(roots[i : i+3])
		if err != nil {
			t.Fatal(err)
		}
		add(m, "Merged")
		add(Inherited(m, "a", 0), "Inherited(Merged)")
	}
}

// TestMergedGolden pins merged ids to values computed independently (Python
// hashlib over the documented encoding), so a change of algorithm, encoding
// or Go version that alters merged ids fails here rather than silently
// breaking dedup across an upgrade.
func TestMergedGolden(t *testing.T) {
	tests := []struct {
		parents []ID
		want    ID
	}{
		{
			[]ID{"19d8d22a8012d687-hit:17b", "19d8d22a8012d687-hit:17c", "0000000000000001-clicks:00"},
			"0000000000000001-clicks:00-f9dd5ff47762ed8aa3fecd21dd79ac07",
		},
		{
			[]ID{"19d8d22a8012d687-hit:17c", "19d8d22a8012d687-hit:17b"},
			"19d8d22a8012d687-hit:17b-e3890aa0cf1d27118a807c3f43bfc65b",
		},
		{
			// Duplicates are dropped: same set, same id.
			[]ID{"19d8d22a8012d687-hit:17b", "19d8d22a8012d687-hit:17c", "19d8d22a8012d687-hit:17b"},
			"19d8d22a8012d687-hit:17b-e3890aa0cf1d27118a807c3f43bfc65b",
		},
		{
			// One distinct parent: the parent itself (Flow's single-parent path).
			[]ID{"19d8d22a8012d687-hit:17b"},
			"19d8d22a8012d687-hit:17b",
		},
		{
			[]ID{"19d8d22a8012d687-hit:17b", "19d8d22a8012d687-hit:17b"},
			"19d8d22a8012d687-hit:17b",
		},
	}
	for _, tt := range tests {
		got, err := Merged(tt.parents)
		if err != nil || got != tt.want {
			t.Errorf("Merged(%q) = %q, %v; want %q", tt.parents, got, err, tt.want)
		}
	}
}

func TestMergedOrderIndependent(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	parents := make([]ID, 50)
	for i := range parents {
		parents[i] = Ordered(rng.Uint64(), "in", rng.Uint64N(1000))
	}
	want, err := Merged(parents)
	if err != nil {
		t.Fatal(err)
	}
	if min := slices.Min(parents); !strings.HasPrefix(string(want), string(min)+"-") || len(want) != len(min)+33 {
		t.Fatalf("Merged = %q, want the smallest parent %q + \"-\" + 32 hex digits", want, min)
	}
	for range 100 {
		p := slices.Clone(parents)
		rng.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
		if got, err := Merged(p); err != nil || got != want {
			t.Fatalf("Merged of a permutation = %q, %v; want %q", got, err, want)
		}
	}
}

func TestMergedDiffersWithSet(t *testing.T) {
	a, b, c := ID("0000000000000001-s:00"), ID("0000000000000001-s:01"), ID("0000000000000002-s:00")
	sets := [][]ID{
		{a, b}, {a, c}, {b, c}, {a, b, c},
		// Length framing: these would be equal if ids were simply concatenated.
		{"0000000000000001-s:0", "00"}, {"0000000000000001-s:", "000"},
	}
	seen := map[ID]int{}
	for i, s := range sets {
		m, err := Merged(s)
		if err != nil {
			t.Fatal(err)
		}
		if j, dup := seen[m]; dup {
			t.Fatalf("sets %q and %q have the same merged id %q", sets[j], s, m)
		}
		seen[m] = i
	}
}

func TestMergedErrors(t *testing.T) {
	if _, err := Merged(nil); !errors.Is(err, ErrNoParents) {
		t.Errorf("Merged(nil) error = %v, want ErrNoParents", err)
	}
	if _, err := Merged([]ID{}); !errors.Is(err, ErrNoParents) {
		t.Errorf("Merged([]) error = %v, want ErrNoParents", err)
	}
	_, err := Merged([]ID{"0000000000000001-s:00", ""})
	if !errors.Is(err, ErrEmptyID) {
		t.Errorf("Merged with an empty parent: error = %v, want ErrEmptyID", err)
	} else if !strings.Contains(err.Error(), "parent 1") {
		t.Errorf("error %q does not say which parent", err)
	}
}

func TestMergedDoesNotModifyInput(t *testing.T) {
	in := []ID{"c", "a", "b", "a"}
	orig := slices.Clone(in)
	if _, err := Merged(in); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(in, orig) {
		t.Fatalf("Merged modified its input: %q, was %q", in, orig)
	}
}

func TestValidStream(t *testing.T) {
	for _, ok := range []string{"hit", "Clicks_v2", "a.b", "0", "_", strings.Repeat("x", 300)} {
		if err := ValidStream(ok); err != nil {
			t.Errorf("ValidStream(%q) = %v, want nil", ok, err)
		}
	}
	tests := []struct {
		name    string
		pos     int
		message string // substring of the error text
	}{
		{"", -1, "is empty"},
		{"my-stream", 2, "'-' at byte 2"},
		{"a:b", 1, "':' at byte 1"},
		{"a b", 1, "' ' at byte 1"},
		{"tab\t", 3, "'\\t' at byte 3"},
		{"ok/no", 2, "'/' at byte 2"},
		{"café", 3, "'é' at byte 3"},
		{"x\xff", 1, "byte 0xff at byte 1"},
	}
	for _, tt := range tests {
		err := ValidStream(tt.name)
		var se *StreamError
		if !errors.As(err, &se) || !errors.Is(err, ErrInvalidStream) {
			t.Errorf("ValidStream(%q) = %v, want a *StreamError matching ErrInvalidStream", tt.name, err)
			continue
		}
		if se.Pos != tt.pos || se.Stream != tt.name {
			t.Errorf("ValidStream(%q): Pos %d, Stream %q; want %d, %q", tt.name, se.Pos, se.Stream, tt.pos, tt.name)
		}
		if !strings.Contains(err.Error(), tt.message) {
			t.Errorf("ValidStream(%q) error %q does not contain %q", tt.name, err, tt.message)
		}
	}
}
