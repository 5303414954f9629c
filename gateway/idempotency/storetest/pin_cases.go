package storetest

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/toolgateway/toolgateway/gateway/idempotency"
	"github.com/toolgateway/toolgateway/gateway/pins"
)

// RunPins runs the tool pin cases (pins.Store) against stores made by
// newStore: it returns a fresh, isolated store and reopen, which closes
// that store and opens the same data again (a gateway restart: a new
// process, a new client on the same Redis prefix, a new pool on the same
// PostgreSQL schema).
func RunPins(t *testing.T, newStore func(t *testing.T) (store idempotency.Store, reopen func() idempotency.Store)) {
	t.Helper()
	cases := []struct {
		name string
		run  func(t *testing.T, store idempotency.Store, reopen func() idempotency.Store)
	}{
		{"NoPinIsNotFound", pinNotFound},
		{"FirstPinWinsAndIsKept", pinFirstWins},
		{"ConcurrentFirstPinsAgree", pinConcurrentFirst},
		{"SetPinReplaces", pinSetReplaces},
		{"PinsAreListedSortedAndSurviveARestart", pinsSurviveRestart},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			store, reopen := newStore(t)
			tc.run(t, store, reopen)
		})
	}
}

// pinStore is store's pins.Store side.
func pinStore(t *testing.T, store idempotency.Store) pins.Store {
	t.Helper()
	p, ok := store.(pins.Store)
	if !ok {
		t.Fatalf("%T keeps no tool pins", store)
	}
	return p
}

// testPin is a pin of tool whose definition is def.
func testPin(tool, def, by string) pins.Pin {
	canonical := []byte(`{"description":"` + def + `","name":"` + tool + `"}`)
	return pins.Pin{Tool: tool, SHA256: pins.Hash(canonical), Definition: canonical,
		At: time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC), By: by}
}

func samePin(t *testing.T, what string, got, want pins.Pin) {
	t.Helper()
	if got.Tool != want.Tool || got.SHA256 != want.SHA256 || string(got.Definition) != string(want.Definition) ||
		!got.At.Equal(want.At) || got.By != want.By {
		t.Fatalf("%s: got %+v, want %+v", what, got, want)
	}
}

func pinNotFound(t *testing.T, store idempotency.Store, _ func() idempotency.Store) {
	if _, err := pinStore(t, store).Pin(t.Context(), "t_nothing"); !errors.Is(err, pins.ErrNotFound) {
		t.Fatalf("Pin of an unpinned tool: %v, want ErrNotFound", err)
	}
	all, err := pinStore(t, store).Pins(t.Context())
	if err != nil || len(all) != 0 {
		t.Fatalf("Pins of an empty store: %v, %v; want none", all, err)
	}
}

func pinFirstWins(t *testing.T, store idempotency.Store, _ func() idempotency.Store) {
	ps := pinStore(t, store)
	first, second := testPin("t_refund", "Refund a payment.", pins.ByFirstUse), testPin("t_refund", "Refund a payment; also email the CFO.", pins.ByFirstUse)
	got, created, err := ps.PinFirst(t.Context(), first)
	if err != nil || !created {
		t.Fatalf("first PinFirst: created %v, %v; want created", created, err)
	}
	samePin(t, "first PinFirst", got, first)
	got, created, err = ps.PinFirst(t.Context(), second)
	if err != nil || created {
		t.Fatalf("second PinFirst: created %v, %v; want the first kept", created, err)
	}
	samePin(t, "second PinFirst", got, first)
	got, err = ps.Pin(t.Context(), "t_refund")
	if err != nil {
		t.Fatal(err)
	}
	samePin(t, "Pin", got, first)
}

func pinConcurrentFirst(t *testing.T, store idempotency.Store, _ func() idempotency.Store) {
	ps := pinStore(t, store)
	const n = 8
	var wg sync.WaitGroup
	results := make([]pins.Pin, n)
	createdBy := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], createdBy[i], errs[i] = ps.PinFirst(t.Context(), testPin("t_send", string(rune('a'+i)), pins.ByFirstUse))
		}()
	}
	wg.Wait()
	created := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("PinFirst %d: %v", i, errs[i])
		}
		if createdBy[i] {
			created++
		}
		if results[i].SHA256 != results[0].SHA256 {
			t.Fatalf("concurrent PinFirst disagree: %s and %s", results[i].SHA256, results[0].SHA256)
		}
	}
	if created != 1 {
		t.Fatalf("%d concurrent PinFirst stored a pin, want exactly 1", created)
	}
}

func pinSetReplaces(t *testing.T, store idempotency.Store, _ func() idempotency.Store) {
	ps := pinStore(t, store)
	first, accepted := testPin("t_pay", "Pay.", pins.ByFirstUse), testPin("t_pay", "Pay, in any currency.", "alice")
	if _, _, err := ps.PinFirst(t.Context(), first); err != nil {
		t.Fatal(err)
	}
	if err := ps.SetPin(t.Context(), accepted); err != nil {
		t.Fatal(err)
	}
	got, err := ps.Pin(t.Context(), "t_pay")
	if err != nil {
		t.Fatal(err)
	}
	samePin(t, "after SetPin", got, accepted)
}

func pinsSurviveRestart(t *testing.T, store idempotency.Store, reopen func() idempotency.Store) {
	ps := pinStore(t, store)
	want := []pins.Pin{testPin("a_delete", "Delete.", pins.ByFirstUse), testPin("b_charge", "Charge.", pins.ByConfig), testPin("c_list", "List.", "bob")}
	for _, i := range []int{2, 0, 1} {
		if err := ps.SetPin(t.Context(), want[i]); err != nil {
			t.Fatal(err)
		}
	}
	again := reopen()
	t.Cleanup(func() { _ = again.Close() })
	got, err := pinStore(t, again).Pins(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("after a restart: %d pins, want %d", len(got), len(want))
	}
	for i := range want {
		samePin(t, "after a restart", got[i], want[i])
	}
}
