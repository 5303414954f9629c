package receipts_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

// testKey is a fixed signing key (a test's own, from a seed).
func testKey(seed byte) *receipts.SigningKey {
	return receipts.NewSigningKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
}

func keysOf(ks ...*receipts.SigningKey) receipts.KeySet {
	set := receipts.KeySet{}
	for _, k := range ks {
		set.Add(k.Public())
	}
	return set
}

// checkpointLine is the export line of k's checkpoint of r.
func checkpointLine(t *testing.T, k *receipts.SigningKey, r receipts.Receipt) []byte {
	t.Helper()
	line, err := json.Marshal(receipts.CheckpointLine{Checkpoint: k.Sign(receipts.CheckpointOf(r))})
	if err != nil {
		t.Fatal(err)
	}
	return line
}

func header(tenant string) []byte { return []byte(`{"chain":"` + tenant + `"}`) }

// verifyWith verifies lines with opts; now defaults to a day after sample's
// receipts (well within the default retention).
func verifyWith(t *testing.T, lines [][]byte, opts receipts.VerifyOptions) receipts.Report {
	t.Helper()
	if opts.Now.IsZero() {
		opts.Now = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	}
	rep, err := receipts.VerifyWith(bytes.NewReader(append(bytes.Join(lines, []byte("\n")), '\n')), opts)
	if err != nil {
		t.Fatalf("VerifyWith: %v", err)
	}
	return rep
}

