package receiptstest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/internal/tsatest"
)

// The checkpoint cases: an attacker with write access to the store (and
// without the signing key) tampers with a checkpointed chain the way the
// store lets them, with the backend's own commands (Raw); an export of
// the store, verified with the public key, names the tenant and the seq.
func checkpointCases() []testCase {
	return []testCase{
		{"CheckpointsRoundTrip", checkpointsRoundTrip},
		{"CheckpointAnchoredRoundTrip", checkpointAnchored},
		{"CheckpointUnanchoredWhileTheTSAIsDown", checkpointUnanchored},
		{"CheckpointsExpireWithTheirReceipts", checkpointsExpire},
		{"TamperTailTruncatedBelowACheckpoint", tamperTailTruncated},
		{"TamperHeadRolledBackAndContinued", tamperHeadRolledBack},
		{"TamperResealedWithoutTheKey", tamperResealed},
		{"TamperPastDatedAppend", tamperPastDated},
		{"TamperListingRemoved", tamperUnlisted},
		{"TamperForkedCheckpoint", tamperForked},
		{"TamperCheckpointForged", tamperCheckpointForged},
		{"TamperOldestDeletedAsIfExpired", tamperDeletedAsExpired},
		{"TamperForeignReceiptSpliced", tamperForeignSpliced},
		{"TamperChainDeletedCheckpointsKept", tamperChainDeleted},
	}
}

// signingKey is the deployment's key in these cases (a fixed seed).
var signingKey = receipts.NewSigningKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{7}, ed25519.SeedSize)))

// publicKeys are what the verifier is given.
func publicKeys() receipts.KeySet {
	ks := receipts.KeySet{}
	ks.Add(signingKey.Public())
	return ks
}

// checkpointed appends 6 receipts to acme and 3 to the bystander, each
// chain checkpointed at its head by the gateway; it returns acme's.
func checkpointed(t *testing.T, b Backend) []receipts.Receipt {
	t.Helper()
	var chain []receipts.Receipt
	for i, line := range tamperChain(t, b) {
		r, err := receipts.Decode(line)
		if err != nil {
			t.Fatalf("receipt %d: %v", i, err)
		}
		chain = append(chain, r)
	}
	for _, tenant := range []string{"acme", "bystander"} {
		mustCheckpoint(t, b.Replicas[0], tenant)
	}
	return chain
}

func mustCheckpoint(t *testing.T, s receipts.Store, tenant string) receipts.Checkpoint {
	t.Helper()
	c, _, err := receipts.Checkpointer{Store: s, Key: signingKey}.Checkpoint(t.Context(), tenant)
	if err != nil {
		t.Fatalf("checkpoint %s: %v", tenant, err)
	}
	return c
}

// verifyExport exports s and verifies the export with the public key.
func verifyExport(t *testing.T, s receipts.Store) receipts.Report {
	t.Helper()
	var buf bytes.Buffer
	if err := receipts.Export(t.Context(), s, &buf); err != nil {
		t.Fatalf("Export: %v", err)
	}
	rep, err := receipts.VerifyWith(&buf, receipts.VerifyOptions{Keys: publicKeys()})
	if err != nil {
		t.Fatalf("VerifyWith: %v", err)
	}
	return rep
}

// wantCaught expects acme's chain to fail with problem at seq, and the
// bystander's, checkpointed too, to pass.
func wantCaught(t *testing.T, b Backend, problem receipts.Problem, seq int64) {
	t.Helper()
	rep := verifyExport(t, b.Replicas[1])
	tr := tenantReport(t, rep, "acme")
	if tr.Failure == nil || tr.Failure.Problem != problem || tr.Failure.Seq != seq {
		t.Fatalf("acme: failure %+v, want %s at seq %d (report %+v)", tr.Failure, problem, seq, tr)
	}
	if by := tenantReport(t, rep, "bystander"); by.Failure != nil || by.Checked != 3 || by.Checkpoints != 1 {
		t.Fatalf("bystander: %+v", by)
	}
}

// encode is r's stored line.
func encode(t *testing.T, r receipts.Receipt) []byte {
	t.Helper()
	line, err := receipts.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	return line
}

