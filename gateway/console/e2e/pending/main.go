// Command pending is the console's end-to-end tests' stand-in for the
// gateway's decide stage: it writes a pending approval into a gateway's
// Redis store exactly as the stage will (a Claim carrying the approval,
// for the record a later call of that key, tool, step and arguments finds),
// and, with -cleanup, deletes every key under the test's prefix. It is a
// test helper, not part of the gateway.
//
//	go run ./gateway/console/e2e/pending -redis URL -prefix P -tool pay -key K -session S -step N -args JSON -reason R
//	go run ./gateway/console/e2e/pending -redis URL -prefix P -cleanup
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"time"

	"github.com/oklog/ulid/v2"
	"github.com/redis/go-redis/v9"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/idempotency/redisstore"
	"github.com/toolgateway/toolgateway/keyderive"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pending:", err)
		os.Exit(1)
	}
}

func run() error {
	redisURL := flag.String("redis", "redis://127.0.0.1:6379/0", "the gateway's store")
	prefix := flag.String("prefix", "", "the gateway's store.key_prefix")
	cleanup := flag.Bool("cleanup", false, "delete every key under -prefix and exit")
	tenant := flag.String("tenant", "anonymous", "tenant")
	tool := flag.String("tool", "", "tool")
	key := flag.String("key", "", "the call's (opaque) idempotency key")
	session := flag.String("session", "", "Agent-Session-Id")
	step := flag.Uint64("step", 0, "Agent-Step-Index")
	args := flag.String("args", "{}", "the call's arguments")
	reason := flag.String("reason", "", "the rule's reason")
	flag.Parse()
	if *prefix == "" {
		return fmt.Errorf("-prefix is required (never touch another deployment's keys)")
	}
	opts, err := redis.ParseURL(*redisURL)
	if err != nil {
		return err
	}
	client := redis.NewClient(opts)
	defer client.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if *cleanup {
		iter := client.Scan(ctx, 0, *prefix+"*", 500).Iterator()
		for iter.Next(ctx) {
			if err := client.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	}
	canonical, err := keyderive.Canonicalize([]byte(*args))
	if err != nil {
		return err
	}
	id := ulid.Make().String()
	d, err := redisstore.New(client, redisstore.Options{Prefix: *prefix}).Claim(ctx, idempotency.ClaimRequest{
		Scope:       idempotency.Scope{Tenant: *tenant, Tool: *tool, Key: *key},
		Fingerprint: keyderive.Fingerprint(canonical), Step: &idempotency.Step{SessionID: *session, Index: *step}, StepGuard: true,
		ExecutionID: ulid.Make().String(), Owner: "console-e2e", LockTTL: 30 * time.Second, ReplayTTL: time.Hour,
		CanonicalArguments: canonical,
		Approval:           &idempotency.ApprovalClaim{ID: id, Rule: 1, Reason: *reason, Timeout: time.Hour, UseWithin: time.Hour},
	})
	if err != nil {
		return err
	}
	if d.Outcome != idempotency.OutcomeAwaitingApproval {
		return fmt.Errorf("claim answered %s, not awaiting approval", d.Outcome)
	}
	fmt.Println(d.Approval.ID)
	return nil
}
