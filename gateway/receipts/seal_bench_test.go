package receipts_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// BenchmarkSeal is the CPU cost a receipt adds to a call: JSON encoding,
// JCS, SHA-256 (what Seal does), then Encode for the store.
func BenchmarkSeal(b *testing.B) {
	r := sample(7)
	r.Session, r.Step, r.Decision, r.Rule = "session-1234", "step-7", "allow", "decide[0]"
	r.Policy = receipts.PolicyHash([]byte(`[{"when":"args.amount <= 1000","decision":"allow"}]`))
	prev := receipts.Seal(nil, r)
	b.ReportAllocs()
	var line []byte
	for b.Loop() {
		sealed := receipts.Seal(&prev, r)
		line, _ = receipts.Encode(sealed)
	}
	b.ReportMetric(float64(len(line)), "bytes/line")
}

// BenchmarkVerify is the cost per receipt of checking an export.
func BenchmarkVerify(b *testing.B) {
	var buf bytes.Buffer
	var prev *receipts.Receipt
	const n = 1000
	for i := range n {
		r := receipts.Seal(prev, sample(i%60))
		line, _ := receipts.Encode(r)
		buf.Write(append(line, '\n'))
		prev = &r
	}
	input := buf.Bytes()
	b.ReportAllocs()
	for b.Loop() {
		rep, err := receipts.Verify(bytes.NewReader(input))
		if err != nil || !rep.OK() {
			b.Fatal(rep, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/receipt")
}

// BenchmarkCheckpointSign is the CPU cost of signing one checkpoint of a
// chain's head (Ed25519 over the checkpoint's signed bytes), paid once
// per receipts.checkpoint_every receipts, off the call path.
func BenchmarkCheckpointSign(b *testing.B) {
	_, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		b.Fatal(err)
	}
	key := receipts.NewSigningKey(private)
	head := receipts.Seal(nil, sample(7))
	b.ReportAllocs()
	for b.Loop() {
		if c := key.Sign(receipts.CheckpointOf(head)); c.Sig == "" {
			b.Fatal("no signature")
		}
	}
}
