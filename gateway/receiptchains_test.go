package gateway_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/binary"
	"regexp"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/internal/tsatest"
	"github.com/toolgateway/toolgateway/tools"
)

// chainRow is a tenant's row of the console's Chains table: its count and
// its state.
func chainRow(t *testing.T, page, tenant string) string {
	t.Helper()
	m := regexp.MustCompile(`<tr><td><a href="[^"]*">` + tenant + `</a></td><td>(\d+)</td><td>(.*?)</td><td class="checkpoint">`).FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no chain row for %s:\n%s", tenant, page)
	}
	return m[1] + " " + m[2]
}

// TestConsoleShowsEachChainsVerification: the console's Receipts page
// verifies each tenant's chain in the store: intact chains say so with
// their length; a receipt edited in the store file names the broken
// tenant and the first bad seq, the other tenant staying intact; a
// receipt edited after a view verified it is caught on the next view.
func TestConsoleShowsEachChainsVerification(t *testing.T) {
	store := newStore(t, storeEmbedded)
	rs := receiptsBeside(t, store)
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("pay")}, withStore(store), withAdmin("adm"),
		func(o *callpath.Options) { o.Receipts = rs })
	ctx := context.Background()
	for i := range 5 {
		for _, tenant := range []string{"acme", "globex"} {
			if _, err := rs.Append(ctx, tenant, receipts.Receipt{Event: receipts.EventExecuted, Tool: "pay", Status: 200 + i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	c, _ := consoleBrowser(t, h, "adm")
	page := consoleGet(t, c, h.Srv.URL+"/console/receipts")
	for _, tenant := range []string{"acme", "globex"} {
		if row := chainRow(t, page, tenant); row != `5 <span class="ok">intact</span>` {
			t.Fatalf("%s before tampering: %s", tenant, row)
		}
	}

	db := store.(*boltstore.Store).DB()
	edit := func(tenant string, seq int64, from, to string) {
		t.Helper()
		err := db.Update(func(tx *bolt.Tx) error {
			b := tx.Bucket([]byte("receipts")).Bucket([]byte(tenant))
			k := binary.BigEndian.AppendUint64(nil, uint64(seq))
			return b.Put(k, []byte(strings.Replace(string(b.Get(k)), from, to, 1)))
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	edit("acme", 3, `"status":202`, `"status":500`)
	page = consoleGet(t, c, h.Srv.URL+"/console/receipts")
	if row := chainRow(t, page, "acme"); !strings.Contains(row, "broken") || !strings.Contains(row, "seq 3") {
		t.Fatalf("acme after its seq 3 was edited: %s", row)
	}
	if row := chainRow(t, page, "globex"); row != `5 <span class="ok">intact</span>` {
		t.Fatalf("globex, untouched: %s", row)
	}

	edit("globex", 5, `"status":204`, `"status":200`)
	page = consoleGet(t, c, h.Srv.URL+"/console/receipts")
	if row := chainRow(t, page, "globex"); !strings.Contains(row, "broken") || !strings.Contains(row, "seq 5") {
		t.Fatalf("globex after its verified head was edited: %s", row)
	}
}

// TestConsoleVerifiesAgainstTheLastCheckpoint: the Receipts page shows a
// chain's last signed checkpoint (seq, time, key id, anchor time, from a
// real TSA), verified with the gateway's public keys; a chain truncated
// below it afterwards is named broken, and a checkpoint forged without
// the key (signed by another) fails another chain.
func TestConsoleVerifiesAgainstTheLastCheckpoint(t *testing.T) {
	store := newStore(t, storeEmbedded)
	rs := receiptsBeside(t, store)
	key := receipts.NewSigningKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, ed25519.SeedSize)))
	keys := receipts.KeySet{}
	keys.Add(key.Public())
	h := newHarness(t, storeEmbedded, []tools.Tool{newTestTool("pay")}, withStore(store), withAdmin("adm"),
		func(o *callpath.Options) { o.Receipts, o.ReceiptKeys = rs, keys })
	ctx := context.Background()
	for i := range 5 {
		for _, tenant := range []string{"acme", "globex"} {
			if _, err := rs.Append(ctx, tenant, receipts.Receipt{Event: receipts.EventExecuted, Tool: "pay", Status: 200 + i}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tsa := tsatest.Start(t, "console test CA")
	signed, _, err := receipts.Checkpointer{Store: rs, Key: key, TSA: &receipts.TSA{URL: tsa.URL}}.Checkpoint(ctx, "acme")
	if err != nil || signed.Anchor == "" {
		t.Fatalf("anchored checkpoint: %+v, %v", signed, err)
	}
	stranger := receipts.NewSigningKey(ed25519.NewKeyFromSeed(bytes.Repeat([]byte{4}, ed25519.SeedSize)))
	if _, _, err := (receipts.Checkpointer{Store: rs, Key: stranger}).Checkpoint(ctx, "globex"); err != nil {
		t.Fatal(err)
	}
	c, _ := consoleBrowser(t, h, "adm")
	page := consoleGet(t, c, h.Srv.URL+"/console/receipts")
	if row := chainRow(t, page, "acme"); row != `5 <span class="ok">intact</span>` {
		t.Fatalf("acme, checkpointed: %s", row)
	}
	cell := regexp.MustCompile(`<td class="checkpoint">(.*?)</td>`).FindAllStringSubmatch(page, -1)
	if len(cell) != 2 || !strings.Contains(cell[0][1], "seq 5, ") || !strings.Contains(cell[0][1], signed.KeyID) || !strings.Contains(cell[0][1], ", anchored ") {
		t.Fatalf("acme's checkpoint cell: %v", cell)
	}
	if row := chainRow(t, page, "globex"); !strings.Contains(row, "broken") || !strings.Contains(row, "unknown_key") {
		t.Fatalf("globex, checkpointed by a key the gateway does not publish: %s", row)
	}
	db := store.(*boltstore.Store).DB()
	err = db.Update(func(tx *bolt.Tx) error { // the newest two receipts removed, as a truncation
		b := tx.Bucket([]byte("receipts")).Bucket([]byte("acme"))
		for _, seq := range []uint64{4, 5} {
			if err := b.Delete(binary.BigEndian.AppendUint64(nil, seq)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	page = consoleGet(t, c, h.Srv.URL+"/console/receipts")
	if row := chainRow(t, page, "acme"); !strings.Contains(row, "broken") || !strings.Contains(row, "truncated") {
		t.Fatalf("acme truncated below its checkpoint: %s", row)
	}
}
