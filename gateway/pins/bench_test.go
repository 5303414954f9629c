package pins_test

import (
	"testing"

	"github.com/toolgateway/toolgateway/gateway/pins"
)

// benchTool is an upstream tool's definition as a server lists it.
const benchTool = `{"name":"refund","title":"Refund","description":"Refunds an order, in full or in part.",
"inputSchema":{"type":"object","properties":{"order":{"type":"string"},"amount":{"type":"integer","minimum":0},"currency":{"type":"string","enum":["EUR","USD"]}},"required":["order","amount"]},
"annotations":{"destructiveHint":true,"idempotentHint":false},"_meta":{"x":1}}`

// BenchmarkDefinitionHash is what pinning costs per tool and listing
// (first listing, every relist_interval and every list_changed): the
// definition's pinned members in JCS and their SHA-256. A call pays
// nothing: a held tool is swapped out at listing time. The store read
// that follows is redisstore's BenchmarkPinCheck.
func BenchmarkDefinitionHash(b *testing.B) {
	raw := []byte(benchTool)
	b.ReportAllocs()
	for b.Loop() {
		c, err := pins.Canonical(raw)
		if err != nil {
			b.Fatal(err)
		}
		if pins.Hash(c) == "" {
			b.Fatal("no hash")
		}
	}
}
