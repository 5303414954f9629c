package redisstore

import (
	"testing"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/storetest"
)

func TestConformance(t *testing.T) {
	client := testClient(t)
	storetest.Run(t, func(t *testing.T) idempotency.Store {
		return New(client, Options{Prefix: uniquePrefix(t, client)})
	})
}
