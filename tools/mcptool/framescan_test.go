package mcptool

import (
	"bufio"
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
)

func scanAll(t *testing.T, frame string, chunk int) []scannedMessage {
	t.Helper()
	var s frameScanner
	for i := 0; i < len(frame); i += chunk {
		_, _ = s.Write([]byte(frame[i:min(i+chunk, len(frame))]))
	}
	return s.messages()
}

// TestFrameScannerFindsTheMessageID covers where "id" can be: first (go-sdk),
// after a large result (other SDKs), next to members called "id" inside the
// result or params that are not the message's, in a batch, a string id with
// escaped quotes, and a request's method. Every case is fed whole and in
// chunks of one and seven bytes (an id split across reads).
func TestFrameScannerFindsTheMessageID(t *testing.T) {
	big := strings.Repeat(`x\"{}[],:`, 1000)
	cases := []struct {
		name, frame string
		want        []scannedMessage
	}{
		{"id first", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + big + `"}]}}`, []scannedMessage{{id: []byte("7")}}},
		{"id last", `{"jsonrpc":"2.0","result":{"id":99,"content":[{"text":"` + big + `","id":"inner"}]},"id":12}`, []scannedMessage{{id: []byte("12")}}},
		{"string id with escapes", `{"result":{},"id" : "a\"b\\c" }`, []scannedMessage{{id: []byte(`"a\"b\\c"`)}}},
		{"request from the server", `{"method":"sampling/createMessage","params":{"id":3,"method":"x"},"id":"s1","jsonrpc":"2.0"}`, []scannedMessage{{id: []byte(`"s1"`), hasMethod: true}}},
		{"notification", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"id":5}}`, []scannedMessage{{hasMethod: true}}},
		{"batch", `[{"id":1,"result":{"id":2}},{"result":{"x":[{"id":3}]},"id":4},{"method":"m"}]`, []scannedMessage{{id: []byte("1")}, {id: []byte("4")}, {hasMethod: true}}},
		{"id that is an object is not kept", `{"id":{"id":1},"result":{}}`, []scannedMessage{{}}},
		{"negative and fractional literal ids", `{"result":[1,2],"id":-3.5e2}`, []scannedMessage{{id: []byte("-3.5e2")}}},
	}
	for _, c := range cases {
		for _, chunk := range []int{len(c.frame), 1, 7} {
			got := scanAll(t, c.frame, chunk)
			if len(got) != len(c.want) {
				t.Fatalf("%s (chunks of %d): %d messages, want %d", c.name, chunk, len(got), len(c.want))
			}
			for i := range got {
				if !bytes.Equal(got[i].id, c.want[i].id) || got[i].hasMethod != c.want[i].hasMethod {
					t.Fatalf("%s (chunks of %d): message %d = {id %s method %v}, want {id %s method %v}", c.name, chunk, i, got[i].id, got[i].hasMethod, c.want[i].id, c.want[i].hasMethod)
				}
			}
		}
	}
}

// discardLog is a logger that drops everything.
var discardLog = slog.New(slog.DiscardHandler)

// TestFrameFilterNeverHoldsMoreThanTheCap streams a 20 MiB message (the id
// at its end) between two small ones through a filter capped at 64 KiB: the
// small ones pass unchanged, the large one becomes the error answering its
// id, and the filter never held more than the cap of any message.
func TestFrameFilterNeverHoldsMoreThanTheCap(t *testing.T) {
	const limit = 64 << 10
	small1 := `{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`
	small2 := `{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}`
	pr, pw := io.Pipe()
	go func() {
		_, _ = io.WriteString(pw, small1+"\n\n")
		_, _ = io.WriteString(pw, `{"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"`)
		chunk := bytes.Repeat([]byte("y"), 1<<20)
		for range 20 {
			_, _ = pw.Write(chunk)
		}
		_, _ = io.WriteString(pw, `"}]},"id":"call-2"}`+"\r\n")
		_, _ = io.WriteString(pw, small2+"\n")
		_ = pw.Close()
	}()
	var server bytes.Buffer
	f := newFrameFilter(pr, limit, &server, discardLog)
	out, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != 3 || lines[0] != small1 || lines[2] != small2 {
		t.Fatalf("filtered stream: %.300q", out)
	}
	if want := string(tooLargeResponse([]byte(`"call-2"`), limit)); lines[1] != want {
		t.Fatalf("stand-in = %s, want %s", lines[1], want)
	}
	if f.peak > limit {
		t.Fatalf("the filter held %d bytes of one message, cap %d", f.peak, limit)
	}
	if f.peak < len(small1) {
		t.Fatalf("peak %d: the small messages were not counted", f.peak)
	}
	if server.Len() != 0 {
		t.Fatalf("answered the server: %s", server.String())
	}
	if _, ok := responseTooLarge(decodeError(t, lines[1])); !ok {
		t.Fatal("the stand-in is not recognised as too large")
	}
}

// TestFrameFilterAnswersAnOversizedServerRequest: a request from the server
// over the cap is answered on its stdin and not passed on.
func TestFrameFilterAnswersAnOversizedServerRequest(t *testing.T) {
	frame := `{"jsonrpc":"2.0","id":"srv-1","method":"sampling/createMessage","params":{"text":"` + strings.Repeat("z", 5000) + `"}}` + "\n"
	var server bytes.Buffer
	f := newFrameFilter(strings.NewReader(frame), 1000, &server, discardLog)
	out, err := io.ReadAll(f)
	if err != nil || len(out) != 0 {
		t.Fatalf("passed on %q, %v", out, err)
	}
	if want := string(tooLargeResponse([]byte(`"srv-1"`), 1000)) + "\n"; server.String() != want {
		t.Fatalf("server got %q, want %q", server.String(), want)
	}
}

// TestSSEBodyReplacesAnOversizedEvent: events under the cap pass unchanged
// (their id: and event: lines too); an oversized event (its data split over
// two data lines, the id at the end) becomes an event with the error
// answering that id; the reader never held more than the cap.
func TestSSEBodyReplacesAnOversizedEvent(t *testing.T) {
	const limit = 4096
	ok := "id: 1\nevent: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\n"
	huge := "id: 2\ndata: {\"jsonrpc\":\"2.0\",\"result\":{\"text\":\"" + strings.Repeat("w", 300000) + "\"},\n" +
		"data: \"id\":41}\n\n"
	tail := "id: 3\ndata: {\"jsonrpc\":\"2.0\",\"id\":42,\"result\":{}}\n\n"
	src := io.NopCloser(strings.NewReader(ok + huge + tail))
	b := &sseBody{src: bufio.NewReaderSize(src, 1024), c: src, maxBytes: limit, log: discardLog}
	out, err := io.ReadAll(b)
	if err != nil {
		t.Fatal(err)
	}
	want := ok + "event: message\ndata: " + string(tooLargeResponse([]byte("41"), limit)) + "\n\n" + tail
	if string(out) != want {
		t.Fatalf("stream = %.400q\nwant %.400q", out, want)
	}
	if cap(b.event) > limit+1024 {
		t.Fatalf("the reader kept a buffer of %d bytes, cap %d", cap(b.event), limit)
	}
}

// TestJSONBodyOverTheCap: an application/json answer over the cap is
// replaced by the error answering the request's id, whether its length is
// announced or not.
func TestJSONBodyOverTheCap(t *testing.T) {
	body := `{"jsonrpc":"2.0","id":5,"result":{"text":"` + strings.Repeat("q", 10000) + `"}}`
	for _, size := range []int64{int64(len(body)), -1} {
		b := &jsonBody{src: io.NopCloser(strings.NewReader(body)), size: size, maxBytes: 1000, callID: []byte("5"), log: discardLog}
		out, err := io.ReadAll(b)
		if err != nil || string(out) != string(tooLargeResponse([]byte("5"), 1000)) {
			t.Fatalf("size %d: %q %v", size, out, err)
		}
	}
	small := `{"jsonrpc":"2.0","id":5,"result":{}}`
	b := &jsonBody{src: io.NopCloser(strings.NewReader(small)), size: -1, maxBytes: 1000, callID: []byte("5"), log: discardLog}
	if out, err := io.ReadAll(b); err != nil || string(out) != small {
		t.Fatalf("small answer: %q %v", out, err)
	}
}

// decodeError decodes the error of a JSON-RPC response line.
func decodeError(t *testing.T, line string) error {
	t.Helper()
	msg, err := jsonrpc.DecodeMessage([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	resp, ok := msg.(*jsonrpc.Response)
	if !ok || resp.Error == nil {
		t.Fatalf("%s is not an error response", line)
	}
	return resp.Error
}
