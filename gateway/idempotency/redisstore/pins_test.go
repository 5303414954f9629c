package redisstore

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/storetest"
)

// TestPins: the pins survive a new client and store on the same prefix (a
// gateway restart).
func TestPins(t *testing.T) {
	client := testClient(t)
	storetest.RunPins(t, func(t *testing.T) (idempotency.Store, func() idempotency.Store) {
		prefix := uniquePrefix(t, client)
		return New(client, Options{Prefix: prefix}), func() idempotency.Store {
			again := testClient(t)
			return New(again, Options{Prefix: prefix})
		}
	})
}

// TestPinsOnCluster: the pins hash is one key, in one slot.
func TestPinsOnCluster(t *testing.T) {
	client := oneNodeCluster(t)
	storetest.RunPins(t, func(t *testing.T) (idempotency.Store, func() idempotency.Store) {
		prefix := uniquePrefix(t, client)
		return New(client, Options{Prefix: prefix}), func() idempotency.Store {
			again := redis.NewClusterClient(&redis.ClusterOptions{Addrs: client.Options().Addrs})
			t.Cleanup(func() { _ = again.Close() })
			return New(again, Options{Prefix: prefix})
		}
	})
}
