package redisreceipts_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"golang.org/x/tools/txtar"

	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/redisreceipts"
)

// segmentedChain appends n receipts of every shape to acme (runs of 7,
// so runs straddle segment ends), dated from start a second apart, and
// answers their lines as the store wrote them. start must not be older
// than the store's clock less the executed index's hour, or every
// append would look its executions up in the chain (dedupe.go).
func segmentedChain(t *testing.T, s *redisreceipts.Store, n int, start time.Time) []string {
	t.Helper()
	var lines []string
	var run []receipts.Receipt
	flush := func() {
		sealed, err := s.AppendRun(t.Context(), "acme", run)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range sealed {
			line, err := receipts.Encode(r)
			if err != nil {
				t.Fatal(err)
			}
			lines = append(lines, string(line))
		}
		run = run[:0]
	}
	for i := range n {
		r := receipt(i)
		r.Time = start.Add(time.Duration(i)*time.Second + time.Duration(i%10)*time.Nanosecond)
		switch i % 5 {
		case 1: // an approval's members, a note with what JSON escapes
			r = receipts.Receipt{Event: receipts.EventApprovalGranted, Time: r.Time, Tool: "refund", By: "oidc:Ana",
				ClaimedBy: "ana", Note: "ok \"quoted\" \u2028 \x01 é", Requester: "token:acme", Rule: "decide[2]"}
		case 2: // a tool pin's, with an upper-case hex definition
			r = receipts.Receipt{Event: receipts.EventToolPinned, Time: r.Time, Tool: "refund", By: "first_use",
				Definition: strings.ToUpper(receipts.KeyHash(fmt.Sprint(i)))}
		case 3:
			r.Observe, r.Status = "deny", 0
		}
		run = append(run, r)
		if len(run) == 7 {
			flush()
		}
	}
	if len(run) > 0 {
		flush()
	}
	return lines
}

func storedLines(t *testing.T, s *redisreceipts.Store) []string {
	t.Helper()
	var out []string
	for after := int64(0); ; {
		lines, next, err := s.Lines(t.Context(), "acme", after, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range lines {
			out = append(out, string(l))
		}
		if next == 0 {
			return out
		}
		after = next
	}
}

func verifyAcme(t *testing.T, s *redisreceipts.Store) receipts.TenantReport {
	t.Helper()
	var buf bytes.Buffer
	if err := receipts.Export(t.Context(), s, &buf); err != nil {
		t.Fatal(err)
	}
	rep, err := receipts.Verify(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Tenants) != 1 {
		t.Fatalf("report: %+v", rep)
	}
	return rep.Tenants[0]
}

// Receipts moved into sealed segments read back as the very lines the
// store wrote, byte for byte, and the chain verifies; only the head's
// segment stays as lines.
func TestSegmentsReDeriveTheStoredLines(t *testing.T) {
	c := newClient(t)
	prefix := newPrefix(t, c)
	s := redisreceipts.New(c, prefix, nil)
	const n = 3*redisreceipts.SegmentSize + 40
	want := segmentedChain(t, s, n, time.Now().Add(-10*time.Minute))
	if segments := c.ZCard(t.Context(), prefix+"{receipts:acme}:segments").Val(); segments != 3 {
		t.Fatalf("%d segments sealed, want 3", segments)
	}
	if lines := c.ZCard(t.Context(), prefix+"{receipts:acme}:log").Val(); lines != 40 {
		t.Fatalf("%d receipts left as lines, want 40", lines)
	}
	got := storedLines(t, s)
	if len(got) != n {
		t.Fatalf("read %d lines, want %d", len(got), n)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("seq %d:\n got %s\nwant %s", i+1, got[i], want[i])
		}
	}
	if tr := verifyAcme(t, s); tr.Failure != nil || tr.Checked != n {
		t.Fatalf("verify: %+v", tr)
	}
	listed, next, err := s.List(t.Context(), receipts.Filter{Tenant: "acme", After: 250, Limit: 10})
	if err != nil || len(listed) != 6 || listed[0].Seq != 251 || next != 256 { // a page ends with its segment
		t.Fatalf("List after 250: %d receipts from %v, next %d, %v", len(listed), listed, next, err)
	}
	last, ok, err := s.LastReceipt(t.Context(), "acme")
	if err != nil || !ok || last.Seq != n {
		t.Fatalf("LastReceipt: seq %d, %v, %v", last.Seq, ok, err)
	}
}

