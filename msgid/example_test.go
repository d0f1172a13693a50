package msgid_test

import (
	"errors"
	"fmt"

	"github.com/weir-stream/weir/msgid"
)

// The id of the 124th message of stream "hit" in the source batch with seq
// 1862469525896877703, and of the first message a Swift map derives from it.
func Example() {
	src := msgid.Ordered(1862469525896877703, "hit", 123)
	child := msgid.Inherited(src, "clicks", 0)
	seq, _ := src.Seq()
	_, err := child.Seq() // a child is not an ordered id, though its root is
	fmt.Println(src)
	fmt.Println(child)
	fmt.Println(seq, errors.Is(err, msgid.ErrNotOrdered))
	// Output:
	// 19d8d22a8012d687-hit:17b
	// 19d8d22a8012d687-hit:17b-clicks:00
	// 1862469525896877703 true
}

func ExampleLex() {
	for _, v := range []uint64{0, 9, 16, 123, 1<<64 - 1} {
		fmt.Println(msgid.Lex(v))
	}
	// Output:
	// 00
	// 09
	// 110
	// 17b
	// fffffffffffffffff
}

func ExampleLexInt64() {
	for _, v := range []int64{-256, -1, 0, 1} {
		fmt.Println(msgid.LexInt64(v))
	}
	// Output:
	// -deff
	// -fe
	// 00
	// 01
}

// Reusing one buffer for every id of an epoch: no allocation per id.
func ExampleAppendOrdered() {
	buf := make([]byte, 0, 64)
	for i := range uint64(3) {
		buf = msgid.AppendOrdered(buf[:0], 42, "out", i)
		fmt.Println(string(buf))
	}
	// Output:
	// 000000000000002a-out:00
	// 000000000000002a-out:01
	// 000000000000002a-out:02
}

func ExampleMerged() {
	base, err := msgid.Merged([]msgid.ID{"19d8d22a8012d687-hit:17c", "19d8d22a8012d687-hit:17b"})
	if err != nil {
		panic(err)
	}
	fmt.Println(msgid.Inherited(base, "out", 0))
	// Output:
	// 19d8d22a8012d687-hit:17b-e3890aa0cf1d27118a807c3f43bfc65b-out:00
}

func ExampleValidStream() {
	fmt.Println(msgid.ValidStream("page_views"))
	fmt.Println(msgid.ValidStream("page-views"))
	// Output:
	// <nil>
	// msgid: stream name "page-views": character '-' at byte 4 is not allowed (allowed: A-Z a-z 0-9 _ .)
}
