package receipts_test

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"os"
	"testing"

	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/internal/tsatest"
)

func rootsOf(t *testing.T, tsa *tsatest.TSA) *x509.CertPool {
	t.Helper()
	pem, err := os.ReadFile(tsa.RootsFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		t.Fatal("no certificate in the TSA's roots")
	}
	return pool
}

// TestAnchorWithARealTSA anchors checkpoints with OpenSSL's TSA and
// verifies them: trusted, from another TSA, moved to another checkpoint,
// altered.
func TestAnchorWithARealTSA(t *testing.T) {
	tsa, stranger := tsatest.Start(t, "receipts test CA"), tsatest.Start(t, "another CA")
	key := testKey(1)
	rs, lines := chain(t, "acme", 6)
	anchor := func(r receipts.Receipt) receipts.Checkpoint {
		c, err := receipts.TSA{URL: tsa.URL}.Anchor(t.Context(), key.Sign(receipts.CheckpointOf(r)))
		if err != nil {
			t.Fatalf("Anchor: %v", err)
		}
		return c
	}
	c4, c6 := anchor(rs[3]), anchor(rs[5])
	if tsa.Answered() != 2 || c6.Anchor == "" {
		t.Fatalf("%d requests answered, anchor %q", tsa.Answered(), c6.Anchor)
	}
	lineOf := func(c receipts.Checkpoint) []byte {
		b, err := json.Marshal(receipts.CheckpointLine{Checkpoint: c})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	export := func(cs ...receipts.Checkpoint) [][]byte {
		out := slicesConcat(header("acme"), lines)
		for _, c := range cs {
			out = append(out, lineOf(c))
		}
		return out
	}
	trusted := receipts.VerifyOptions{Keys: keysOf(key), TSARoots: rootsOf(t, tsa)}
	tr := tenantReport(t, verifyWith(t, export(c4, c6), trusted), "acme")
	if tr.Failure != nil || tr.Anchored != 2 || tr.AnchoredAt.IsZero() {
		t.Fatalf("anchored export: %+v", tr)
	}
	if tr := tenantReport(t, verifyWith(t, export(c4, c6), receipts.VerifyOptions{Keys: keysOf(key)}), "acme"); tr.Failure != nil || tr.Anchored != 2 {
		t.Fatalf("anchored export without TSA roots: %+v", tr)
	}

	moved := c4
	moved.Anchor = c6.Anchor // a genuine token of another checkpoint
	token, _ := base64.StdEncoding.DecodeString(c6.Anchor)
	token[len(token)/2] ^= 0xff
	altered := c6
	altered.Anchor = base64.StdEncoding.EncodeToString(token)
	cases := []struct {
		name string
		c    receipts.Checkpoint
		opts receipts.VerifyOptions
	}{
		{"another TSA's roots", c6, receipts.VerifyOptions{Keys: keysOf(key), TSARoots: rootsOf(t, stranger)}},
		{"token of another checkpoint", moved, trusted},
		{"token altered", altered, trusted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tr := tenantReport(t, verifyWith(t, export(tc.c), tc.opts), "acme")
			if tr.Failure == nil || tr.Failure.Problem != receipts.ProblemBadAnchor || tr.Failure.Seq != tc.c.Seq {
				t.Fatalf("failure %+v, want bad_anchor at seq %d", tr.Failure, tc.c.Seq)
			}
		})
	}
}