// TestKeyIDIsTheRFC7638Thumbprint checks KeyID against RFC 8037's example
// key (appendix A.3).
func TestKeyIDIsTheRFC7638Thumbprint(t *testing.T) {
	set, err := receipts.ParseJWKS([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := set["kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"]; !ok {
		t.Fatalf("key ids %v, want RFC 8037's kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k", set)
	}
	again, err := receipts.ParseJWKS(set.JWKS())
	if err != nil || len(again) != 1 {
		t.Fatalf("JWKS round trip: %v %v", again, err)
	}
	if _, err := receipts.ParseJWKS([]byte(`{"keys":[{"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo","kid":"other"}]}`)); err == nil {
		t.Error("a kid that is not the thumbprint was accepted")
	}
}

// TestSigningKeyFromOpenSSL reads a key as `openssl genpkey -algorithm
// ed25519` writes it, and its public half as `openssl pkey -pubout` does.
func TestSigningKeyFromOpenSSL(t *testing.T) {
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "key.pem"), filepath.Join(dir, "pub.pem")
	for _, args := range [][]string{
		{"genpkey", "-algorithm", "ed25519", "-out", priv},
		{"pkey", "-in", priv, "-pubout", "-out", pub},
	} {
		if out, err := exec.CommandContext(t.Context(), "openssl", args...).CombinedOutput(); err != nil {
			t.Fatalf("openssl %v: %v\n%s", args, err, out)
		}
	}
	privPEM, _ := os.ReadFile(priv)
	pubPEM, _ := os.ReadFile(pub)
	key, err := receipts.ParseSigningKey(privPEM)
	if err != nil {
		t.Fatal(err)
	}
	public, err := receipts.ParsePublicKey(pubPEM)
	if err != nil {
		t.Fatal(err)
	}
	if !public.Equal(key.Public()) || receipts.KeyID(public) != key.ID() {
		t.Fatal("the public key openssl wrote is not the signing key's")
	}
	if _, err := receipts.ParseSigningKey(pubPEM); err == nil {
		t.Error("a public key was accepted as the signing key")
	}
}

func TestVerifyChecksCheckpoints(t *testing.T) {
	key, old, stranger := testKey(1), testKey(2), testKey(3)
	rs, lines := chain(t, "acme", 6)
	whole := [][]byte{header("acme")}
	whole = append(whole, lines...)
	whole = append(whole, checkpointLine(t, old, rs[1]), checkpointLine(t, key, rs[3]))
	rep := verifyWith(t, whole, receipts.VerifyOptions{Keys: keysOf(key, old)})
	tr := tenantReport(t, rep, "acme")
	if !rep.OK() || tr.Checkpoints != 2 || tr.Checkpointed != 4 || tr.Checked != 6 {
		t.Fatalf("whole chain: %+v", tr)
	}

	// A re-sealed chain: seq 3 edited, then it and every later receipt
	// sealed again without the key.
	resealed := [][]byte{header("acme"), lines[0], lines[1]}
	prev := rs[1]
	for _, r := range rs[2:] {
		if r.Seq == 3 {
			r.Status = 500
		}
		r = receipts.Seal(&prev, r)
		line, _ := receipts.Encode(r)
		resealed, prev = append(resealed, line), r
	}
	resealed = append(resealed, checkpointLine(t, key, rs[3]))

	forged := key.Sign(receipts.CheckpointOf(rs[5]))
	forged.Seq = 5
	forgedLine, _ := json.Marshal(receipts.CheckpointLine{Checkpoint: forged})
	forked := receipts.CheckpointOf(rs[3])
	forked.Hash = rs[2].Hash
	forkedLine, _ := json.Marshal(receipts.CheckpointLine{Checkpoint: key.Sign(forked)})

	backdated := rs[5]
	backdated.Time = rs[4].Time.Add(-time.Second)
	backdated = receipts.Seal(&rs[4], backdated)
	backdatedLine, _ := receipts.Encode(backdated)

	other, otherLines := chain(t, "other", 3)
	_ = other

	cases := []struct {
		name  string
		lines [][]byte
		want  receipts.Problem
		seq   int64
	}{
		{"tail truncated below a checkpoint", [][]byte{header("acme"), lines[0], lines[1], lines[2], checkpointLine(t, key, rs[4])}, receipts.ProblemTruncated, 4},
		{"re-sealed without the key", resealed, receipts.ProblemRewritten, 4},
		{"signature of another seq", append(slicesConcat(header("acme"), lines), forgedLine), receipts.ProblemBadSignature, 5},
		{"signed by a stranger", append(slicesConcat(header("acme"), lines), checkpointLine(t, stranger, rs[5])), receipts.ProblemUnknownKey, 6},
		{"fork", append(slicesConcat(header("acme"), lines[:3]), checkpointLine(t, key, rs[3]), forkedLine), receipts.ProblemFork, 4},
		{"past-dated append", append(slicesConcat(header("acme"), lines[:5]), backdatedLine), receipts.ProblemBackdated, 6},
		{"first receipts deleted, not expired", append(slicesConcat(header("acme"), lines[3:]), checkpointLine(t, key, rs[1])), receipts.ProblemNotExpired, 2},
		{"chain gone, checkpoint young", [][]byte{header("acme"), checkpointLine(t, key, rs[5])}, receipts.ProblemMissingChain, 6},
		{"foreign receipt spliced in", slicesConcat(header("acme"), lines[:2], otherLines[2:3], lines[2:]), receipts.ProblemForeign, 3},
		{"foreign checkpoint spliced in", append(slicesConcat(header("acme"), lines), checkpointLine(t, key, other[2])), receipts.ProblemForeign, 3},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rep := verifyWith(t, tc.lines, receipts.VerifyOptions{Keys: keysOf(key, old)})
			tr := tenantReport(t, rep, "acme")
			if rep.OK() || tr.Failure == nil || tr.Failure.Problem != tc.want || tr.Failure.Seq != tc.seq {
				t.Fatalf("failure %+v, want %s at seq %d", tr.Failure, tc.want, tc.seq)
			}
			if len(rep.Tenants) != 1 {
				t.Errorf("tenants %+v: want acme's chain alone (no phantom chain)", rep.Tenants)
			}
			if msg := tr.Failure.String(); !strings.HasPrefix(msg, string(tc.want)+": ") {
				t.Errorf("message %q", msg)
			}
		})
	}
}

func slicesConcat(first []byte, rest ...[][]byte) [][]byte {
	out := [][]byte{first}
	for _, r := range rest {
		out = append(out, r...)
	}
	return out
}