// Tampering inside a sealed segment, by whoever can decode and write
// it, is named at the receipt it touched.
func TestSegmentTamperingIsNamed(t *testing.T) {
	cases := []struct {
		name    string
		tamper  func(lines []string) []string
		problem receipts.Problem
		seq     int64
	}{
		{"edited", func(l []string) []string {
			l[99] = strings.Replace(l[99], `"status":201`, `"status":200`, 1)
			return l
		}, receipts.ProblemAltered, 100},
		{"deleted", func(l []string) []string { return append(l[:49:49], l[50:]...) }, receipts.ProblemRemoved, 50},
		{"swapped", func(l []string) []string { l[9], l[10] = l[10], l[9]; return l }, receipts.ProblemReordered, 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t)
			prefix := newPrefix(t, c)
			s := redisreceipts.New(c, prefix, nil)
			segmentedChain(t, s, redisreceipts.SegmentSize+10, time.Now().Add(-10*time.Minute))
			key := prefix + "{receipts:acme}:segments"
			blob := c.ZRange(t.Context(), key, 0, 0).Val()[0]
			lines, err := redisreceipts.DecodeSegment("acme", []byte(blob))
			if err != nil {
				t.Fatal(err)
			}
			forged, ok, err := redisreceipts.EncodeSegment("acme", tc.tamper(lines))
			if !ok || err != nil {
				t.Fatalf("encode the tampered segment: %v %v", ok, err)
			}
			c.ZRem(t.Context(), key, blob)
			c.ZAdd(t.Context(), key, redis.Z{Score: 0, Member: string(forged)})
			if tr := verifyAcme(t, s); tr.Failure == nil || tr.Failure.Problem != tc.problem || tr.Failure.Seq != tc.seq {
				t.Fatalf("failure %+v, want %s at seq %d", tr.Failure, tc.problem, tc.seq)
			}
		})
	}
	t.Run("segment removed", func(t *testing.T) {
		c := newClient(t)
		prefix := newPrefix(t, c)
		s := redisreceipts.New(c, prefix, nil)
		segmentedChain(t, s, 2*redisreceipts.SegmentSize+10, time.Now().Add(-10*time.Minute))
		c.ZRemRangeByScore(t.Context(), prefix+"{receipts:acme}:segments", "1", "1")
		if tr := verifyAcme(t, s); tr.Failure == nil || tr.Failure.Problem != receipts.ProblemRemoved || tr.Failure.Seq != redisreceipts.SegmentSize+1 {
			t.Fatalf("failure %+v, want removed at seq %d", tr.Failure, redisreceipts.SegmentSize+1)
		}
	})
}

// Expiry removes whole segments and re-seals the one the retention cuts
// through: the rest is a contiguous chain that verifies from its anchor.
func TestSegmentsExpire(t *testing.T) {
	c := newClient(t)
	prefix := newPrefix(t, c)
	start := time.Now().Add(-48 * time.Hour)
	s := redisreceipts.New(c, prefix, newTestClock(start).Now)
	const n = 3*redisreceipts.SegmentSize + 5
	want := segmentedChain(t, s, n, start)
	cutoff := start.Add(300*time.Second + time.Millisecond) // seq 1 to 301 are older
	removed, err := s.Expire(t.Context(), cutoff)
	if err != nil || removed != 301 {
		t.Fatalf("Expire: %d removed, %v; want 301", removed, err)
	}
	got := storedLines(t, s)
	if len(got) != n-301 || got[0] != want[301] || got[len(got)-1] != want[n-1] {
		t.Fatalf("after expiry: %d lines from %.60s", len(got), got[0])
	}
	if tr := verifyAcme(t, s); tr.Failure != nil || tr.First != 302 || tr.Checked != n-301 {
		t.Fatalf("verify: %+v", tr)
	}
}

// testClock is a clock a test moves.
type testClock struct{ now atomic.Int64 }

func newTestClock(at time.Time) *testClock {
	c := &testClock{}
	c.now.Store(at.UnixNano())
	return c
}

func (c *testClock) Now() time.Time          { return time.Unix(0, c.now.Load()).UTC() }
func (c *testClock) Advance(d time.Duration) { c.now.Add(int64(d)) }