func checkpointsRoundTrip(t *testing.T, b Backend) {
	chain := checkpointed(t, b)
	got, err := b.Replicas[1].Checkpoints(t.Context(), "acme")
	if err != nil || len(got) != 1 {
		t.Fatalf("Checkpoints = %+v, %v", got, err)
	}
	if c := got[0]; c.Seq != 6 || c.Hash != chain[5].Hash || !c.Time.Equal(chain[5].Time) || publicKeys().Check(c) != nil {
		t.Fatalf("checkpoint %+v of head %+v", c, chain[5])
	}
	// The head is checkpointed already: nothing new to sign.
	if _, made, err := (receipts.Checkpointer{Store: b.Replicas[1], Key: signingKey}).Checkpoint(t.Context(), "acme"); made || err != nil {
		t.Fatalf("second checkpoint of one head: made %v, %v", made, err)
	}
	index, err := b.Replicas[1].CheckpointTenants(t.Context())
	if err != nil || len(index) != 2 || index[0] != "acme" || index[1] != "bystander" {
		t.Fatalf("checkpoint index %v, %v", index, err)
	}
	rep := verifyExport(t, b.Replicas[1])
	if tr := tenantReport(t, rep, "acme"); !rep.OK() || tr.Checked != 6 || tr.Checkpointed != 6 {
		t.Fatalf("untouched: %+v", rep)
	}
}