func TestVerifyAcceptsExpiryTheCheckpointsAgreeWith(t *testing.T) {
	key := testKey(1)
	rs, lines := chain(t, "acme", 6)
	in := append(slicesConcat(header("acme"), lines[3:]), checkpointLine(t, key, rs[1]), checkpointLine(t, key, rs[2]))
	opts := receipts.VerifyOptions{Keys: keysOf(key), Now: rs[5].Time.Add(receipts.DefaultRetention + time.Hour)}
	tr := tenantReport(t, verifyWith(t, in, opts), "acme")
	if tr.Failure != nil || tr.First != 4 || tr.Checkpoints != 2 {
		t.Fatalf("expired receipts with old checkpoints: %+v", tr)
	}
	// The checkpoint of seq 3 must match the anchor (seq 4's prev).
	wrong := receipts.CheckpointOf(rs[2])
	wrong.Hash = rs[1].Hash
	wrongLine, _ := json.Marshal(receipts.CheckpointLine{Checkpoint: key.Sign(wrong)})
	tr = tenantReport(t, verifyWith(t, append(slicesConcat(header("acme"), lines[3:]), wrongLine), opts), "acme")
	if tr.Failure == nil || tr.Failure.Problem != receipts.ProblemRewritten || tr.Failure.Seq != 4 {
		t.Fatalf("anchor against its checkpoint: %+v", tr.Failure)
	}
	// A filtered export leaves receipts out: no truncation, no expiry claim.
	filtered := append([][]byte{[]byte(`{"chain":"acme","filtered":true}`)}, lines[2:4]...)
	filtered = append(filtered, checkpointLine(t, key, rs[0]), checkpointLine(t, key, rs[5]))
	if tr := tenantReport(t, verifyWith(t, filtered, receipts.VerifyOptions{Keys: keysOf(key)}), "acme"); tr.Failure != nil || !tr.Filtered {
		t.Fatalf("filtered export: %+v", tr)
	}
}

func TestVerifyIsStrict(t *testing.T) {
	_, lines := chain(t, "acme", 2)
	line := string(lines[1])
	cases := map[string]string{
		"duplicate member":          strings.Replace(line, `"status":201`, `"status":201,"status":500`, 1),
		"members differing by case": strings.Replace(line, `"status":201`, `"status":201,"Status":500`, 1),
		"member of another case":    strings.Replace(line, `"status":`, `"Status":`, 1),
		"unknown member":            strings.Replace(line, `"status":201`, `"status":201,"remark":"x"`, 1),
		"non-canonical number":      strings.Replace(line, `"status":201`, `"status":201.0`, 1),
		"exponent":                  strings.Replace(line, `"seq":2`, `"seq":2e0`, 1),
		"leading zero":              strings.Replace(line, `"seq":2`, `"seq":02`, 1),
		"wrong type":                strings.Replace(line, `"seq":2`, `"seq":"2"`, 1),
		"checkpoint unknown member": `{"checkpoint":{"tenant":"acme","seq":1,"hash":"x","time":"2026-01-01T00:00:00Z","key_id":"k","sig":"s","x":1}}`,
		"header unknown member":     `{"chain":"acme","since":"x"}`,
	}
	for name, bad := range cases {
		t.Run(name, func(t *testing.T) {
			if bad == line {
				t.Fatal("the case changed nothing")
			}
			_, err := receipts.Verify(strings.NewReader(string(lines[0]) + "\n" + bad + "\n"))
			if err == nil || !strings.Contains(err.Error(), "line 2") {
				t.Fatalf("error %v, want one naming line 2", err)
			}
		})
	}
}

// TestVerifyReadsExportsOfBeforeCheckpoints: receipts alone, no header.
func TestVerifyReadsExportsOfBeforeCheckpoints(t *testing.T) {
	_, lines := chain(t, "acme", 4)
	if rep := verify(t, lines); !rep.OK() || tenantReport(t, rep, "acme").Checked != 4 {
		t.Fatalf("report %+v", rep)
	}
}

// TestVerifyWithCheckpointsKeptOutside: the store's checkpoints deleted
// with what they covered; the copy kept outside still catches it.
func TestVerifyWithCheckpointsKeptOutside(t *testing.T) {
	key := testKey(1)
	rs, lines := chain(t, "acme", 6)
	earlier := append(slicesConcat(header("acme"), lines), checkpointLine(t, key, rs[5]))
	outside, err := receipts.ReadCheckpoints(bytes.NewReader(bytes.Join(earlier, []byte("\n"))))
	if err != nil || len(outside) != 1 {
		t.Fatalf("ReadCheckpoints: %v %v", outside, err)
	}
	opts := receipts.VerifyOptions{Keys: keysOf(key), Outside: outside}
	truncated := slicesConcat(header("acme"), lines[:4]) // and its checkpoint gone
	tr := tenantReport(t, verifyWith(t, truncated, opts), "acme")
	if tr.Failure == nil || tr.Failure.Problem != receipts.ProblemTruncated || tr.Failure.Seq != 5 || !strings.Contains(tr.Failure.String(), "kept outside") {
		t.Fatalf("truncated, checkpoints deleted: %+v", tr.Failure)
	}
	tr = tenantReport(t, verifyWith(t, nil, opts), "acme")
	if tr.Failure == nil || tr.Failure.Problem != receipts.ProblemMissingChain {
		t.Fatalf("chain and checkpoints deleted: %+v", tr.Failure)
	}
}
