package redisreceipts_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/receipts"
	"github.com/toolgateway/toolgateway/gateway/receipts/receiptstest"
	"github.com/toolgateway/toolgateway/gateway/receipts/redisreceipts"
	"github.com/toolgateway/toolgateway/internal/redistest"
)

// newClient connects to the test Redis and closes the client at the end.
func newClient(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newPrefix returns a prefix of the test's own; its keys are deleted at
// the end (never a flush).
func newPrefix(t testing.TB, c redis.UniversalClient) string {
	t.Helper()
	prefix := redistest.Prefix("gwtest-receipts")
	t.Cleanup(func() {
		redistest.CleanPrefix(context.Background(), c, prefix)
	})
	return prefix
}

func TestConformance(t *testing.T) {
	receiptstest.Run(t, func(t *testing.T) receiptstest.Backend {
		c1, c2 := newClient(t), newClient(t)
		prefix := newPrefix(t, c1)
		return receiptstest.Backend{
			Replicas: [2]receipts.Store{redisreceipts.New(c1, prefix, nil), redisreceipts.New(c2, prefix, nil)},
			Open:     func(*testing.T) receipts.Store { return redisreceipts.New(newClient(t), prefix, nil) },
			Raw:      raw{client: c1, prefix: prefix},
		}
	})
}

// raw writes the chain's sorted set directly.
type raw struct {
	client redis.UniversalClient
	prefix string
}

func (r raw) log(tenant string) string { return r.prefix + "{receipts:" + tenant + "}:log" }

func (r raw) head(tenant string) string { return r.prefix + "{receipts:" + tenant + "}:head" }

// Put replaces what is at seq; a line already stored elsewhere moves (a
// sorted set holds a member once), which is what a swap wants.
func (r raw) Put(t *testing.T, tenant string, seq int64, line []byte) {
	s := strconv.FormatInt(seq, 10)
	if err := r.client.ZRemRangeByScore(t.Context(), r.log(tenant), s, s).Err(); err != nil {
		t.Fatal(err)
	}
	if err := r.client.ZAdd(t.Context(), r.log(tenant), redis.Z{Score: float64(seq), Member: string(line)}).Err(); err != nil {
		t.Fatal(err)
	}
}

func (r raw) Delete(t *testing.T, tenant string, seq int64) {
	s := strconv.FormatInt(seq, 10)
	if n, err := r.client.ZRemRangeByScore(t.Context(), r.log(tenant), s, s).Result(); err != nil || n != 1 {
		t.Fatalf("delete seq %d: %d removed, %v", seq, n, err)
	}
}

func (r raw) SetHead(t *testing.T, tenant string, h receipts.Head) {
	var err error
	if h == (receipts.Head{}) {
		err = r.client.Del(t.Context(), r.head(tenant)).Err()
	} else {
		err = r.client.HSet(t.Context(), r.head(tenant), "seq", strconv.FormatInt(h.Seq, 10), "hash", h.Hash).Err()
	}
	if err != nil {
		t.Fatal(err)
	}
}

func (r raw) Unlist(t *testing.T, tenant string) {
	if n, err := r.client.SRem(t.Context(), r.prefix+"receipts:tenants", tenant).Result(); err != nil || n != 1 {
		t.Fatalf("unlist %s: %d removed, %v", tenant, n, err)
	}
}

func (r raw) PutCheckpoint(t *testing.T, c receipts.Checkpoint) {
	line, err := receipts.EncodeCheckpoint(c)
	if err != nil {
		t.Fatal(err)
	}
	key := r.prefix + "{receipts:" + c.Tenant + "}:checkpoints"
	if err := r.client.ZAdd(t.Context(), key, redis.Z{Score: float64(c.Seq), Member: string(line)}).Err(); err != nil {
		t.Fatal(err)
	}
}
