package receipts

import (
	"bytes"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// pieces are the string material of the differential tests: every
// class of character JCS treats apart (escapes, control characters, DEL,
// non-ASCII, astral, U+2028, HTML characters json.Marshal escapes,
// invalid UTF-8 of several shapes).
var pieces = []string{
	"", "a", "refund", "\"", "\\", "/", "\b", "\f", "\n", "\r", "\t", "\x00", "\x01", "\x1f", "\x7f",
	"<", ">", "&", "é", "€", "😀", "\u2028", "\u2029", "\ufeff", "\ufffd", "\xff", "\xc3", "\xe2\x82",
	"\xed\xa0\x80", "\xf0\x9f\x98", "decide[0]", "01JEXAMPLE", " ", "\u0080", "\U0010ffff",
}

func randomString(rng *rand.Rand) string {
	if rng.IntN(4) == 0 {
		return ""
	}
	var b strings.Builder
	for range rng.IntN(6) {
		b.WriteString(pieces[rng.IntN(len(pieces))])
	}
	return b.String()
}

func randomReceipt(rng *rand.Rand) Receipt {
	ints := []int64{0, 1, -1, 7, 200, 599, 1 << 31, -(1 << 31), 1<<53 - 1, 1 << 53, -(1 << 53), 1<<53 + 1, 1 << 62, -(1 << 62)}
	times := []time.Time{
		time.Date(2026, 12, 4, 10, 0, 1, 123456789, time.UTC),
		time.Date(2026, 12, 4, 10, 0, 1, 0, time.UTC),
		time.Date(2026, 12, 4, 10, 0, 1, 120000000, time.FixedZone("CET", 3600)),
		time.Date(0, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Unix(0, rng.Int64()).UTC(),
	}
	return Receipt{
		Seq: ints[rng.IntN(len(ints))], Time: times[rng.IntN(len(times))],
		Tenant: randomString(rng), Event: Event(randomString(rng)), Tool: randomString(rng),
		Key: randomString(rng), Session: randomString(rng), Step: randomString(rng),
		ExecutionID: randomString(rng), Status: int(ints[rng.IntN(len(ints))]), Decision: randomString(rng),
		Rule: randomString(rng), Policy: randomString(rng), By: randomString(rng),
		Observe: randomString(rng), Definition: randomString(rng), Prev: randomString(rng),
		Requester: randomString(rng), ClaimedBy: randomString(rng), Note: randomString(rng),
		Budget: randomString(rng), Amount: randomString(rng),
	}
}

// TestCanonicalIsTheGenericJCS: on 50 000 random receipts (every member
// present or absent, strings of every character class, integers around
// 2^53, times of every shape) the hand-ordered encoder writes exactly the
// bytes of jcs.Transform(json.Marshal(r)), or declines (ok false) only
// for an integer beyond 2^53.
func TestCanonicalIsTheGenericJCS(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	declined := 0
	for i := range 50_000 {
		r := randomReceipt(rng)
		got, ok := canonical(nil, r)
		if !ok {
			declined++
			if r.Seq <= maxExactInt && r.Seq >= -maxExactInt && r.Status <= maxExactInt && r.Status >= -maxExactInt {
				t.Fatalf("receipt %d: declined without a large integer: %+v", i, r)
			}
			continue
		}
		if want := genericJCS(r); !bytes.Equal(got, want) {
			t.Fatalf("receipt %d differs:\n got %q\nwant %q", i, got, want)
		}
	}
	if declined == 0 || declined == 50_000 {
		t.Fatalf("declined %d of 50 000: the large-integer path was not exercised both ways", declined)
	}
}

// FuzzCanonical holds the encoder byte-identical to the generic JCS for
// any strings the fuzzer finds (go test -fuzz FuzzCanonical).
func FuzzCanonical(f *testing.F) {
	for _, p := range pieces {
		f.Add(p, p, int64(3), 201, int64(1733306400123456789))
	}
	f.Fuzz(func(t *testing.T, a, b string, seq int64, status int, nanos int64) {
		r := Receipt{Seq: seq, Time: time.Unix(0, nanos).UTC(), Tenant: a, Event: Event(b), Tool: a + b,
			Key: b, Session: a, Step: b, ExecutionID: a, Status: status, Decision: b, Rule: a, Policy: b,
			By: a, Observe: b, Definition: a + a, Prev: a, Requester: b, ClaimedBy: a, Note: b, Budget: b, Amount: a}
		got, ok := canonical(nil, r)
		if !ok {
			return
		}
		if want := genericJCS(r); !bytes.Equal(got, want) {
			t.Fatalf("differs (valid UTF-8: %v %v):\n got %q\nwant %q", utf8.ValidString(a), utf8.ValidString(b), got, want)
		}
	})
}

// BenchmarkJCS compares the two ways to the bytes a receipt's hash is
// taken of: the hand-ordered encoder and the generic JCS it replaced.
func BenchmarkJCS(b *testing.B) {
	r := Receipt{Seq: 7, Time: time.Date(2026, 12, 4, 10, 0, 7, 123456789, time.UTC), Tenant: "acme",
		Event: EventExecuted, Tool: "refund", Key: KeyHash("k"), Status: 201, ExecutionID: "01JEXAMPLE",
		Session: "session-1234", Step: "step-7", Decision: "allow", Rule: "decide[0]",
		Policy: PolicyHash([]byte("p")), Prev: KeyHash("prev")}
	b.Run("canonical", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			canonical(make([]byte, 0, 512), r)
		}
	})
	b.Run("generic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			genericJCS(r)
		}
	})
}
