package gatewaytest

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/toolgateway/toolgateway/gateway"
	"github.com/toolgateway/toolgateway/gateway/callpath"
	"github.com/toolgateway/toolgateway/gateway/idempotency/boltstore"
	"github.com/toolgateway/toolgateway/tools"
)

// FuzzGateway is the gateway the fuzz targets of both doors drive
// (FuzzHandler, FuzzMCPHandler): the embedded store in f's temp dir, the
// tools given, arguments up to 4 KiB, a private metrics registry, and
// mounts (the MCP door, for its target).
func FuzzGateway(f *testing.F, toolset []tools.Tool, mounts ...callpath.Mount) *gateway.Server {
	f.Helper()
	registry := tools.NewRegistry()
	for _, tool := range toolset {
		if err := registry.Add(tool); err != nil {
			f.Fatal(err)
		}
	}
	store, err := boltstore.Open(filepath.Join(f.TempDir(), "fuzz.db"), boltstore.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = store.Close() })
	reg := prometheus.NewRegistry()
	gw, err := gateway.NewServer(callpath.Options{Store: store, Tools: registry, MaxBodyBytes: 4096, Registerer: reg, Gatherer: reg,
		Mounts: mounts})
	if err != nil {
		f.Fatal(err)
	}
	return gw
}

// FuzzRequest is a request as a client on the wire sends it: HTTP/1.1 to
// gateway.test from a documentation address, the body's length declared;
// built by hand, since a fuzzer's path and headers need not be valid.
func FuzzRequest(method, path string, h http.Header, body []byte) *http.Request {
	return (&http.Request{
		Method:        method,
		URL:           &url.URL{Path: path},
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        h,
		Body:          io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)),
		Host:          "gateway.test",
		RemoteAddr:    "192.0.2.1:1234",
	}).WithContext(context.Background())
}