// checkpointAnchored: a checkpoint anchored by a real RFC 3161 TSA
// (OpenSSL's) is stored and exported with its token, which verifies
// against the TSA's CA.
func checkpointAnchored(t *testing.T, b Backend) {
	tsa := tsatest.Start(t, "receiptstest CA")
	tamperChain(t, b)
	cp := receipts.Checkpointer{Store: b.Replicas[0], Key: signingKey, TSA: &receipts.TSA{URL: tsa.URL}}
	if _, made, err := cp.Checkpoint(t.Context(), "acme"); !made || err != nil {
		t.Fatalf("anchored checkpoint: %v %v", made, err)
	}
	var buf bytes.Buffer
	if err := receipts.Export(t.Context(), b.Replicas[1], &buf); err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(tsa.RootsFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	rep, err := receipts.VerifyWith(&buf, receipts.VerifyOptions{Keys: publicKeys(), TSARoots: roots})
	if err != nil {
		t.Fatal(err)
	}
	if tr := tenantReport(t, rep, "acme"); !rep.OK() || tr.Anchored != 1 || tr.Checkpointed != 6 || tsa.Answered() != 1 {
		t.Fatalf("anchored chain: %+v (TSA answered %d)", tr, tsa.Answered())
	}
}

// checkpointUnanchored: a checkpoint signed while the TSA is down (a
// port nothing listens on) is stored without its anchor, and the
// checkpointer says so; verify counts it beside the anchored one, and
// fails the chain on it when anchors are required.
func checkpointUnanchored(t *testing.T, b Backend) {
	tsa := tsatest.Start(t, "receiptstest CA")
	tamperChain(t, b)
	up := receipts.Checkpointer{Store: b.Replicas[0], Key: signingKey, TSA: &receipts.TSA{URL: tsa.URL}}
	if _, made, err := up.Checkpoint(t.Context(), "acme"); !made || err != nil {
		t.Fatalf("anchored checkpoint: %v %v", made, err)
	}
	mustAppend(t, b.Replicas[0], "acme", event(90, "refund", receipts.EventExecuted, time.Now()))
	down := receipts.Checkpointer{Store: b.Replicas[0], Key: signingKey, TSA: &receipts.TSA{URL: "http://127.0.0.1:1/"}}
	if c, made, err := down.Checkpoint(t.Context(), "acme"); !made || err == nil || c.Anchor != "" || c.Seq != 7 {
		t.Fatalf("checkpoint with the TSA down: seq %d anchor %q, made %v, %v; want stored unanchored and an error", c.Seq, c.Anchor, made, err)
	}
	var buf bytes.Buffer
	if err := receipts.Export(t.Context(), b.Replicas[1], &buf); err != nil {
		t.Fatal(err)
	}
	export := buf.Bytes()
	rep, err := receipts.VerifyWith(bytes.NewReader(export), receipts.VerifyOptions{Keys: publicKeys()})
	if err != nil {
		t.Fatal(err)
	}
	if tr := tenantReport(t, rep, "acme"); !rep.OK() || tr.Anchored != 1 || tr.Unanchored != 1 || tr.UnanchoredLast != 7 || tr.Checkpointed != 7 {
		t.Fatalf("chain with an unanchored checkpoint: %+v", tr)
	}
	rep, err = receipts.VerifyWith(bytes.NewReader(export), receipts.VerifyOptions{Keys: publicKeys(), RequireAnchors: true})
	if err != nil {
		t.Fatal(err)
	}
	if tr := tenantReport(t, rep, "acme"); tr.Failure == nil || tr.Failure.Problem != receipts.ProblemUnanchored || tr.Failure.Seq != 7 {
		t.Fatalf("anchors required: %+v, want unanchored at seq 7", tr.Failure)
	}
}

// checkpointsExpire: expiry removes the checkpoints of expired receipts
// but the last expired one's (it vouches for the kept chain's anchor);
// the kept chain verifies, its expiry not contradicted.
func checkpointsExpire(t *testing.T, b Backend) {
	s := b.Replicas[0]
	now := time.Now()
	old := now.Add(-receipts.DefaultRetention - time.Hour)
	for i := range 7 {
		at := old
		if i >= 4 {
			at = now
		}
		mustAppend(t, s, "acme", event(i, "refund", receipts.EventExecuted, at))
		mustCheckpoint(t, s, "acme")
	}
	if n, err := s.Expire(t.Context(), now.Add(-receipts.DefaultRetention)); err != nil || n != 4 {
		t.Fatalf("Expire = %d, %v; want 4", n, err)
	}
	kept, err := b.Replicas[1].Checkpoints(t.Context(), "acme")
	if err != nil || len(kept) != 4 || kept[0].Seq != 4 {
		t.Fatalf("checkpoints after expiry: %+v %v, want seq 4…7", kept, err)
	}
	rep := verifyExport(t, b.Replicas[1])
	if tr := tenantReport(t, rep, "acme"); !rep.OK() || tr.First != 5 || tr.Checkpoints != 4 {
		t.Fatalf("after expiry: %+v", tr)
	}
}

// tamperTailTruncated: the newest receipts deleted and the head moved
// back to match, so the chain itself is whole.
func tamperTailTruncated(t *testing.T, b Backend) {
	chain := checkpointed(t, b)
	b.Raw.Delete(t, "acme", 6)
	b.Raw.Delete(t, "acme", 5)
	b.Raw.SetHead(t, "acme", receipts.HeadOf(chain[3]))
	wantCaught(t, b, receipts.ProblemTruncated, 5)
}

// tamperHeadRolledBack: truncated and rolled back, then the gateway (a
// restarted one) continues the chain from the old head: seq 4–6 exist
// again, other receipts. The checkpointer refuses to sign it.
func tamperHeadRolledBack(t *testing.T, b Backend) {
	chain := checkpointed(t, b)
	for seq := int64(6); seq > 3; seq-- {
		b.Raw.Delete(t, "acme", seq)
	}
	b.Raw.SetHead(t, "acme", receipts.HeadOf(chain[2]))
	restarted := b.Open(t)
	for i := range 3 {
		mustAppend(t, restarted, "acme", event(100+i, "refund", receipts.EventDenied, time.Now()))
	}
	_, _, err := receipts.Checkpointer{Store: restarted, Key: signingKey}.Checkpoint(t.Context(), "acme")
	if !errors.Is(err, receipts.ErrChainDiverged) {
		t.Fatalf("checkpoint of the rolled back chain: %v, want ErrChainDiverged", err)
	}
	wantCaught(t, b, receipts.ProblemRewritten, 6)
}

// tamperResealed: seq 3 edited, it and every later receipt sealed again
// (SHA-256 needs no key) and the head moved to the new last one.
func tamperResealed(t *testing.T, b Backend) {
	chain := checkpointed(t, b)
	prev := chain[1]
	for _, r := range chain[2:] {
		if r.Seq == 3 {
			r.Status = 500
		}
		r = receipts.Seal(&prev, r)
		b.Raw.Put(t, "acme", r.Seq, encode(t, r))
		prev = r
	}
	b.Raw.SetHead(t, "acme", receipts.HeadOf(prev))
	wantCaught(t, b, receipts.ProblemRewritten, 6)
}

// tamperPastDated: a receipt appended after the head, properly sealed,
// dated a day before its predecessor.
func tamperPastDated(t *testing.T, b Backend) {
	chain := checkpointed(t, b)
	past := event(50, "refund", receipts.EventExecuted, chain[5].Time.Add(-24*time.Hour))
	past.Tenant = "acme"
	r := receipts.Seal(&chain[5], past)
	b.Raw.Put(t, "acme", r.Seq, encode(t, r))
	b.Raw.SetHead(t, "acme", receipts.HeadOf(r))
	wantCaught(t, b, receipts.ProblemBackdated, 7)
}

// tamperUnlisted: the tenant's listing removed. The checkpoint index
// still names it, so the export holds the chain; a restarted gateway
// continues it (never from seq 1 again).
func tamperUnlisted(t *testing.T, b Backend) {
	chain := checkpointed(t, b)
	b.Raw.Unlist(t, "acme")
	rep := verifyExport(t, b.Replicas[1])
	if tr := tenantReport(t, rep, "acme"); !rep.OK() || tr.Checked != 6 || tr.Checkpointed != 6 {
		t.Fatalf("unlisted chain: %+v", rep)
	}
	next := mustAppend(t, b.Open(t), "acme", event(60, "refund", receipts.EventDenied, time.Now()))
	if next.Seq != 7 || next.Prev != chain[5].Hash {
		t.Fatalf("after the listing was removed: seq %d prev %s, want 7 after seq 6", next.Seq, next.Prev)
	}
	mustCheckpoint(t, b.Open(t), "acme")
	rep = verifyExport(t, b.Replicas[1])
	if tr := tenantReport(t, rep, "acme"); !rep.OK() || tr.Checked != 7 || tr.Checkpointed != 7 {
		t.Fatalf("continued chain: %+v", rep)
	}
}

// tamperForked: a second checkpoint for seq 6, signed by the same key
// over another chain (a twin deployment sharing the key, or a key that
// signed a rolled back chain), copied into the store.
func tamperForked(t *testing.T, b Backend) {
	chain := checkpointed(t, b)
	other := event(70, "refund", receipts.EventDenied, chain[5].Time)
	other.Tenant = "acme"
	twin := receipts.Seal(&chain[4], other)
	c := signingKey.Sign(receipts.CheckpointOf(twin))
	b.Raw.PutCheckpoint(t, c)
	wantCaught(t, b, receipts.ProblemFork, 6)
}

// tamperCheckpointForged: a checkpoint written without the key: a signed
// one copied with its hash changed (to match a re-sealed chain); its
// signature no longer verifies.
func tamperCheckpointForged(t *testing.T, b Backend) {
	chain := checkpointed(t, b)
	c := signingKey.Sign(receipts.CheckpointOf(chain[3]))
	c.Hash = chain[2].Hash
	b.Raw.PutCheckpoint(t, c)
	wantCaught(t, b, receipts.ProblemBadSignature, 4)
	// A forged checkpoint above the chain: the gateway signs nothing after it.
	forged := signingKey.Sign(receipts.CheckpointOf(chain[5]))
	forged.Seq = 1000
	b.Raw.PutCheckpoint(t, forged)
	mustAppend(t, b.Replicas[0], "acme", event(80, "refund", receipts.EventDenied, time.Now()))
	_, _, err := receipts.Checkpointer{Store: b.Replicas[0], Key: signingKey}.Checkpoint(t.Context(), "acme")
	if !errors.Is(err, receipts.ErrChainDiverged) || !strings.Contains(err.Error(), "signature does not verify") {
		t.Fatalf("checkpoint after a forged one: %v", err)
	}
}

// tamperDeletedAsExpired: the oldest receipts deleted, so the chain starts
// later as if they had expired; a checkpoint dates them minutes ago.
func tamperDeletedAsExpired(t *testing.T, b Backend) {
	chain := checkpointed(t, b)
	b.Raw.PutCheckpoint(t, signingKey.Sign(receipts.CheckpointOf(chain[1]))) // the gateway checkpointed seq 2 earlier
	for seq := int64(1); seq <= 3; seq++ {
		b.Raw.Delete(t, "acme", seq)
	}
	wantCaught(t, b, receipts.ProblemNotExpired, 2)
}

// tamperForeignSpliced: the bystander's seq 3, a receipt valid in its own
// chain, stored in place of acme's seq 3: reported on acme.
func tamperForeignSpliced(t *testing.T, b Backend) {
	checkpointed(t, b)
	page, _, err := b.Replicas[0].List(t.Context(), receipts.Filter{Tenant: "bystander", After: 2, Limit: 1})
	if err != nil || len(page) != 1 {
		t.Fatalf("bystander's seq 3: %v %v", page, err)
	}
	b.Raw.Put(t, "acme", 3, encode(t, page[0]))
	rep := verifyExport(t, b.Replicas[1])
	tr := tenantReport(t, rep, "acme")
	if tr.Failure == nil || tr.Failure.Problem != receipts.ProblemForeign || tr.Failure.Seq != 3 || tr.Failure.Tenant != "bystander" {
		t.Fatalf("acme: failure %+v, want foreign at seq 3", tr.Failure)
	}
	if len(rep.Tenants) != 2 {
		t.Fatalf("chains %+v: want acme and bystander only", rep.Tenants)
	}
}

// tamperChainDeleted: every receipt of the chain, its head and its listing
// deleted; its checkpoints remain.
func tamperChainDeleted(t *testing.T, b Backend) {
	checkpointed(t, b)
	for seq := int64(1); seq <= 6; seq++ {
		b.Raw.Delete(t, "acme", seq)
	}
	b.Raw.SetHead(t, "acme", receipts.Head{})
	b.Raw.Unlist(t, "acme")
	wantCaught(t, b, receipts.ProblemMissingChain, 6)
}
