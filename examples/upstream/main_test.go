package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestOpensOneTicketPerKey(t *testing.T) {
	srv := httptest.NewServer(newTickets().routes())
	defer srv.Close()
	post := func(key, body string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/tickets", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	s1, first := post("k1", `{"title":"disk full"}`)
	s2, again := post("k1", `{"title":"disk full"}`)
	s3, other := post("k2", `{"title":"cpu hot"}`)
	if s1 != 201 || s2 != 201 || first != again || !strings.Contains(first, `"id":1`) || !strings.Contains(other, `"id":2`) || s3 != 201 {
		t.Fatalf("got %d %s / %d %s / %d %s", s1, first, s2, again, s3, other)
	}
	if s, _ := post("", `{"title":"x"}`); s != 400 {
		t.Fatalf("no key: %d", s)
	}
	if s, _ := post("k3", `{}`); s != 400 {
		t.Fatalf("no title: %d", s)
	}
}
