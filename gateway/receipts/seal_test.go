package receipts_test

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/toolgateway/toolgateway/gateway/receipts"
)

func sample(i int) receipts.Receipt {
	return receipts.Receipt{
		Time:   time.Date(2026, 12, 4, 10, 0, i, 123456789, time.FixedZone("CET", 3600)),
		Tenant: "acme", Event: receipts.EventExecuted, Tool: "refund",
		Key: receipts.KeyHash("key-" + strings.Repeat("x", i)), Status: 201,
		ExecutionID: "01JEXAMPLE",
	}
}

func TestSealChainsReceipts(t *testing.T) {
	first := receipts.Seal(nil, sample(1))
	if first.Seq != 1 || first.Prev != "" {
		t.Fatalf("first: seq %d prev %q, want 1 and empty", first.Seq, first.Prev)
	}
	second := receipts.Seal(&first, sample(2))
	if second.Seq != 2 || second.Prev != first.Hash {
		t.Fatalf("second: seq %d prev %q, want 2 and %q", second.Seq, second.Prev, first.Hash)
	}
	if first.Time.Location() != time.UTC {
		t.Errorf("time not in UTC: %v", first.Time)
	}
	for _, r := range []receipts.Receipt{first, second} {
		if !receipts.Valid(r) {
			t.Errorf("seq %d: Valid false on a sealed receipt", r.Seq)
		}
	}
}

// The hash is the SHA-256 of the JCS of the receipt's JSON without hash,
// computed here independently of Seal from the exported line.
func TestSealHashIsSHA256OfJCSWithoutHash(t *testing.T) {
	r := receipts.Seal(nil, sample(3))
	line, err := receipts.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	without := strings.Replace(string(line), `,"hash":"`+r.Hash+`"`, "", 1)
	if without == string(line) {
		t.Fatalf("hash member not found in %s", line)
	}
	canonical, err := jcs.Transform([]byte(without))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(canonical)
	if got := hex.EncodeToString(sum[:]); got != r.Hash {
		t.Errorf("hash %s, want %s", r.Hash, got)
	}
}

func TestEncodeOmitsEmptyOptionalMembers(t *testing.T) {
	r := receipts.Seal(nil, receipts.Receipt{Time: time.Unix(0, 0), Tenant: "t", Event: receipts.EventDeleted})
	line, err := receipts.Encode(r)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"seq":1,"time":"1970-01-01T00:00:00Z","tenant":"t","event":"deleted","prev":"","hash":"` + r.Hash + `"}`
	if string(line) != want {
		t.Errorf("line\n%s\nwant\n%s", line, want)
	}
}

func TestValidDetectsAnyChange(t *testing.T) {
	r := receipts.Seal(nil, sample(4))
	edits := map[string]func(*receipts.Receipt){
		"status":    func(r *receipts.Receipt) { r.Status = 200 },
		"time":      func(r *receipts.Receipt) { r.Time = r.Time.Add(time.Nanosecond) },
		"by":        func(r *receipts.Receipt) { r.By = "mallory" },
		"requester": func(r *receipts.Receipt) { r.Requester = "token:mallory" },
		"note":      func(r *receipts.Receipt) { r.Note = "fine" },
		"seq":       func(r *receipts.Receipt) { r.Seq++ },
		"prev":      func(r *receipts.Receipt) { r.Prev = "00" },
	}
	for name, edit := range edits {
		changed := r
		edit(&changed)
		if receipts.Valid(changed) {
			t.Errorf("%s edited: still valid", name)
		}
	}
}

func TestKeyHashIsNotTheKey(t *testing.T) {
	h := receipts.KeyHash("secret-idempotency-key")
	if len(h) != 64 || strings.Contains(h, "secret") {
		t.Errorf("KeyHash = %q", h)
	}
}