// The executed index keeps an hour of appends; an executed receipt
// recovered later than that (its outbox entry left by a gateway that
// appended it and died before clearing) is found in the chain, sealed
// segments included, and not appended twice; a new execution of the
// same run is.
func TestOldRecoveredReceiptIsNotAppendedTwice(t *testing.T) {
	c := newClient(t)
	prefix := newPrefix(t, c)
	clock := newTestClock(time.Now().Add(-5 * time.Hour))
	s := redisreceipts.New(c, prefix, clock.Now)
	completed := clock.Now()
	old := receipt(1_000_000)
	old.Time = completed
	if _, err := s.AppendRun(t.Context(), "acme", []receipts.Receipt{old}); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	segmentedChain(t, s, 2*redisreceipts.SegmentSize, clock.Now()) // the old receipt is in a sealed segment now
	clock.Advance(3 * time.Hour)
	if _, err := s.Expire(t.Context(), clock.Now().Add(-receipts.DefaultRetention)); err != nil {
		t.Fatal(err)
	}
	if n := c.ZCard(t.Context(), prefix+"{receipts:acme}:executed").Val(); n != 0 {
		t.Fatalf("executed index holds %d ids after its window, want 0", n)
	}
	fresh := receipt(2_000_000)
	fresh.Time = completed.Add(time.Second)
	appended, err := s.AppendRun(t.Context(), "acme", []receipts.Receipt{old, fresh})
	if err != nil || len(appended) != 1 || appended[0].ExecutionID != fresh.ExecutionID {
		t.Fatalf("recovered run: %+v, %v; want only the new execution", appended, err)
	}
	if _, err := s.Append(t.Context(), "acme", old); !errors.Is(err, receipts.ErrDuplicate) {
		t.Fatalf("Append of the old execution again = %v, want ErrDuplicate", err)
	}
	// Within the window the index refuses it, without a read of the chain.
	if rs, err := s.AppendRun(t.Context(), "acme", []receipts.Receipt{fresh}); err != nil || len(rs) != 0 {
		t.Fatalf("the new execution again: %+v, %v", rs, err)
	}
	count := 0
	for _, line := range storedLines(t, s) {
		if strings.Contains(line, old.ExecutionID) {
			count++
		}
	}
	if count != 1 {
		t.Fatalf("the old execution has %d executed receipts, want 1", count)
	}
}

// BenchmarkEncodeSegment is the CPU one sealed segment's compaction
// costs the writer: write the compact form of segmentSize receipts,
// deflate it and re-derive every receipt to check it (per segment; the
// B/receipt metric is the compact form's size per receipt). "lines" is
// a segment read back from Redis (each line read and re-derived as
// JSON), "sealed" one this process sealed (checked field by field).
func BenchmarkEncodeSegment(b *testing.B) {
	c := newClient(b)
	s := redisreceipts.New(c, newPrefix(b, c), nil)
	run := make([]receipts.Receipt, redisreceipts.SegmentSize)
	for i := range run {
		run[i] = receipt(i)
		if i%3 == 1 { // a budget receipt for every executed one and a half
			run[i] = receipts.Receipt{Event: receipts.EventBudgetReserved, Tool: "refund", Key: run[i].Key,
				Budget: "daily-refunds", Amount: "60"}
		}
	}
	sealed, err := s.AppendRun(b.Context(), "acme", run)
	if err != nil {
		b.Fatal(err)
	}
	lines := make([]string, len(sealed))
	ofRun := make([]receipts.Sealed, len(sealed))
	for i, r := range sealed {
		line, err := receipts.Encode(r)
		if err != nil {
			b.Fatal(err)
		}
		lines[i], ofRun[i] = string(line), receipts.Sealed{Receipt: r, Line: line}
	}
	for _, bc := range []struct {
		name   string
		encode func() ([]byte, bool, error)
	}{
		{"lines", func() ([]byte, bool, error) { return redisreceipts.EncodeSegment("acme", lines) }},
		{"sealed", func() ([]byte, bool, error) { return redisreceipts.EncodeSealed("acme", ofRun) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var size int
			for b.Loop() {
				blob, ok, err := bc.encode()
				if !ok || err != nil {
					b.Fatalf("encode: %v %v", ok, err)
				}
				size = len(blob)
			}
			b.ReportMetric(float64(size)/float64(len(lines)), "B/receipt")
		})
	}
}

