package kafkatest

// The broker helper itself: a one-node cluster takes a committed and an
// aborted transaction, and Apache Kafka's Java consumer at
// read_committed sees only the committed records; a stopped node comes
// back on its ports and data. (Not a SIGKILLed one: a single node restarted
// after a SIGKILL can leave a transaction hanging — connector/kafka's doc.)

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/weir-stream/weir/internal/testproc"
)

func TestBrokerTransactionsAndJavaConsumer(t *testing.T) {
	testproc.SkipUnlessLong(t)
	c := Start(t, 1, map[string]int32{"t": 2}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cl, err := c.Client(kgo.TransactionalID("smoke"), kgo.DefaultProduceTopic("t"))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	write := func(commit bool, vals ...string) {
		t.Helper()
		if err := cl.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for _, v := range vals {
			if err := cl.ProduceSync(ctx, &kgo.Record{Key: []byte("k"), Value: []byte(v)}).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := cl.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	write(true, "a", "b")
	write(false, "aborted")
	write(true, "c")

	c.Stop(0)
	if err := c.Restart(ctx, 0); err != nil {
		t.Fatal(err)
	}
	recs, err := c.ConsumeCommitted(ctx, "t")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs {
		if r.Key != "k" {
			t.Errorf("record key %q", r.Key)
		}
		got = append(got, r.Value)
	}
	if len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "c" {
		t.Fatalf("read_committed saw %q, want [a b c]", got)
	}
}
