package redisstore

import (
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/pins"
)

// BenchmarkPinCheck is the steady state of pinning a listed tool whose
// pin is stored and matches: pins.Check reads the pin (one round trip)
// and writes nothing. It runs per tool and listing, never per call.
func BenchmarkPinCheck(b *testing.B) {
	client := testClient(b)
	counter := &roundTrips{}
	client.AddHook(counter)
	store := New(client, Options{Prefix: uniquePrefix(b, client)})
	current := pins.Pin{Tool: "up-refund", SHA256: pins.Hash([]byte(`{"name":"refund"}`)), Definition: []byte(`{"name":"refund"}`)}
	ctx := b.Context()
	if v, err := pins.Check(ctx, store, current, "", time.Now()); err != nil || !v.Recorded {
		b.Fatalf("first use: %+v, %v", v, err)
	}
	counter.n.Store(0)
	b.ReportAllocs()
	for b.Loop() {
		if v, err := pins.Check(ctx, store, current, "", time.Now()); err != nil || v.Held || v.Recorded {
			b.Fatalf("steady state: %+v, %v", v, err)
		}
	}
	b.ReportMetric(float64(counter.n.Load())/float64(b.N), "roundtrips/op")
}