// A segment written before budget receipts existed (version 1, in
// testdata as the gateway wrote it) still reads as the lines it was
// made from.
func TestSegmentVersionOneStillReads(t *testing.T) {
	ar, err := txtar.ParseFile("testdata/segment-v1.txtar")
	if err != nil {
		t.Fatal(err)
	}
	blob, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(ar.Files[0].Data)))
	if err != nil || len(blob) == 0 {
		t.Fatalf("blob: %v", err)
	}
	want := strings.Split(strings.TrimSpace(string(ar.Files[1].Data)), "\n")
	got, err := redisreceipts.DecodeSegment("acme", blob)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d lines, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("line %d:\n got %s\nwant %s", i, got[i], want[i])
		}
	}
}

// Every member of a receipt survives its segment, whichever way the
// segment is made: a member the compact form forgot would leave every
// segment holding one as lines for ever (as budget receipts once did).
func TestSegmentsKeepEveryMember(t *testing.T) {
	c := newClient(t)
	s := redisreceipts.New(c, newPrefix(t, c), nil)
	var r receipts.Receipt
	v := reflect.ValueOf(&r).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch name := v.Type().Field(i).Name; {
		case name == "Seq", name == "Tenant", name == "Prev", name == "Hash", name == "Time": // the chain's
		case f.Kind() == reflect.String:
			f.SetString("value of " + name)
		case f.Kind() == reflect.Int:
			f.SetInt(299)
		default:
			t.Fatalf("receipt member %s of kind %s: teach the segment form (segment.go) and this test", name, f.Kind())
		}
	}
	sealed, err := s.AppendRun(t.Context(), "acme", []receipts.Receipt{r, r})
	if err != nil {
		t.Fatal(err)
	}
	lines := make([]string, len(sealed))
	run := make([]receipts.Sealed, len(sealed))
	for i, r := range sealed {
		line, err := receipts.Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		lines[i], run[i] = string(line), receipts.Sealed{Receipt: r, Line: line}
	}
	for name, encode := range map[string]func() ([]byte, bool, error){
		"lines":  func() ([]byte, bool, error) { return redisreceipts.EncodeSegment("acme", lines) },
		"sealed": func() ([]byte, bool, error) { return redisreceipts.EncodeSealed("acme", run) },
	} {
		blob, ok, err := encode()
		if !ok || err != nil {
			t.Fatalf("%s: a receipt with every member set does not re-derive from its segment (%v)", name, err)
		}
		back, err := redisreceipts.DecodeSegment("acme", blob)
		if err != nil || !slices.Equal(back, lines) {
			t.Fatalf("%s: read back %q, %v", name, back, err)
		}
	}
}

// A chain of budget receipts (two thirds of a charging call's) is sealed
// into segments like any other: by one writer, from the receipts it
// sealed, or by two replicas taking turns, each reading the segment back.
func TestBudgetReceiptsAreSealedIntoSegments(t *testing.T) {
	for _, writers := range []int{1, 2} {
		t.Run(fmt.Sprint(writers, " writers"), func(t *testing.T) {
			c := newClient(t)
			prefix := newPrefix(t, c)
			stores := make([]*redisreceipts.Store, writers)
			for i := range stores {
				stores[i] = redisreceipts.New(c, prefix, nil)
			}
			var want []string
			for i := range 2*redisreceipts.SegmentSize + 5 {
				r := receipt(i)
				if i%3 != 0 {
					r = receipts.Receipt{Event: receipts.EventBudgetCommitted, Tool: "refund", Key: r.Key, Budget: "daily", Amount: fmt.Sprint(i, ".5")}
				}
				sealed, err := stores[i%writers].AppendRun(t.Context(), "acme", []receipts.Receipt{r})
				if err != nil {
					t.Fatal(err)
				}
				line, _ := receipts.Encode(sealed[0])
				want = append(want, string(line))
			}
			if segments := c.ZCard(t.Context(), prefix+"{receipts:acme}:segments").Val(); segments != 2 {
				t.Fatalf("%d segments sealed, want 2", segments)
			}
			if got := storedLines(t, stores[0]); !slices.Equal(got, want) {
				t.Fatalf("read back %d lines, not the %d written", len(got), len(want))
			}
			if tr := verifyAcme(t, stores[0]); tr.Failure != nil || tr.Checked != len(want) {
				t.Fatalf("verify: %+v", tr)
			}
		})
	}
}
